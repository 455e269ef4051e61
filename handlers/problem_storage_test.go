package handlers

import (
	"fmt"
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
