package handlers

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

// everyRoute serves the API with every optional route on (and cfg's
// settings) on a real store, and calls visit with each route's method and
// path.
func everyRoute(t *testing.T, cfg Config, visit func(srv *httptest.Server, method, route, path string)) *httptest.Server {
	t.Helper()
	store := sqlitetest.Open(t)
	cfg.Store = store
	cfg.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	cfg.SeriesFunc, cfg.TestClock = func() any { return nil }, &fixedClock{now: testNow}
	h := New(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	var walked int
	err := chi.Walk(h.Handler.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		walked++
		visit(srv, method, route, strings.ReplaceAll(route, "{id}", "job1"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if walked < 25 {
		t.Errorf("walked %d routes; the API has more", walked)
	}
	jobs, _, err := store.JobList(context.Background(), db.JobListParams{})
	if err != nil || len(jobs) != 0 {
		t.Errorf("after refused requests the store holds %d jobs (%v); want none", len(jobs), err)
	}
	return srv
}

// send makes one request with a JSON body and the headers (name, value
// pairs; "Host" sets the Host) and returns its status and body.
func send(t *testing.T, srv *httptest.Server, method, path string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(`{"type": "evil"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode == http.StatusForbidden && res.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s %s: 403 as %q, want application/problem+json", method, path, res.Header.Get("Content-Type"))
	}
	return res.StatusCode, string(b)
}

// TestGuard_CrossSiteEveryRoute sends every state-changing route what a
// browser sends for another site's page (a form post, a no-cors fetch, an
// old browser's Origin) and expects 403 and nothing stored; the same
// requests from the server's own pages and from programs pass.
func TestGuard_CrossSiteEveryRoute(t *testing.T) {
	t.Parallel()
	crossSite := [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"}, // another port or subdomain is another origin
		{"Origin", "http://evil.example"},
		{"Origin", "null"}, // a sandboxed frame or a file:// page
		{"Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"},
	}
	for _, tokens := range [][]string{nil, {"secret"}} {
		everyRoute(t, Config{Tokens: tokens}, func(srv *httptest.Server, method, route, path string) {
			for _, h := range crossSite {
				h = append(h, "Authorization", "Bearer secret")
				status, body := send(t, srv, method, path, h...)
				switch {
				case safeMethod(method) && status == http.StatusForbidden:
					t.Errorf("%s %s with %q: 403 %s; a request that changes nothing is not refused", method, route, h, body)
				case !safeMethod(method) && status != http.StatusForbidden:
					t.Errorf("%s %s with %q (tokens %v): status %d, want 403", method, route, h, tokens, status)
				case !safeMethod(method) && !strings.Contains(body, "another site") && !strings.Contains(body, "another origin"):
					t.Errorf("%s %s: detail %s does not say why", method, route, body)
				}
			}
		})
	}

	// The server's own page, a page the user typed, a program: served.
	e := newTestEnv(t, nil)
	host := strings.TrimPrefix(e.srv.URL, "http://")
	for _, h := range [][]string{
		{"Sec-Fetch-Site", "same-origin", "Origin", e.srv.URL},
		{"Sec-Fetch-Site", "none"},
		{"Origin", e.srv.URL}, // a browser without Sec-Fetch-Site
		{"Host", host},        // curl, sked add, sked work
	} {
		e.create(`{"type": "noop"}`, http.StatusCreated, h...)
	}
}

// TestGuard_HostWithoutToken checks that without a token only loopback names
// and the configured ones are served as Host, and as the host of a
// request's Origin, so that a page whose DNS name was rebound to 127.0.0.1
// cannot use the API, even through a proxy that passes its own Host; the
// health probes answer any name, and with a token the Host is not checked.
func TestGuard_HostWithoutToken(t *testing.T) {
	t.Parallel()
	foreign := []string{"evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io:8080", "sked.example.com.evil.example"}
	everyRoute(t, Config{AllowedHosts: []string{"sked.example.com"}}, func(srv *httptest.Server, method, route, path string) {
		for _, host := range foreign {
			status, body := send(t, srv, method, path, "Host", host)
			if publicPaths[route] {
				if status == http.StatusForbidden {
					t.Errorf("%s %s with Host %s: 403; health probes answer any Host", method, route, host)
				}
				continue
			}
			if status != http.StatusForbidden || !strings.Contains(body, "--allowed-hosts") {
				t.Errorf("%s %s with Host %s: %d %s, want 403 naming --allowed-hosts", method, route, host, status, body)
			}
		}
	})

	e := newTestEnv(t, func(c *Config) { c.AllowedHosts = []string{"sked.example.com", "SKED.LAN.", "[fd00::5]", "10.0.0.5"} })
	for _, host := range []string{
		"localhost", "localhost:8080", "LocalHost:1", "localhost.:8080", "127.0.0.1", "127.0.0.1:8080", "127.1.2.3:9",
		"[::1]", "[::1]:8080", "sked.example.com", "sked.example.com:443", "Sked.Example.COM", "sked.lan:8080",
		"[fd00::5]:8080", "10.0.0.5:8080",
	} {
		e.do(http.MethodGet, "/jobs", "", "Host", host).wantStatus(t, http.StatusOK)
	}
	for _, host := range []string{"example.com", "10.0.0.6:8080", "[fd00::6]", "sked.example.com.evil.example"} {
		e.do(http.MethodGet, "/jobs", "", "Host", host).wantProblem(t, http.StatusForbidden,
			"without a token this server answers only the Host names localhost, 127.0.0.1 and [::1]")
	}

	// A rebound page behind a proxy that passes its own Host upstream: the
	// Host is loopback, the Origin the browser sends names the page's site.
	for _, origin := range []string{"http://evil.example:8080", "http://localhost.evil.example", "null", "http://10.0.0.6"} {
		e.do(http.MethodPost, "/jobs", `{"type": "noop"}`, "Host", "127.0.0.1:8080", "Origin", origin, "Sec-Fetch-Site", "same-origin").
			wantProblem(t, http.StatusForbidden, "is not served: without a token this server answers only pages at localhost")
	}
	for _, origin := range []string{"http://127.0.0.1:8080", "http://localhost:9999", "https://sked.example.com", "http://[fd00::5]:8080"} {
		e.do(http.MethodPost, "/jobs", `{"type": "noop"}`, "Host", "127.0.0.1:8080", "Origin", origin, "Sec-Fetch-Site", "same-origin").
			wantStatus(t, http.StatusCreated)
	}

	// With a token the token is what keeps others out.
	authed := newTestEnv(t, func(c *Config) { c.Tokens = []string{"secret"} })
	authed.do(http.MethodGet, "/jobs", "", "Host", "sked.internal:8080", "Authorization", "Bearer secret").wantStatus(t, http.StatusOK)
}
