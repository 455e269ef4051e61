package handlers

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/internal/syncbuf"
)

func TestAuth_Bearer(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, func(c *Config) {
		c.Tokens = []string{"first-token", "second-token"}
		c.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("sked_up 1\n")) })
	})
	for _, c := range []struct {
		name, path, auth string
		status           int
		detail           string
	}{
		{"NoHeader", "/jobs", "", http.StatusUnauthorized, "requires a bearer token"},
		{"WrongToken", "/jobs", "Bearer first-tokenX", http.StatusUnauthorized, "not one this server accepts"},
		{"PrefixOfToken", "/jobs", "Bearer first", http.StatusUnauthorized, "not one this server accepts"},
		{"OtherScheme", "/jobs", "Basic Zmlyc3QtdG9rZW4=", http.StatusUnauthorized, `the Authorization header is of scheme "Basic"; this server takes only a bearer token`},
		{"MetricsNeedToken", "/metrics", "", http.StatusUnauthorized, "requires a bearer token"},
		{"FirstToken", "/jobs", "Bearer first-token", http.StatusOK, ""},
		{"SecondToken", "/jobs", "bearer second-token", http.StatusOK, ""},
		{"Metrics", "/metrics", "Bearer second-token", http.StatusOK, ""},
		{"Healthz", "/healthz", "", http.StatusOK, ""},
		{"Readyz", "/readyz", "", http.StatusOK, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var res response
			if c.auth == "" {
				res = e.do("GET", c.path, "")
			} else {
				res = e.do("GET", c.path, "", "Authorization", c.auth)
			}
			if c.status != http.StatusUnauthorized {
				res.wantStatus(t, c.status)
				return
			}
			res.wantProblem(t, c.status, c.detail)
			if got := res.header.Get("WWW-Authenticate"); got != `Bearer realm="sked"` {
				t.Errorf("WWW-Authenticate = %q, want Bearer", got)
			}
		})
	}
}

// TestAuth_RoleRefusals: a 403 says which token it was and which one the
// request needs.
func TestAuth_RoleRefusals(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, func(c *Config) { c.WorkerTokens, c.ReadTokens = []string{"w"}, []string{"r"} })
	for _, c := range []struct{ method, path, token, detail string }{
		{"POST", "/jobs", "w", "this is a worker token (SKED_WORKER_TOKEN): it may only claim jobs"},
		{"GET", "/jobs", "w", "use a token from SKED_TOKEN for anything else"},
		{"POST", "/jobs", "r", "this is a read-only token (SKED_READ_TOKEN): it may only read"},
		{"POST", "/claims", "r", "needs a token from the server's SKED_WORKER_TOKEN"},
		{"POST", "/jobs/x/complete", "r", "needs a token from the server's SKED_WORKER_TOKEN"},
	} {
		e.do(c.method, c.path, "{}", "Authorization", "Bearer "+c.token).wantProblem(t, http.StatusForbidden, c.detail)
	}
	// A dry run of a put (sked apply --dry-run) writes nothing: a read
	// token may make it, and it is answered as a dry run.
	put := `{"type": "backup", "schedule": "0 3 * * *"}`
	res := e.do("PUT", "/jobs/by-name/nightly?dryRun=true", put, "Authorization", "Bearer r")
	res.wantStatus(t, http.StatusCreated)
	e.do("GET", "/jobs/nightly", "", "Authorization", "Bearer r").wantStatus(t, http.StatusNotFound)
	for _, path := range []string{"/jobs/by-name/nightly", "/jobs/by-name/nightly?dryRun=false", "/jobs/by-name/nightly?dryRun=maybe"} {
		e.do("PUT", path, put, "Authorization", "Bearer r").wantProblem(t, http.StatusForbidden, "it may only read")
	}
	// A schedule's check writes nothing either; a worker token may not.
	check := `{"schedule": "30 2 * * *"}`
	e.do("POST", "/schedules/check", check, "Authorization", "Bearer r").wantStatus(t, http.StatusOK)
	e.do("POST", "/schedules/check", check, "Authorization", "Bearer w").wantProblem(t, http.StatusForbidden, "worker token")
}

// TestAuth_RoleHeader: an answer to a valid token names its role, a 403
// too; no valid token, no role.
func TestAuth_RoleHeader(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, func(c *Config) {
		c.Tokens, c.WorkerTokens, c.ReadTokens = []string{"a"}, []string{"w"}, []string{"r"}
	})
	for _, c := range []struct{ method, path, auth, role string }{
		{"GET", "/jobs", "Bearer a", "admin"},
		{"GET", "/jobs", "Bearer r", "read"},
		{"POST", "/jobs", "Bearer r", "read"},
		{"GET", "/jobs", "Bearer w", "worker"},
		{"GET", "/jobs", "Bearer x", ""},
		{"GET", "/jobs", "", ""},
	} {
		res := e.do(c.method, c.path, "{}", "Authorization", c.auth)
		if got := res.header.Get("Sked-Role"); got != c.role {
			t.Errorf("%s %s with %q: Sked-Role %q, want %q", c.method, c.path, c.auth, got, c.role)
		}
	}
}

func TestAuth_NoTokens(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	e.do("GET", "/jobs", "").wantStatus(t, http.StatusOK)
	e.do("GET", "/metrics", "").wantStatus(t, http.StatusNotFound) // no Metrics configured
}

func TestHealth_Readyz(t *testing.T) {
	t.Parallel()
	var fail atomic.Pointer[error]
	e := newTestEnv(t, func(c *Config) {
		store := c.Store.(*sqlite.Store)
		c.ReadyFunc = func(ctx context.Context) error {
			if err := fail.Load(); err != nil {
				return *err
			}
			return store.Ready(ctx)
		}
	})
	// Load balancers probe with HEAD or OPTIONS as well as GET: each answers
	// as GET does, HEAD without a body.
	probe := func(path string, status int) {
		t.Helper()
		get := e.do("GET", path, "")
		get.wantStatus(t, status)
		for _, method := range []string{"HEAD", "OPTIONS"} {
			res := e.do(method, path, "")
			if res.status != status {
				t.Errorf("%s %s: status %d, want %d as GET answers; body %s", method, path, res.status, status, res.body)
			}
			if got, want := res.header.Get("Content-Type"), get.header.Get("Content-Type"); got != want {
				t.Errorf("%s %s: Content-Type %q, want %q as GET answers", method, path, got, want)
			}
			if got, want := res.header.Get("Retry-After"), get.header.Get("Retry-After"); got != want {
				t.Errorf("%s %s: Retry-After %q, want %q as GET answers", method, path, got, want)
			}
			if method == "HEAD" && len(res.body) != 0 {
				t.Errorf("HEAD %s: body %q, want none", path, res.body)
			}
			if method == "OPTIONS" && string(res.body) != string(get.body) {
				t.Errorf("OPTIONS %s: body %q, want GET's %q", path, res.body, get.body)
			}
		}
	}
	probe("/healthz", http.StatusOK)
	probe("/readyz", http.StatusOK)
	err := errors.New("database is locked")
	fail.Store(&err)
	res := e.do("GET", "/readyz", "")
	res.wantProblem(t, http.StatusServiceUnavailable, "not ready: database is locked")
	if got := res.header.Get("Retry-After"); got != "5" {
		t.Errorf("Retry-After = %q, want 5", got)
	}
	probe("/readyz", http.StatusServiceUnavailable)
	probe("/healthz", http.StatusOK)
}

// TestHealth_ReadyzTellsWhyOnlyToAPIUsers: /readyz answers anyone, under
// any Host, so its 503 names the store's error (which may name the
// database's host, user and file) only to a request that could use the API:
// with a token when there are tokens, by a served Host when there are none.
func TestHealth_ReadyzTellsWhyOnlyToAPIUsers(t *testing.T) {
	t.Parallel()
	const secret = "failed to connect to `user=sked database=prod`: 10.9.8.7:5432"
	notReady := func(c *Config) {
		c.ReadyFunc = func(context.Context) error { return errors.New(secret) }
	}
	withToken := newTestEnv(t, func(c *Config) { notReady(c); c.Tokens = []string{"the-token"} })
	noToken := newTestEnv(t, notReady)
	for _, c := range []struct {
		name    string
		env     *testEnv
		headers []string
		told    bool
	}{
		{"NoTokenGiven", withToken, nil, false},
		{"WrongToken", withToken, []string{"Authorization", "Bearer other"}, false},
		{"Token", withToken, []string{"Authorization", "Bearer the-token"}, true},
		{"ReboundHost", noToken, []string{"Host", "rebound.example:8080"}, false},
		{"Loopback", noToken, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := c.env.do("GET", "/readyz", "", c.headers...)
			if c.told {
				res.wantProblem(t, http.StatusServiceUnavailable, "not ready: "+secret)
				return
			}
			res.wantProblem(t, http.StatusServiceUnavailable, "the server log says why")
			if strings.Contains(string(res.body), "10.9.8.7") {
				t.Errorf("GET /readyz told a request that cannot use the API the store's error: %s", res.body)
			}
		})
	}
}

// TestHealth_ReadyzProbeThatHungUp: a client that gives up on /readyz
// before the check ends is told nothing and the node is not unready: the
// client commands ask every node of --server at once and hang up on the
// others once one is ready, so each command made the other nodes log
// "not ready" (WARN) with "context canceled" while nothing was wrong. A
// check that fails on its own is still logged.
func TestHealth_ReadyzProbeThatHungUp(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	var hangUp atomic.Bool
	checking := make(chan struct{}, 1)
	e := newTestEnv(t, func(c *Config) {
		store := c.Store.(*sqlite.Store)
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.ReadyFunc = func(ctx context.Context) error {
			if hangUp.Load() {
				checking <- struct{}{}
				<-ctx.Done() // the check is slower than the client's patience
			}
			return store.Ready(ctx)
		}
	})
	served := make(chan struct{}, 1) // the handler has returned
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.api.ServeHTTP(w, r)
		served <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	hangUp.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/readyz", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if res, err := srv.Client().Do(req); err == nil {
			res.Body.Close()
		}
	}()
	<-checking
	cancel()
	<-done
	<-served
	if strings.Contains(logs.String(), "not ready") {
		t.Errorf("a probe whose client hung up was logged as not ready:\n%s", logs.String())
	}

	// A check that fails by itself is logged, as ever.
	hangUp.Store(false)
	store := e.store
	store.Close()
	e.do("GET", "/readyz", "").wantStatus(t, http.StatusServiceUnavailable)
	if !strings.Contains(logs.String(), "not ready") {
		t.Errorf("a failed check was not logged:\n%s", logs.String())
	}
}

// TestAuth_RefusalsLogged: requests refused 401 are logged, one line for a
// burst of them (someone guessing tokens sends thousands), saying how many
// and the last one's reason; they went unlogged.
func TestAuth_RefusalsLogged(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	e := newTestEnv(t, func(c *Config) {
		c.Tokens = []string{"first-token"}
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	for range authFailBurst {
		e.do("GET", "/jobs", "", "Authorization", "Bearer guess").wantStatus(t, http.StatusUnauthorized)
	}
	if n := strings.Count(logs.String(), "requests refused for a missing or wrong token"); n != 1 {
		t.Errorf("%d lines for %d refusals; want one:\n%s", n, authFailBurst, logs.String())
	}
	if !strings.Contains(logs.String(), "not one this server accepts") {
		t.Errorf("the line does not say why:\n%s", logs.String())
	}
}
