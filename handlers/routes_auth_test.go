package handlers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

// fixedClock is a TestClock that only reads.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fixedClock) Set(t time.Time)         { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }
func (c *fixedClock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// TestAuth_EveryRoute walks every route of the API, with every optional
// route switched on, and checks that each answers 401 without a token and
// with a wrong one, except the health probes; and that a worker token may
// only claim and report, a read token only read and check schedules (403
// otherwise), and the
// full token anything.
func TestAuth_EveryRoute(t *testing.T) {
	t.Parallel()
	store := sqlitetest.Open(t)
	h := New(Config{
		Store: store, Tokens: []string{"secret"}, WorkerTokens: []string{"worker"}, ReadTokens: []string{"reader"},
		Metrics:    http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		SeriesFunc: func() any { return nil }, TestClock: &fixedClock{now: testNow},
	})
	// Every route is tried with wrong tokens: more than an address may
	// send (TestAuth_WrongTokensLimited).
	h.h.authLimit = newAuthLimiter(1<<20, authFailEvery)
	srv := httptest.NewServer(h)
	defer srv.Close()
	public := map[string]bool{"/healthz": true, "/readyz": true}
	workers := map[string]bool{"GET /openapi.json": true, "POST /claims": true, "POST /jobs/{id}/heartbeat": true, "POST /jobs/{id}/complete": true, "POST /workers/stopping": true, "POST /workers/stopped": true}
	status := func(method, path, auth string) int {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	var walked int
	err := chi.Walk(h.Handler.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		walked++
		path := strings.ReplaceAll(route, "{id}", "job1")
		for _, auth := range []string{"", "Bearer wrong", "Bearer secre", "Basic c2VjcmV0"} {
			got := status(method, path, auth)
			if public[route] {
				if got == http.StatusUnauthorized {
					t.Errorf("%s %s answered 401; health probes need no token", method, route)
				}
				continue
			}
			if got != http.StatusUnauthorized {
				t.Errorf("%s %s with Authorization %q: status %d, want 401", method, route, auth, got)
			}
		}
		for token, allowed := range map[string]bool{
			"secret": true,
			"worker": public[route] || workers[method+" "+route],
			"reader": public[route] || method == http.MethodGet || method == http.MethodHead || method+" "+route == "POST /schedules/check",
		} {
			got := status(method, path, "Bearer "+token)
			if refused := got == http.StatusUnauthorized || got == http.StatusForbidden; refused == allowed {
				t.Errorf("%s %s with the %s token: status %d; want it allowed: %t", method, route, token, got, allowed)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if walked < 25 {
		t.Errorf("walked %d routes; the API has more", walked)
	}
}
