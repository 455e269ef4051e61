package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSentChanges: an interrupted command counts the changes the server
// answered with 2xx as made, neither refusals nor reads nor dry runs, and
// says that no other change reached the server when none was under way.
func TestSentChanges(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refused" {
			w.WriteHeader(http.StatusConflict)
		}
	}))
	t.Cleanup(srv.Close)
	s := &sentChanges{next: http.DefaultTransport}
	c := &http.Client{Transport: s}
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/jobs"}, {http.MethodPut, "/jobs/by-name/a?dryRun=true"}, {http.MethodPost, "/refused"},
	} {
		send(t, c, req.method, srv.URL+req.path)
	}
	if got, want := s.interrupted(srv.URL), "no change reached "+srv.URL+", which changed nothing"; !strings.HasSuffix(got, want) {
		t.Errorf("after a read, a dry run and a refusal: %q; want it to end %q", got, want)
	}
	send(t, c, http.MethodPost, srv.URL+"/jobs")
	send(t, c, http.MethodPut, srv.URL+"/jobs/by-name/a")
	if got, want := s.interrupted(srv.URL), srv.URL+" had made 2 changes for it, which stay made, and no other change reached it"; !strings.Contains(got, want) {
		t.Errorf("after two changes made: %q; want %q", got, want)
	}
}

// send sends method url with c and drops the answer.
func send(t *testing.T, c *http.Client, method, url string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
