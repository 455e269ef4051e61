package handlers

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/sked-dev/sked/db/sqlite"
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
		{"OtherScheme", "/jobs", "Basic Zmlyc3QtdG9rZW4=", http.StatusUnauthorized, "not one this server accepts"},
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
	e.do("GET", "/healthz", "").wantStatus(t, http.StatusOK)
	e.do("GET", "/readyz", "").wantStatus(t, http.StatusOK)
	err := errors.New("database is locked")
	fail.Store(&err)
	res := e.do("GET", "/readyz", "")
	res.wantProblem(t, http.StatusServiceUnavailable, "not ready: database is locked")
	if got := res.header.Get("Retry-After"); got != "5" {
		t.Errorf("Retry-After = %q, want 5", got)
	}
}
