package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// publicPaths are served without a token and under any Host: probes of a
// load balancer, an orchestrator or a container's HEALTHCHECK carry no token
// and may name the machine by any address.
var publicPaths = map[string]bool{"/healthz": true, "/readyz": true}

// authenticate answers 401 with WWW-Authenticate: Bearer unless the request
// carries one of h.tokens as "Authorization: Bearer …". With no tokens
// configured every request passes.
func (h *handler) authenticate(next http.Handler) http.Handler {
	if len(h.tokens) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		given, valid := h.bearer(r)
		if valid {
			next.ServeHTTP(w, r)
			return
		}
		msg := "this server requires a bearer token: send the header Authorization: Bearer <token> " +
			"with a token sked serve was started with (--token or SKED_TOKEN)"
		if given {
			msg = "the bearer token is not one this server accepts"
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="sked"`)
		h.error(w, r, &requestError{Status: http.StatusUnauthorized, Msg: msg})
	})
}

// bearer reports whether r carries credentials in its Authorization header
// (given) and whether they are "Bearer" and one of h.tokens (valid).
func (h *handler) bearer(r *http.Request) (given, valid bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok, ok && strings.EqualFold(scheme, "Bearer") && h.validToken(strings.TrimSpace(token))
}

// mayUseAPI reports whether r passes what every other route asks of it: with
// tokens, one of them; without, a Host that is served. The public paths
// answer any request, and tell more only to these.
func (h *handler) mayUseAPI(r *http.Request) bool {
	if len(h.tokens) == 0 {
		return h.servesHost(r.Host)
	}
	_, valid := h.bearer(r)
	return valid
}

// validToken reports whether token is one of h.tokens. It compares SHA-256
// digests in constant time and checks every token, so neither the length
// nor the position of a match shows in the time it takes.
func (h *handler) validToken(token string) bool {
	got := sha256.Sum256([]byte(token))
	match := 0
	for _, want := range h.tokens {
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return match == 1
}
