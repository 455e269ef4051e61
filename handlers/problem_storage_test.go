package handlers

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
)

// A full disk answers 507 and a locked database 503, both with Retry-After
// and a detail that says what happened, however deep the sentinel is
// wrapped.
func TestProblemFor_Storage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err        error
		status     int
		retryAfter string
		detail     string
	}{
		{fmt.Errorf("create jobs: commit: %w", db.ErrStorageFull), http.StatusInsufficientStorage, "10", "full"},
		{fmt.Errorf("create jobs: begin: %w", db.ErrBusy), http.StatusServiceUnavailable, "2", "locked"},
		{fmt.Errorf("create jobs: acquire connection: %w", db.ErrUnreachable), http.StatusServiceUnavailable, "5", "cannot be reached"},
	} {
		p := problemFor(c.err)
		w := httptest.NewRecorder()
		(&handler{}).writeProblem(w, p)
		if w.Code != c.status || w.Header().Get("Retry-After") != c.retryAfter || !strings.Contains(p.Detail, c.detail) {
			t.Errorf("%v: %d Retry-After %q detail %q; want %d, %q, a detail saying %q",
				c.err, w.Code, w.Header().Get("Retry-After"), p.Detail, c.status, c.retryAfter, c.detail)
		}
	}
}

// TestError_UnreachableLogsFew: while the database cannot be reached every
// request is answered 503; the log has a line a minute saying how many,
// not a line for each (200 requests: one line, then none), and a request
// that fails otherwise is still logged.
func TestError_UnreachableLogsFew(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	h := &handler{logger: slog.New(slog.NewTextHandler(&buf, nil)), unreachable: throttle{every: unreachableLogEvery}}
	for range 200 {
		w := httptest.NewRecorder()
		h.error(w, httptest.NewRequest(http.MethodGet, "/jobs", nil), fmt.Errorf("list jobs: %w", db.ErrUnreachable))
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("answered %d, want 503", w.Code)
		}
	}
	if lines := strings.Count(buf.String(), "\n"); lines != 1 || !strings.Contains(buf.String(), "requests=1 ") {
		t.Errorf("200 requests answered 503 for an unreachable database logged %d lines, want 1 (of the first):\n%s", lines, &buf)
	}
	h.error(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/jobs", nil), fmt.Errorf("list jobs: %w", fmt.Errorf("boom")))
	if !strings.Contains(buf.String(), "http request failed") {
		t.Errorf("an internal error was not logged:\n%s", &buf)
	}
}
