package handlers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"

	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/web"
)

// TestAuth_RolesPathTricks sends the writes a worker or read token may not
// make dressed as ones it may (an encoded slash, a doubled or trailing
// slash, another case, an odd method, a path cleaned by the dashboard's
// mux under a prefix), straight to the API and through web.Mount under
// /sked. None may change anything: each is refused or answered without
// reaching a handler that writes, and the job stays as it was.
func TestAuth_RolesPathTricks(t *testing.T) {
	t.Parallel()
	store := sqlitetest.Open(t)
	store.NowFunc = func() time.Time { return testNow }
	clock := &fixedClock{now: testNow}
	api := New(Config{Store: store, Tokens: []string{"admin"}, WorkerTokens: []string{"worker"}, ReadTokens: []string{"reader"},
		TestClock: clock})
	mux := http.NewServeMux()
	mux.Handle("/sked/", http.StripPrefix("/sked", web.Mount(api)))
	mux.Handle("/", api)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	j, _, err := store.JobCreate(t.Context(), db.JobCreateParams{Type: "t"})
	if err != nil {
		t.Fatal(err)
	}
	writes := []struct{ method, path, body string }{
		{"POST", "/jobs/" + j.ID + "/pause", ""}, // no trick: the plain write
		{"POST", "/jobs/" + j.ID + "%2Fcancel/complete", ""},
		{"POST", "/jobs/" + j.ID + "/complete/../pause", ""},
		{"POST", "/jobs/" + j.ID + "/pause/..%2Fcomplete", ""},
		{"POST", "/jobs/" + j.ID + "//pause", ""},
		{"POST", "/jobs//" + j.ID + "/pause", ""},
		{"POST", "/jobs/" + j.ID + "/pause/", ""},
		{"POST", "/Jobs/" + j.ID + "/pause", ""},
		{"POST", "/jobs/../jobs/" + j.ID + "/pause", ""},
		{"POST", "/claims/../jobs/" + j.ID + "/pause", ""},
		{"POST", "/test/clock", `{"advance": "1h"}`},
		{"POST", "/jobs", `{"type": "t"}`},
		{"DELETE", "/jobs/" + j.ID, ""},
		{"PATCH", "/jobs/" + j.ID, `{"priority": 5}`},
		{"PUT", "/jobs/by-name/x", `{"type": "t"}`},
		{"OPTIONS", "/jobs/" + j.ID + "/pause", ""},
		{"post", "/jobs/" + j.ID + "/pause", ""},
		{"GET", "/jobs/" + j.ID + "/pause", ""},
		{"HEAD", "/test/clock", ""},
	}
	for _, prefix := range []string{"", "/sked"} {
		for _, token := range []string{"worker", "reader"} {
			for _, w := range writes {
				req, err := http.NewRequest(w.method, srv.URL+prefix+w.path, strings.NewReader(w.body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+token)
				res, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode/100 == 2 && w.method != "GET" && w.method != "HEAD" {
					t.Errorf("%s %s%s with the %s token: %d; want it refused", w.method, prefix, w.path, token, res.StatusCode)
				}
			}
		}
	}
	got, err := store.JobGet(t.Context(), j.ID)
	if err != nil || got.State != db.StateReady || got.UpdatedAt != j.UpdatedAt {
		t.Errorf("job after the tricks: %s updated %v, %v; want it untouched (ready, updated %v)", got.State, got.UpdatedAt, err, j.UpdatedAt)
	}
	if !clock.Now().Equal(testNow) {
		t.Errorf("test clock moved to %v", clock.Now())
	}
	if page, _, err := store.JobList(t.Context(), db.JobListParams{}); err != nil || len(page) != 1 {
		t.Errorf("jobs after the tricks: %d, %v; want the one", len(page), err)
	}
}
