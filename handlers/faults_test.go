package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
)

// failingStore is the real store whose job creation fails with err before
// it reaches the database, as a failed write or fsync does. calls counts
// the creates that reached it.
type failingStore struct {
	*sqlite.Store
	err   error
	calls *atomic.Int32
}

func (f failingStore) JobCreate(context.Context, db.JobCreateParams) (db.Job, bool, error) {
	f.calls.Add(1)
	return db.Job{}, false, fmt.Errorf("create job: %w", f.err)
}

func (f failingStore) JobCreateBatch(context.Context, []db.JobCreateParams) ([]db.Job, error) {
	f.calls.Add(1)
	return nil, fmt.Errorf("create jobs: %w", f.err)
}

// A create that the store failed is never reported as a success: POST /jobs
// and /jobs/batch answer 5xx and no job exists afterwards. Both creates must
// have reached the store (a request refused before it proves nothing), and
// the same creates on the healthy store must show up in the list that was
// empty.
func TestHandler_JobCreate_StoreFails(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		err    error
		status int
	}{
		{"IOError", errors.New("disk I/O error"), http.StatusInternalServerError},
		{"Timeout", context.DeadlineExceeded, http.StatusInternalServerError},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, nil)
			f := failingStore{Store: e.store, err: c.err, calls: &atomic.Int32{}}
			e2 := newTestEnv(t, func(cfg *Config) { cfg.Store = f })
			one, batch := `{"type": "noop"}`, `{"jobs": [{"type": "noop"}, {"type": "noop"}]}`
			e2.do(http.MethodPost, "/jobs", one).wantStatus(t, c.status)
			e2.do(http.MethodPost, "/jobs/batch", batch).wantStatus(t, c.status)
			if got := f.calls.Load(); got != 2 {
				t.Fatalf("creates that reached the store: %d, want 2", got)
			}
			if got := e.list("").Jobs; len(got) != 0 {
				t.Errorf("jobs after failed creates: %+v, want none", got)
			}
			if got := e2.wakes.Load(); got != 0 {
				t.Errorf("dispatcher woken %d times for jobs that do not exist", got)
			}
			e.do(http.MethodPost, "/jobs", one).wantStatus(t, http.StatusCreated)
			e.do(http.MethodPost, "/jobs/batch", batch).wantStatus(t, http.StatusCreated)
			if got := e.list("").Jobs; len(got) != 3 {
				t.Errorf("jobs after the same creates on the healthy store: %d, want 3", len(got))
			}
		})
	}
}
