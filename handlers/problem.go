package handlers

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/clip"
)

// internalDetail is all a client learns of a 5xx; the error itself is logged.
const internalDetail = "internal error; see the server log"

// problem is an RFC 9457 problem details document. Type is "about:blank", so
// Title is the status text. Field, State and Run are sked's extension members.
type problem struct {
	Type   string      `json:"type"`
	Title  string      `json:"title"`
	Status int         `json:"status"`
	Detail string      `json:"detail"`
	Field  string      `json:"field,omitempty"` // wire name of the bad input
	State  db.JobState `json:"state,omitempty"` // the job's state, on a conflict
	Run    *db.Run     `json:"run,omitempty"`   // the live run, when a worker holds the job
	// retryAfter, when positive, is sent as Retry-After in seconds.
	retryAfter int
}

// Seconds a client is told to wait (Retry-After) before retrying a write
// refused for a full disk, a database locked by another process, or a
// database server out of reach.
const (
	retryFullAfter        = 10
	retryLockedAfter      = 2
	retryUnreachableAfter = 5
)

// requestError is a fault in the HTTP request itself (body, headers, query
// string) rather than in the job it describes: 400, 413 or 415.
type requestError struct {
	Status int
	Field  string // query parameter or body field, when one is to blame
	Msg    string
}

func (e *requestError) Error() string { return e.Msg }

// detailError keeps err's status and members but gives the client detail
// instead of err's own message, e.g. to name the job and what to do instead,
// and the job's state, when set, as a conflict's. Its Error is err's, so a
// log shows the original.
type detailError struct {
	err    error
	detail string
	state  db.JobState
}

func (e *detailError) Error() string { return e.err.Error() }
func (e *detailError) Unwrap() error { return e.err }

// claimsFullError refuses a claim that would wait while limit claims wait
// already (Config.MaxClaimWaits).
type claimsFullError struct{ limit int }

func (e *claimsFullError) Error() string {
	return fmt.Sprintf("as many claims wait as this server allows (%d)", e.limit)
}

// errShuttingDown refuses a claim that arrives while the server shuts down.
var errShuttingDown = errors.New("this server is shutting down and takes no new claims")

// errStopped answers what the store failed while the server shuts down or
// after it stopped: its store is closing or closed.
var errStopped = errors.New("this server is shutting down or has stopped; ask another node, or again once it is back")

// problemFor maps err to its problem. It is the one place that decides
// statuses: bad input 422 (400/413/415 for the request itself; a reused
// idempotency key is the idempotencyKey field's), ErrNotFound
// 404, ErrConflict and ErrStale 409, ErrStorageFull 507, ErrBusy,
// ErrUnreachable, ErrCommitUnknown, a claimsFullError and errShuttingDown 503, an
// authLimitError 429 (each with Retry-After: it can succeed later),
// anything else 500 with a generic detail.
func problemFor(err error) problem {
	p := problem{Type: "about:blank"}
	var (
		reqErr  *requestError
		valErr  *db.ValidationError
		conErr  *db.ConflictError
		keyErr  *db.KeyReusedError
		fullErr *claimsFullError
		authErr *authLimitError
	)
	switch {
	case errors.As(err, &reqErr):
		p.Status, p.Field, p.Detail = reqErr.Status, reqErr.Field, reqErr.Msg
	case errors.As(err, &valErr):
		p.Status, p.Field, p.Detail = http.StatusUnprocessableEntity, valErr.Field, validationDetail(valErr)
	case errors.As(err, &keyErr):
		p.Status, p.Field, p.Detail = http.StatusUnprocessableEntity, cmp.Or(keyErr.Field, "idempotencyKey"), keyErr.Error()
	case errors.Is(err, db.ErrInvalid):
		p.Status, p.Detail = http.StatusUnprocessableEntity, err.Error()
	case errors.Is(err, db.ErrNotFound):
		p.Status, p.Detail = http.StatusNotFound, err.Error()
	case errors.As(err, &conErr):
		p.Status, p.State, p.Run, p.Detail = http.StatusConflict, conErr.State, conErr.Run, conErr.Msg
	case errors.Is(err, db.ErrConflict), errors.Is(err, db.ErrStale):
		p.Status, p.Detail = http.StatusConflict, err.Error()
	case errors.As(err, &fullErr):
		p.Status, p.retryAfter = http.StatusServiceUnavailable, retryClaimAfter
		p.Detail = fmt.Sprintf("no job was due, and this server already holds as many waiting claims as it allows (%d; sked serve --max-claim-waits): "+
			"nothing was claimed; claim again after Retry-After seconds", fullErr.limit)
	case errors.As(err, &authErr):
		p.Status, p.retryAfter = http.StatusTooManyRequests, authErr.retryAfter()
		p.Detail = fmt.Sprintf("too many requests with a wrong bearer token came from this address (%d at once, then one per %s): "+
			"this one was refused whatever its token; check the token (SKED_TOKEN) and retry after Retry-After seconds",
			authFailBurst, authFailEvery)
	case errors.Is(err, errShuttingDown):
		p.Status, p.retryAfter = http.StatusServiceUnavailable, retryClaimAfter
		p.Detail = "this server is shutting down: it takes no new claims, and serves the heartbeats and completions of the runs it leased " +
			"until they end (sked serve --grace); nothing was claimed; claim again after Retry-After seconds, here or at another node"
	case errors.Is(err, errStopped):
		p.Status, p.retryAfter, p.Detail = http.StatusServiceUnavailable, retryClaimAfter, errStopped.Error()
	case errors.Is(err, db.ErrCommitUnknown):
		p.Status, p.retryAfter = http.StatusServiceUnavailable, retryUnreachableAfter
		p.Detail = "the connection to sked's database broke as the write committed: whether it was made is not known, " +
			"and it could not be read back; look before you retry (an idempotency key makes a create safe to retry), after Retry-After seconds"
	case errors.Is(err, db.ErrStorageFull):
		p.Status, p.retryAfter = http.StatusInsufficientStorage, retryFullAfter
		p.Detail = "the disk holding sked's database is full: nothing was written; free space there and retry (no restart is needed)"
	case errors.Is(err, db.ErrUnreachable):
		p.Status, p.retryAfter = http.StatusServiceUnavailable, retryUnreachableAfter
		p.Detail = "sked's database server cannot be reached (down, restarting or refusing connections): nothing was read or written; retry after Retry-After seconds"
	case errors.Is(err, db.ErrBusy):
		p.Status, p.retryAfter = http.StatusServiceUnavailable, retryLockedAfter
		p.Detail = "sked's database is busy (locked by another process or by writes queued ahead of this one, or a conflict with a concurrent write) and did not take the write: nothing was written, nor will be; retry shortly"
	default:
		p.Status, p.Detail = http.StatusInternalServerError, internalDetail
	}
	var d *detailError
	if p.Status < 500 && errors.As(err, &d) {
		p.Detail, p.State = d.detail, cmp.Or(d.state, p.State)
	}
	if p.Detail == "" {
		p.Detail = http.StatusText(p.Status)
	}
	p.Title = http.StatusText(p.Status)
	return p
}

// validationDetail is the sentence a client reads for e. Messages written in
// this package name their field already; a bare message from elsewhere (a
// payload validator) gets the field in front.
func validationDetail(e *db.ValidationError) string {
	if e.Field == "" || strings.Contains(e.Msg, e.Field) {
		return e.Msg
	}
	return e.Error()
}

// unreachableLogEvery spaces the log lines of requests answered 503 while
// the database cannot be reached.
const unreachableLogEvery = time.Minute

// error answers err as a problem. This is where a request's error stops:
// 5xx are logged with the real error (those of a database out of reach a
// line a minute), 4xx are the client's and are not, nor is a claim turned
// away because the server is shutting down (it has said so once, and its
// workers go elsewhere).
func (h *handler) error(w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(err)
	switch {
	case p.Status == http.StatusInternalServerError && h.shuttingDown():
		// The store closes as the server stops (an embedding program's
		// Handler outlives Run): a 503 sends a client to another node.
		h.logger.WarnContext(r.Context(), "http request failed while the server shuts down",
			"method", r.Method, "path", r.URL.Path, "err", err)
		p = problemFor(errStopped)
	case errors.Is(err, db.ErrUnreachable):
		// While the database is down every request is answered so: a
		// line a minute, with how many, rather than one each.
		if n, ok := h.unreachable.tick(time.Now()); ok {
			h.logger.ErrorContext(r.Context(), "requests answered 503: the database cannot be reached",
				"requests", n, "last_method", r.Method, "last_path", r.URL.Path, "err", err)
		}
	case p.Status >= 500 && !errors.Is(err, errShuttingDown):
		h.logger.ErrorContext(r.Context(), "http request failed",
			"method", r.Method, "path", r.URL.Path, "status", p.Status, "err", err)
	}
	h.writeProblem(w, p)
}

// writeProblem writes p as application/problem+json.
func (h *handler) writeProblem(w http.ResponseWriter, p problem) {
	// A detail quotes the value it refuses, which may be a megabyte.
	p.Detail = clip.Runes(p.Detail, maxDetail)
	b, err := json.Marshal(p)
	if err != nil { // only a Run could fail to encode, and it cannot
		b = []byte(`{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"` + internalDetail + `"}`)
		p.Status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/problem+json")
	if p.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(b, '\n'))
}

// maxDetail bounds a problem's detail, in characters: room for the
// longest message and the value it quotes, not for a megabyte echoed.
const maxDetail = 2000

// handleNotFound answers a path that no route serves; one that reads as
// a cancel action, as the other controls are, is told the route that
// cancels, and /test/clock, served only on a test clock, is told so.
func (h *handler) handleNotFound(w http.ResponseWriter, r *http.Request) {
	msg := "no such endpoint: " + r.Method + " " + r.URL.Path
	rest, isJob := strings.CutPrefix(r.URL.Path, "/jobs/")
	switch id, ok := strings.CutSuffix(rest, "/cancel"); {
	case isJob && ok && id != "" && !strings.Contains(id, "/"):
		msg += "; a job is cancelled with DELETE /jobs/" + id + ", and its running run stopped with POST /jobs/" + id + "/cancel-run"
	case r.URL.Path == testClockPath:
		msg += "; it exists only when the server runs with --test-clock (sked serve --test-clock), on a virtual clock, and this one runs on the real clock"
	}
	h.error(w, r, &requestError{Status: http.StatusNotFound, Msg: msg})
}

// handleMethodNotAllowed answers a known path asked with a method it does not
// serve, naming in Allow and in the detail the methods it does.
func (h *handler) handleMethodNotAllowed(routes chi.Routes) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if routes.Match(chi.NewRouteContext(), m, r.URL.Path) {
				allowed = append(allowed, m)
			}
		}
		if slices.Contains(allowed, http.MethodGet) && !slices.Contains(allowed, http.MethodHead) {
			// middleware.GetHead serves HEAD of every GET route, which
			// the router does not list.
			allowed = append(allowed, http.MethodHead)
		}
		h.error(w, r, notAllowed(w, r, allowed))
	}
}

// MethodNotAllowed answers r, whose path is served with the methods
// allowed only, as the API answers such a request for its own paths: 405
// problem+json naming them, and in Allow. web.Mount, serving the
// dashboard's files beside the API, answers other methods on them so.
func (a *API) MethodNotAllowed(w http.ResponseWriter, r *http.Request, allowed ...string) {
	a.h.error(w, r, notAllowed(w, r, allowed))
}

// notAllowed is the error of r, whose path is served with the methods
// allowed only (none: they are not known), and sets Allow to them.
func notAllowed(w http.ResponseWriter, r *http.Request, allowed []string) error {
	msg := r.Method + " is not allowed on " + r.URL.Path
	if len(allowed) > 0 {
		allowed = slices.Sorted(slices.Values(allowed))
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		msg += "; use " + strings.Join(allowed, " or ")
	}
	return &requestError{Status: http.StatusMethodNotAllowed, Msg: msg}
}
