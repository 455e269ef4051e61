package handlers

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// actorHeader names who sends a change, e.g. user@host; the job's timeline
// records it with the address the request came from.
const (
	actorHeader = wire.ActorHeader
	maxActorLen = 200
)

// checkActor reads the Sked-Actor header of every request but the probes
// (which answer any request) and answers 400 naming it when it is not at
// most maxActorLen bytes of printable UTF-8 text, whatever the route: a
// client that sends a bad one learns it at its first request, not at its
// first change. The routes that record a change read it with actorOf, the
// store from the request's context (db.WithActor).
func (h *handler) checkActor(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		who, err := actor(r)
		if err != nil {
			h.error(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(db.WithActor(r.Context(), who)))
	})
}

// actorOf is who sends r, as checkActor read it: the Sked-Actor header, or
// "api" without one, and the address r came from, as in
// "ann@laptop (192.0.2.7)".
func actorOf(r *http.Request) string { return db.ActorFrom(r.Context()) }

// printable reports whether s is UTF-8 text without control characters
// nor bidirectional ones (U+202E would show "evil" as "live"), which a
// terminal or a log line shows as it is.
func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) })
}

// actor is who sends r (see actorOf), or a 400 naming the header when it is
// too long or not printable UTF-8 text.
func actor(r *http.Request) (string, error) {
	who := strings.TrimSpace(r.Header.Get(actorHeader))
	switch {
	case who == "":
		who = "api"
	case len(who) > maxActorLen:
		return "", &requestError{Status: http.StatusBadRequest, Field: actorHeader,
			Msg: fmt.Sprintf("the %s header is %d bytes long; at most %d are allowed", actorHeader, len(who), maxActorLen)}
	case !printable(who):
		return "", &requestError{Status: http.StatusBadRequest, Field: actorHeader,
			Msg: fmt.Sprintf("the %s header %q is not printable UTF-8 text; send who you are, such as user@host", actorHeader, who)}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if host == "" {
		return who, nil
	}
	return who + " (" + host + ")", nil
}
