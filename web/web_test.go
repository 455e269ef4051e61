package web

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/handlers"
)

// TestMount_UnderPrefix mounts the dashboard and an API, a plain
// http.Handler, under a prefix two segments deep, as an embedder's router
// would, and checks that the prefix alone redirects to itself with a
// slash, that the page and its assets are served there, and that the rest
// reaches the API with the prefix gone, as does another method on the
// page's path (a plain handler has no MethodNotAllowed).
func TestMount_UnderPrefix(t *testing.T) {
	t.Parallel()
	var apiPaths []string
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiPaths = append(apiPaths, r.URL.Path)
		w.WriteHeader(http.StatusTeapot)
	})
	mux := http.NewServeMux()
	mux.Handle("/ops/sked/", http.StripPrefix("/ops/sked", Mount(api)))
	mux.Handle("/ops/sked", http.StripPrefix("/ops/sked", Mount(api)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	res, err := noRedirect.Get(srv.URL + "/ops/sked")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, _ := res.Location()
	if res.StatusCode != http.StatusMovedPermanently || loc == nil || loc.Path != "/ops/sked/" {
		t.Fatalf("GET /ops/sked: %d to %v, want 301 to /ops/sked/", res.StatusCode, loc)
	}

	for path, want := range map[string]string{
		"/ops/sked/":          `src="ui/app.js"`,
		"/ops/sked/ui/app.js": "function route()",
	} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body without %q", path, res.StatusCode, want)
		}
	}
	// The page itself under ui/ would find none of its assets: it is sent
	// to the prefix.
	for _, path := range []string{"/ops/sked/ui/", "/ops/sked/ui/index.html"} {
		res, err := noRedirect.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		loc, _ := res.Location()
		if res.StatusCode != http.StatusMovedPermanently || loc == nil || loc.Path != "/ops/sked/" {
			t.Errorf("GET %s: %d to %v, want 301 to /ops/sked/", path, res.StatusCode, loc)
		}
	}

	res, err = http.Get(srv.URL + "/ops/sked/jobs?state=dead")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTeapot || len(apiPaths) != 1 || apiPaths[0] != "/jobs" {
		t.Errorf("GET /ops/sked/jobs: %d, the API saw %v; want it to see /jobs", res.StatusCode, apiPaths)
	}
	res, err = http.Post(srv.URL+"/ops/sked/", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTeapot || len(apiPaths) != 2 || apiPaths[1] != "/" {
		t.Errorf("POST /ops/sked/: %d, the API saw %v; want it to see /", res.StatusCode, apiPaths)
	}
}

// absoluteURL finds an address from the root in the page's files: a quoted
// path of the server's ("/jobs", '/ui/app.js', `/stats`) or an HTML link
// (href="/…"); under a prefix they would miss. Hash routes ("#/jobs") and
// suffixes of a job's path ("/runs") are fine.
var absoluteURL = regexp.MustCompile("[\"'`]/(jobs|ui|stats|workers|schedules|claims|openapi|healthz|readyz|metrics|test)\\b|(href|src|action)=\"/")

// TestStatic_RelativeURLs checks that no file of the page names an address
// from the root, so that the page works under any prefix.
func TestStatic_RelativeURLs(t *testing.T) {
	t.Parallel()
	files, err := fs.Sub(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	err = fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, name)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := absoluteURL.FindString(line); m != "" {
				t.Errorf("web/static/%s:%d: %s names an address from the root; make it relative to the page", name, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMount_RefusesFraming: the page and its assets tell browsers that only
// pages of their own origin may frame them (CSP frame-ancestors, and
// X-Frame-Options for browsers without it), so that another site cannot
// overlay the dashboard's buttons (clickjacking).
func TestMount_RefusesFraming(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(Mount(http.NotFoundHandler()))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/", "/ui/app.js"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		for _, want := range []string{"frame-ancestors 'self'", "base-uri 'none'", "form-action 'self'"} {
			if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %s", path, csp, want)
			}
		}
		if xfo := res.Header.Get("X-Frame-Options"); xfo != "SAMEORIGIN" {
			t.Errorf("GET %s: X-Frame-Options %q, want SAMEORIGIN", path, xfo)
		}
	}
}

// TestMount_MethodNotAllowed: another method than GET or HEAD on the
// dashboard's page or files answers 405 problem+json with Allow, from the
// API, as it answers a method its own paths do not serve, under a prefix
// too; the API's own paths answer as ever.
func TestMount_MethodNotAllowed(t *testing.T) {
	t.Parallel()
	api := handlers.New(handlers.Config{Store: sqlitetest.Open(t)})
	mux := http.NewServeMux()
	mux.Handle("/", Mount(api))
	mux.Handle("/sked/", http.StripPrefix("/sked", Mount(api)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	do := func(method, path string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(body)
	}
	for _, c := range []struct{ method, path, shown string }{
		{http.MethodPost, "/", "/"},
		{http.MethodPut, "/", "/"},
		{http.MethodOptions, "/", "/"},
		{http.MethodDelete, "/ui/app.js", "/ui/app.js"},
		{http.MethodPost, "/sked/", "/"},
		{http.MethodPatch, "/sked/ui/style.css", "/ui/style.css"},
	} {
		res, body := do(c.method, c.path)
		want := c.method + " is not allowed on " + c.shown + "; use GET or HEAD"
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" ||
			res.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, want) {
			t.Errorf("%s %s: %d, Allow %q, %s %s; want 405, Allow GET, HEAD, a problem saying %q",
				c.method, c.path, res.StatusCode, res.Header.Get("Allow"), res.Header.Get("Content-Type"), body, want)
		}
	}
	if res, body := do(http.MethodPost, "/sked/nope"); res.StatusCode != http.StatusNotFound || !strings.Contains(body, "no such endpoint: POST /nope") {
		t.Errorf("POST /sked/nope: %d %s; want the API's 404", res.StatusCode, body)
	}
	if res, body := do(http.MethodGet, "/"); res.StatusCode != http.StatusOK || !strings.Contains(body, `src="ui/app.js"`) {
		t.Errorf("GET /: %d, not the page", res.StatusCode)
	}
}
