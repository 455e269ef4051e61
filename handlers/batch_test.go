package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
)

func TestHandler_JobBatch(t *testing.T) {
	t.Parallel()
	t.Run("Created", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		res := e.do(http.MethodPost, "/jobs/batch", `{"jobs": [
			{"type": "a", "payload": {"n": 1}},
			{"type": "b", "schedule": "@hourly", "idempotencyKey": "k"},
			{"type": "a", "idempotencyKey": "k"}]}`)
		res.wantStatus(t, http.StatusCreated)
		var got jobBatchResponse
		res.decode(t, &got)
		if len(got.Jobs) != 3 {
			t.Fatalf("got %d jobs, want 3", len(got.Jobs))
		}
		if got.Jobs[0].Type != "a" || string(got.Jobs[0].Payload) != `{"n":1}` || got.Jobs[1].Schedule != "@hourly" {
			t.Errorf("jobs do not match the request: %+v", got.Jobs)
		}
		if got.Jobs[2].ID != got.Jobs[1].ID {
			t.Errorf("a known idempotency key created job %s; want the first, %s", got.Jobs[2].ID, got.Jobs[1].ID)
		}
		jobs, _, err := e.store.JobList(context.Background(), db.JobListParams{})
		if err != nil || len(jobs) != 2 {
			t.Fatalf("stored: %d jobs, %v; want 2", len(jobs), err)
		}
		if e.wakes.Load() == 0 {
			t.Error("the dispatcher was not woken")
		}
	})
	t.Run("BadElementStoresNothing", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		p := e.do(http.MethodPost, "/jobs/batch", `{"jobs": [{"type": "a"}, {"type": "a", "schedule": "nonsense"}]}`).
			wantProblem(t, http.StatusUnprocessableEntity, "jobs[1]")
		if p.Field != "jobs[1].schedule" {
			t.Errorf("field: got %q, want jobs[1].schedule", p.Field)
		}
		jobs, _, err := e.store.JobList(context.Background(), db.JobListParams{})
		if err != nil || len(jobs) != 0 {
			t.Fatalf("stored: %d jobs, %v; want none", len(jobs), err)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		e.do(http.MethodPost, "/jobs/batch", `{"jobs": []}`).wantProblem(t, http.StatusUnprocessableEntity, "at least one")
	})
	t.Run("TooMany", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, func(c *Config) { c.MaxBodyBytes = 1 << 22 })
		body := `{"jobs": [` + strings.Repeat(`{"type": "a"},`, db.MaxBatch) + `{"type": "a"}]}`
		e.do(http.MethodPost, "/jobs/batch", body).wantProblem(t, http.StatusUnprocessableEntity, fmt.Sprint(db.MaxBatch))
	})
}
