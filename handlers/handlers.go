// Package handlers is sked's HTTP API: the routes of docs/api.md (and of
// openapi.json, served at /openapi.json) on a chi router, over any db.Store. Every error answers as RFC 9457
// problem+json from one writer (problem.go); every other response is JSON.
// Request bodies are validated completely before the store is called, so a
// rejected request stores nothing.
package handlers

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/buildinfo"
)

// DefaultMaxBodyBytes bounds a request body when Config.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 1 << 20

// Page sizes of the list endpoints.
const (
	DefaultPageLimit = db.DefaultPageLimit
	MaxPageLimit     = 500
)

// Config is what New needs. Zero values mean the defaults stated per field.
type Config struct {
	// Store keeps the jobs and runs. Required.
	Store db.Store
	// Wake is called after a job is created (201), resumed or retried, so
	// the dispatcher claims it without waiting for its next poll, with the
	// jobs of each type that may be due now (nil: of any type, how many
	// unknown). It must not block. May be nil.
	Wake func(due map[string]int)
	// StoreAnnounces says that the store tells this process of its own
	// writes that make jobs due, as it does of other processes' writes
	// (PostgreSQL's NOTIFY, which the caller forwards to Wake and
	// WakeClaims): the handlers then wake nothing themselves, which would
	// wake the waiting claims twice for each job.
	StoreAnnounces bool
	// ValidatePayload checks the payload of a job kind (http, exec, …) and
	// returns a *db.ValidationError naming the bad field. Any other error is
	// reported as a problem with the payload field. May be nil.
	ValidatePayload func(typ string, payload json.RawMessage) error
	// CheckNotifyFunc checks a job's own notification settings (the events
	// and sinks it names, its ping URL) and returns a *db.ValidationError
	// naming the bad field; any other error is reported as a problem with
	// the notify field. sked serve gives its notifier's CheckSettings, which
	// knows the server's sinks. Nil: settings are taken as they are.
	CheckNotifyFunc func(*db.Notify) error
	// DisabledTypes maps a job type to the reason it cannot be created, e.g.
	// "exec" -> "exec jobs are off; start sked serve with --enable-exec".
	// Creating one answers 422 with that reason.
	DisabledTypes map[string]string
	// OwnTypes are the types the server's own pools run and keep to
	// itself (sked serve's built-in http, email and exec, its
	// deliveries' notify.http and notify.email, and the types an
	// embedding program registered Go handlers for): POST /claims
	// refuses them, so that a remote worker cannot take such a job, with
	// the secrets in its payload, and run it with other code or report it
	// done unrun.
	OwnTypes []string
	// MaxBodyBytes bounds a request body; bigger bodies answer 413. Zero
	// (or less) means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Logger receives the errors that end in a 5xx. Nil discards.
	Logger *slog.Logger
	// SeriesFunc returns the sampled history GET /stats/series answers, as a
	// JSON-encodable value. Nil answers 404.
	SeriesFunc func() any
	// Shutdown is closed when the server begins shutting down: waiting
	// POST /claims answer at once, and new ones 503 with Retry-After,
	// while heartbeats, completions and the rest are served as before
	// (see API.Drain). May be nil.
	Shutdown <-chan struct{}
	// MaxClaimWaits bounds the POST /claims that wait for a due job at
	// once; a claim past it that finds no job answers 503 at once, with
	// Retry-After. Zero (or less) means DefaultMaxClaimWaits.
	MaxClaimWaits int
	// Tokens are the bearer tokens that may use every route. With tokens
	// of any kind (Tokens, WorkerTokens, ReadTokens) a request must carry
	// one, and one whose role allows it; with none there is no
	// authentication. GET /healthz and /readyz never need one.
	Tokens []string
	// WorkerTokens may only claim jobs and report on their runs (POST
	// /claims, /jobs/{id}/heartbeat and /jobs/{id}/complete): the tokens
	// to give remote workers' machines.
	WorkerTokens []string
	// ReadTokens may only read: every GET and HEAD route, the dashboard's
	// and /metrics included.
	ReadTokens []string
	// AllowedHosts are the Host names (without port) served besides
	// localhost, 127.0.0.1 and [::1] when there are no Tokens, e.g. the name
	// a reverse proxy forwards. Without tokens any other Host answers 403,
	// except on /healthz and /readyz; with tokens the Host is not checked.
	AllowedHosts []string
	// TrustedProxies are the addresses of the reverse proxies in front of
	// the server. A request from one of them is counted, for the limit on
	// wrong bearer tokens, under the client address its X-Forwarded-For
	// names (the last one not itself a trusted proxy); from any other
	// address X-Forwarded-For is ignored. None: the peer's address is the
	// client's, and behind a proxy every client shares the proxy's limit.
	// Requests without an IP address (a unix socket's) share one limit,
	// and their X-Forwarded-For is never read: no prefix names them.
	TrustedProxies []netip.Prefix
	// Metrics serves GET /metrics (Prometheus). Nil answers 404.
	Metrics http.Handler
	// ReadyFunc decides GET /readyz: nil error is ready. Nil: always ready.
	ReadyFunc func(ctx context.Context) error
	// TestClock, when set, serves GET and POST /test/clock to read and move
	// it (sked serve --test-clock). Nil: no such route.
	TestClock TestClock
}

// handler holds the configuration shared by the route handlers. Immutable
// after New.
type handler struct {
	unauthorized    throttle       // the log lines of requests refused 401
	limited         throttle       // the log lines of requests refused 429 by authLimit
	unreachable     throttle       // the log lines of requests answered 503 for want of the database
	authLimit       *authLimiter   // wrong bearer tokens per client address; never nil
	trustedProxies  []netip.Prefix // Config.TrustedProxies
	store           db.Store
	wake            func(due map[string]int) // never nil; see Config.Wake
	storeAnnounces  bool                     // see Config.StoreAnnounces
	validatePayload func(string, json.RawMessage) error
	checkNotify     func(*db.Notify) error
	disabledTypes   map[string]string
	ownTypes        []string // see Config.OwnTypes
	maxBodyBytes    int64
	logger          *slog.Logger // never nil
	seriesFunc      func() any
	shutdown        <-chan struct{}
	claimers        *claimWaiters   // long polls of POST /claims; never nil
	remote          *remoteLeases   // leases handed to remote workers, for Drain; never nil
	stopping        stoppingWorkers // ends the claim waits of workers that stop
	answered        *answeredClaims // what named claims were answered, for a resend; never nil
	tokens          []token         // Config's tokens of every role
	allowedHosts    []string        // Config.AllowedHosts as hostName has them
	metrics         http.Handler
	readyFunc       func(context.Context) error
	testClock       TestClock
	openAPI         []byte // GET /openapi.json, with this sked's version
}

// API is sked's HTTP API: an http.Handler serving every route of
// openapi.json, whose job creation can also be called in-process
// (JobCreate, JobParams).
type API struct {
	http.Handler // the chi router
	h            *handler
}

// New returns the API for cfg. It panics if cfg.Store is nil.
func New(cfg Config) *API {
	if cfg.Store == nil {
		panic("handlers: Config.Store cannot be nil")
	}
	h := &handler{
		store:           cfg.Store,
		wake:            cfg.Wake,
		storeAnnounces:  cfg.StoreAnnounces,
		validatePayload: cfg.ValidatePayload,
		checkNotify:     cfg.CheckNotifyFunc,
		disabledTypes:   cfg.DisabledTypes,
		ownTypes:        cfg.OwnTypes,
		maxBodyBytes:    cfg.MaxBodyBytes,
		logger:          cfg.Logger,
		seriesFunc:      cfg.SeriesFunc,
		shutdown:        cfg.Shutdown,
		claimers:        newClaimWaiters(cmp.Or(max(cfg.MaxClaimWaits, 0), DefaultMaxClaimWaits)),
		unauthorized:    throttle{every: unauthorizedLogEvery},
		limited:         throttle{every: unauthorizedLogEvery},
		unreachable:     throttle{every: unreachableLogEvery},
		authLimit:       newAuthLimiter(authFailBurst, authFailEvery),
		trustedProxies:  proxyPrefixes(cfg.TrustedProxies),
		metrics:         cfg.Metrics,
		readyFunc:       cfg.ReadyFunc,
		testClock:       cfg.TestClock,
	}
	if h.maxBodyBytes <= 0 {
		h.maxBodyBytes = DefaultMaxBodyBytes
	}
	doc, err := openAPIVersioned(buildinfo.Read().Version)
	if err != nil {
		panic("handlers: the embedded openapi.json: " + err.Error())
	}
	h.openAPI = doc
	if h.wake == nil {
		h.wake = func(map[string]int) {}
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	h.remote = newRemoteLeases(cfg.Store, h.logger)
	h.answered = newAnsweredClaims()
	h.tokens = tokensOf(cfg)
	for _, host := range cfg.AllowedHosts {
		h.allowedHosts = append(h.allowedHosts, hostName(host))
	}
	r := chi.NewRouter()
	h.routes(r)
	return &API{Handler: r, h: h}
}

// routes registers every route on r.
func (h *handler) routes(r chi.Router) {
	r.Use(guardAnswers)
	r.Use(h.recoverer)
	r.Use(h.refuseCrossOrigin) // first: another site's page is told so
	r.Use(h.checkHost)
	r.Use(h.authenticate)
	r.Use(h.checkActor)
	r.Use(h.refuseWriteQueries)
	r.Use(middleware.GetHead) // HEAD of every GET route, as curl -I sends
	r.NotFound(h.handleNotFound)
	r.MethodNotAllowed(h.handleMethodNotAllowed(r))

	// Load balancers probe with HEAD and OPTIONS too.
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
		r.MethodFunc(m, "/healthz", h.handleHealthz)
		r.MethodFunc(m, "/readyz", h.handleReadyz)
	}
	if h.metrics != nil {
		r.Method(http.MethodGet, "/metrics", h.metrics)
	}

	r.Post("/jobs", h.handleJobCreate)
	r.Post("/jobs/batch", h.handleJobBatch)
	r.Get("/jobs", h.handleJobList)
	// A PUT by name creates or replaces the job: a name that is not text is
	// a bad name (422), not an unknown job (404).
	r.With(unescapePath).Put("/jobs/by-name/{name}", h.handleJobPut)
	r.Group(func(r chi.Router) { // the routes of one job, by id or name
		r.Use(unescapePath)
		r.Use(h.jobInPath(func(id string) error { return jobError(id, action{}, db.ErrNotFound) }))
		r.Get("/jobs/{id}", h.handleJobGet)
		r.Patch("/jobs/{id}", h.handleJobPatch)
		r.With(h.noBody).Delete("/jobs/{id}", h.handleJobDelete)
		r.Get("/jobs/by-name/{name}", h.handleJobGetByName)
		r.Post("/jobs/{id}/pause", h.handleJobPause)
		r.With(h.noBody).Post("/jobs/{id}/resume", h.handleJobResume)
		r.With(h.noBody).Post("/jobs/{id}/retry", h.handleJobRetry)
		r.With(h.noBody).Post("/jobs/{id}/cancel-run", h.handleJobCancelRun)
		r.With(h.noBody).Post("/jobs/{id}/trigger", h.handleJobTrigger)
		r.With(h.noBody).Post("/jobs/{id}/skip", h.handleJobSkip)
		r.Post("/jobs/{id}/backfill", h.handleJobBackfill)
		r.Get("/jobs/{id}/runs", h.handleRunList)
		r.Get("/jobs/{id}/events", h.handleEventList)
		r.Get("/jobs/{id}/preview", h.handleJobPreview)
	})

	r.Post("/schedules/check", h.handleScheduleCheck)
	r.Get("/stats", h.handleStats)
	r.Get("/stats/series", h.handleStatsSeries)
	r.Get("/workers", h.handleWorkers)
	r.Post("/workers/stopping", h.handleWorkerStopping)
	r.Post("/workers/stopped", h.handleWorkerStopped)

	r.Post("/claims", h.handleClaim)
	r.Group(func(r chi.Router) { // a worker's reports, by the id its claim answered
		r.Use(unescapePath)
		r.Use(h.jobInPath(noJobWithID))
		r.Post("/jobs/{id}/heartbeat", h.handleHeartbeat)
		r.Post("/jobs/{id}/complete", h.handleComplete)
	})

	r.Get("/openapi.json", h.handleOpenAPI)

	if h.testClock != nil {
		r.Get(testClockPath, h.handleTestClock)
		r.Post(testClockPath, h.handleTestClock)
	}
}

// unescapePath decodes the route's path parameters when the router
// matched the path as it was sent, r.URL.RawPath (set when the client
// encoded it otherwise than Go would, as in /jobs/%61%31): there they are
// still percent-encoded, where those matched in r.URL.Path are decoded
// already and must not be decoded twice. An encoded slash (%2F) stays
// within its parameter. It runs after routing, before jobInPath.
func unescapePath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawPath != "" {
			params := &chi.RouteContext(r.Context()).URLParams
			for i, v := range params.Values {
				if u, err := url.PathUnescape(v); err == nil {
					params.Values[i] = u
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// jobInPath answers notFound(id) (a 404), as for any job that does not
// exist, a request whose path names the job by an id or name that is not
// text every store keeps (db.TextFault): no job has one, and PostgreSQL
// refuses to look for it. It runs on the routes of one job, after routing.
func (h *handler) jobInPath(notFound func(id string) error) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for _, v := range chi.RouteContext(r.Context()).URLParams.Values {
				if i, _ := db.TextFault(v); i >= 0 {
					h.error(w, r, notFound(v))
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// writeJSON answers status with v as JSON. v is encoded before anything is
// written, so an encoding failure still answers a 500 problem.
func (h *handler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		h.error(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeDated is writeJSON of an answer dated by the store's clock (its Date
// header), the one that says what is due, rather than by this machine's
// (net/http's default), which may differ: PostgreSQL's clock, a test
// clock. A client judging how late a job is compares the job's times with
// the server's.
func (h *handler) writeDated(w http.ResponseWriter, r *http.Request, status int, v any) {
	w.Header().Set("Date", h.store.Now().UTC().Format(http.TimeFormat))
	h.writeJSON(w, r, status, v)
}

// guardAnswers tells browsers to take every answer as the type it says it
// is, so that a job's payload or output in a JSON answer is never read as
// HTML or script, and to keep no copy of it: payloads may hold secrets (an
// exec job's env, an http job's headers).
func guardAnswers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic in a handler into a logged 500 problem instead of a
// dropped connection. http.ErrAbortHandler keeps its meaning.
func (h *handler) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.logger.ErrorContext(r.Context(), "panic in http handler",
				"method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			h.writeProblem(w, problem{
				Type:   "about:blank",
				Title:  http.StatusText(http.StatusInternalServerError),
				Status: http.StatusInternalServerError,
				Detail: internalDetail,
			})
		}()
		next.ServeHTTP(w, r)
	})
}
