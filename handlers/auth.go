package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// publicPaths are served without a token and under any Host: probes of a
// load balancer, an orchestrator or a container's HEALTHCHECK carry no token
// and may name the machine by any address.
var publicPaths = map[string]bool{"/healthz": true, "/readyz": true}

// A role is what the holder of a token may do.
type role uint8

const (
	roleNone   role = iota // no valid token
	roleWorker             // claim jobs and report on the runs it holds
	roleReader             // read: GET and HEAD, and dry runs of puts
	roleAdmin              // everything
)

// roleHeader names, on every answer to a request with a valid token, the
// token's role ("admin", "read" or "worker"), so that a client (the
// dashboard) can leave out what the token may not do.
const roleHeader = "Sked-Role"

// String is the role's name in roleHeader.
func (ro role) String() string {
	switch ro {
	case roleAdmin:
		return "admin"
	case roleReader:
		return "read"
	case roleWorker:
		return "worker"
	}
	return "none"
}

// tokenDigest is the SHA-256 digest of a bearer token: tokens are compared,
// and remembered, as digests.
type tokenDigest = [sha256.Size]byte

// token is the digest of one configured token and its role.
type token struct {
	digest tokenDigest
	role   role
}

// tokenSet is one of Config's lists of tokens: its role, and the flag and
// variable sked serve reads it from.
type tokenSet struct {
	tokens []string
	role   role
	source string
}

// tokenSets are cfg's lists of tokens.
func tokenSets(cfg Config) []tokenSet {
	return []tokenSet{
		{cfg.Tokens, roleAdmin, "--token (SKED_TOKEN)"},
		{cfg.WorkerTokens, roleWorker, "--worker-token (SKED_WORKER_TOKEN)"},
		{cfg.ReadTokens, roleReader, "--read-token (SKED_READ_TOKEN)"},
	}
}

// tokensOf is cfg's tokens with their roles.
func tokensOf(cfg Config) []token {
	var out []token
	for _, set := range tokenSets(cfg) {
		for _, t := range set.tokens {
			out = append(out, token{sha256.Sum256([]byte(t)), set.role})
		}
	}
	return out
}

// CheckTokens refuses an empty token in cfg, or one given for two roles:
// which role it has would be a guess.
func CheckTokens(cfg Config) error {
	seen := map[string]string{} // token: the source it was first seen in
	for _, set := range tokenSets(cfg) {
		for _, t := range set.tokens {
			if t == "" {
				return fmt.Errorf("an empty token in %s: give each token at least one character", set.source)
			}
			if other, ok := seen[t]; ok && other != set.source {
				return fmt.Errorf("a token is given both in %s and in %s: give each role its own tokens", other, set.source)
			}
			seen[t] = set.source
		}
	}
	return nil
}

// unauthorizedLogEvery spaces the log lines of requests refused 401, and
// those of requests refused 429 for an address's wrong tokens.
const unauthorizedLogEvery = time.Minute

// authenticate answers 401 with WWW-Authenticate: Bearer unless the request
// carries one of h.tokens as "Authorization: Bearer …", and 403 when that
// token's role does not allow the request. An address that sent too many
// wrong tokens is answered 429 first (see authLimiter). With no tokens
// configured every request passes. Refusals are logged, a line a minute at
// most with how many came since the last.
func (h *handler) authenticate(next http.Handler) http.Handler {
	if len(h.tokens) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		scheme, role, client, err := h.limitedBearer(r)
		if err != nil {
			if n, ok := h.limited.tick(time.Now()); ok {
				h.logger.WarnContext(r.Context(), "requests refused (429) from addresses that sent too many wrong tokens (someone guessing, or a client misconfigured)",
					"refused", n, "last_from", client.String(), "last_path", r.URL.Path)
			}
			h.error(w, r, err)
			return
		}
		if role != roleNone {
			w.Header().Set(roleHeader, role.String())
		}
		switch {
		case role == roleNone:
			msg := "this server requires a bearer token: send the header Authorization: Bearer <token> " +
				"with a token sked serve was started with (SKED_TOKEN)"
			switch {
			case strings.EqualFold(scheme, "Bearer"):
				msg = "the bearer token is not one this server accepts"
			case scheme != "":
				msg = fmt.Sprintf("the Authorization header is of scheme %q; this server takes only a bearer token: Authorization: Bearer <token>", scheme)
			}
			if n, ok := h.unauthorized.tick(time.Now()); ok {
				h.logger.WarnContext(r.Context(), "requests refused for a missing or wrong token (a client misconfigured, or someone guessing)",
					"refused", n, "last_from", client.String(), "last_path", r.URL.Path, "last_reason", msg)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="sked"`)
			h.error(w, r, &requestError{Status: http.StatusUnauthorized, Msg: msg})
		case !role.allows(r):
			h.error(w, r, &requestError{Status: http.StatusForbidden, Msg: role.refusal(r)})
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// allows reports whether a token of this role may make request r. A path it
// does not recognise needs the admin role.
func (ro role) allows(r *http.Request) bool {
	switch ro {
	case roleAdmin:
		return true
	case roleReader:
		return r.Method == http.MethodGet || r.Method == http.MethodHead || writesNothing(r)
	case roleWorker:
		return r.Method == http.MethodPost && isWorkerPath(r.URL.Path) || isContract(r)
	}
	return false
}

// writesNothing reports whether r, not a GET, writes nothing, so that a read
// token may make it: a put of a named job as a dry run (sked apply
// --dry-run), or a schedule's check (POST /schedules/check).
func writesNothing(r *http.Request) bool {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/schedules/check":
		return true
	case !isPut(r):
		return false
	}
	dry, err := dryRunParam(r)
	return err == nil && dry
}

// refusal is the detail of a 403 to a token of this role for r.
func (ro role) refusal(r *http.Request) string {
	switch {
	case ro == roleReader && r.Method == http.MethodPost && isWorkerPath(r.URL.Path):
		return "this is a read-only token (SKED_READ_TOKEN): claiming jobs and reporting their runs needs " +
			"a token from the server's SKED_WORKER_TOKEN (or SKED_TOKEN)"
	case ro == roleWorker:
		return "this is a worker token (SKED_WORKER_TOKEN): it may only claim jobs and report on their runs " +
			"(POST /claims, /jobs/{id}/heartbeat, /jobs/{id}/complete, /workers/stopping, /workers/stopped) and read /openapi.json; use a token from SKED_TOKEN for anything else"
	}
	return "this is a read-only token (SKED_READ_TOKEN): it may only read (GET, dry runs of sked apply, schedule checks); use a token from SKED_TOKEN to change anything"
}

// isContract reports whether r reads the API's contract, GET (or HEAD)
// /openapi.json, which every token may: a worker's author reads the
// protocol there.
func isContract(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/openapi.json"
}

// isWorkerPath reports whether path is one of the routes a worker uses:
// /claims, /jobs/{id}/heartbeat, /jobs/{id}/complete, /workers/stopping
// and /workers/stopped.
func isWorkerPath(path string) bool {
	if path == "/claims" || path == "/workers/stopping" || path == "/workers/stopped" {
		return true
	}
	rest, ok := strings.CutPrefix(path, "/jobs/")
	id, action, _ := strings.Cut(rest, "/")
	return ok && id != "" && (action == "heartbeat" || action == "complete")
}

// bearer returns the scheme of the credentials in r's Authorization header
// ("" for none) and, when they are "Bearer", the SHA-256 digest of the
// token and its role when it is one of h.tokens.
func (h *handler) bearer(r *http.Request) (scheme string, digest tokenDigest, ro role) {
	scheme, t, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	switch {
	case !ok:
		return "", digest, roleNone
	case !strings.EqualFold(scheme, "Bearer"):
		return scheme, digest, roleNone
	}
	digest = sha256.Sum256([]byte(strings.TrimSpace(t)))
	return scheme, digest, h.roleOf(digest)
}

// mayUseAPI reports whether r passes what every other route asks of it: with
// tokens, one of them (of any role); without, a Host that is served. The
// public paths answer any request, and tell more only to these.
func (h *handler) mayUseAPI(r *http.Request) bool {
	if len(h.tokens) == 0 {
		return h.servesHost(r.Host)
	}
	_, ro, _, err := h.limitedBearer(r)
	return err == nil && ro != roleNone
}

// limitedBearer is h.bearer of r, counted in h.authLimit under r's client
// address (see clientOf), which it returns too: a wrong bearer token
// spends one of the address's budget, and an address with none left gets
// an *authLimitError and no role, unless its token is one that was right
// from that address before it ran out (see authLimiter.admit).
func (h *handler) limitedBearer(r *http.Request) (scheme string, ro role, client netip.Addr, err error) {
	client = clientOf(r, h.trustedProxies)
	scheme, digest, ro := h.bearer(r)
	if !strings.EqualFold(scheme, "Bearer") {
		return scheme, ro, client, nil
	}
	done, err := h.authLimit.admit(client, digest, h.authLimit.now())
	if err != nil {
		return scheme, roleNone, client, err
	}
	done(ro == roleNone)
	return scheme, ro, client, nil
}

// roleOf is the role of t, roleNone if it is none of h.tokens. It compares
// SHA-256 digests in constant time and checks every token, so neither the
// length nor the position of a match shows in the time it takes.
func (h *handler) roleOf(got tokenDigest) role {
	found := roleNone
	for _, want := range h.tokens {
		match := subtle.ConstantTimeCompare(got[:], want.digest[:])
		found = role(subtle.ConstantTimeSelect(match, int(want.role), int(found)))
	}
	return found
}
