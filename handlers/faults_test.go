package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
)

// failingStore is the real store whose job creation fails with err before
// it reaches the database, as a failed write or fsync does.
type failingStore struct {
	*sqlite.Store
	err error
}

func (f failingStore) JobCreate(context.Context, db.JobCreateParams) (db.Job, bool, error) {
	return db.Job{}, false, fmt.Errorf("create job: %w", f.err)
}

func (f failingStore) JobCreateBatch(context.Context, []db.JobCreateParams) ([]db.Job, error) {
	return nil, fmt.Errorf("create jobs: %w", f.err)
}

// A create that the store failed is never reported as a success: POST /jobs
// and /jobs/batch answer 5xx and no job exists afterwards.
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
			e2 := newTestEnv(t, func(cfg *Config) { cfg.Store = failingStore{Store: e.store, err: c.err} })
			e2.do(http.MethodPost, "/jobs", `{"type": "noop"}`).wantStatus(t, c.status)
			e2.do(http.MethodPost, "/jobs/batch", `{"jobs": [{"type": "noop"}, {"type": "noop"}]}`).wantStatus(t, c.status)
			if got := e.list("").Jobs; len(got) != 0 {
				t.Errorf("jobs after failed creates: %+v, want none", got)
			}
			if got := e2.wakes.Load(); got != 0 {
				t.Errorf("dispatcher woken %d times for jobs that do not exist", got)
			}
		})
	}
}
