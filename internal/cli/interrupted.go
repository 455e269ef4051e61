package cli

import (
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync"
)

// sentChanges is the transport of a client command's requests that keeps
// track of its changes (requests other than GET, HEAD and a dry run), so
// that an interrupted command says what it did and whether the server may
// have made a change it got no answer to (interrupted).
type sentChanges struct {
	next http.RoundTripper

	mu      sync.Mutex
	made    int    // changes the server answered with 2xx; guarded by mu
	pending string // "METHOD PATH" of a change sent without an answer (yet); guarded by mu
}

// RoundTrip sends req through next. A change counts as sent once its
// connection is open (the server may read it from then on) and as
// answered once its status line came back.
func (s *sentChanges) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet || req.Method == http.MethodHead || req.URL.Query().Get("dryRun") == "true" {
		return s.next.RoundTrip(req)
	}
	label := req.Method + " " + req.URL.Path
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pending = label
	}})
	resp, err := s.next.RoundTrip(req.WithContext(ctx))
	if err == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pending = ""
		if resp.StatusCode < 300 {
			s.made++
		}
	}
	return resp, err
}

// interrupted is the message of a client command interrupted (Ctrl-C,
// SIGTERM) before it was done, its requests sent to server: a change that
// may have reached the server, the changes made before, or none.
func (s *sentChanges) interrupted(server string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.pending != "":
		msg := fmt.Sprintf("interrupted before it was done: %s was sent to %s and got no answer, so the server may have made that change or not", s.pending, server)
		if s.made > 0 {
			stay := "stay"
			if s.made == 1 {
				stay = "stays"
			}
			msg += fmt.Sprintf(" (the %s answered before it %s made)", plural(s.made, "change"), stay)
		}
		return msg + "; look (sked ls, sked show) before sending it again"
	case s.made > 0:
		return fmt.Sprintf("interrupted before it was done: %s had made %s for it, which stay made, and no other change reached it; "+
			"look (sked ls, sked show) at what is left to do", server, plural(s.made, "change"))
	default:
		return fmt.Sprintf("interrupted before it was done: no change reached %s, which changed nothing", server)
	}
}
