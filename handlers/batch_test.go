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
			{"type": "b", "schedule": "@hourly", "idempotencyKey": "k"}]}`)
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
			t.Errorf("a request repeated with its idempotency key created job %s; want the first, %s", got.Jobs[2].ID, got.Jobs[1].ID)
		}
		e.do(http.MethodPost, "/jobs/batch", `{"jobs": [{"type": "c", "idempotencyKey": "k"}]}`).
			wantProblem(t, http.StatusUnprocessableEntity, "different request")
		// One key on two different jobs of one batch: it names no job,
		// since none was created.
		e.do(http.MethodPost, "/jobs/batch", `{"jobs": [{"type": "c", "idempotencyKey": "k2"}, {"type": "d", "idempotencyKey": "k2"}]}`).
			wantProblem(t, http.StatusUnprocessableEntity, `idempotency key "k2" is given to two different jobs of the batch; give each its own key (nothing was created)`)
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
	t.Run("ElementChecks", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		for _, tc := range []struct{ body, field, detail string }{
			{`{"jobs": [{"type": "a", "idempotencyKey": "k\u0000x"}]}`, "jobs[0].idempotencyKey", "jobs[0].idempotencyKey \"k\\x00x\" contains a control character"},
			{`{"jobs": [{"type": "a"}, {"type": "a", "idempotencyKey": "k\r\nX: 1"}]}`, "jobs[1].idempotencyKey", "control character"},
			{`{"jobs": [{"type": "a"}, {"type": "a", "jitter": "2562047h"}]}`, "jobs[1].jitter", "jobs[1].jitter 2562047h0m0s is longer than 24h0m0s"},
			{`{"jobs": [{"type": "a", "schedule": "@every 10s", "jitter": "11s"}]}`, "jobs[0].jitter", "longer than 10s, the shortest time between two slots"},
			{`{"jobs": [{"type": "a"}, {"type": "a", "timeout": "soon"}]}`, "jobs[1].timeout", "jobs[1].timeout: "},
			{`{"jobs": [{"type": "a", "idempotencyKey": "k1"}, {"type": "b", "idempotencyKey": "k1"}]}`, "jobs[1].idempotencyKey", `idempotency key "k1" is given to two different jobs of the batch`},
			// What decoding refuses names the element too.
			{`{"jobs": [{"type": "a"}, {"type": "a", "zzz": 1}]}`, "jobs[1].zzz", `jobs[1].zzz: unknown field "zzz"; allowed fields are name, type, payload`},
			{`{"jobs": [{"type": "a"}, {"type": "a", "runAt": 3}]}`, "jobs[1].runAt", "jobs[1].runAt: field runAt must be a string, not a number"},
			{`{"jobs": [{"type": "a"}, null]}`, "jobs[1]", "jobs[1]: the job must be a JSON object, not null"},
			{`{"jobs": [[1]]}`, "jobs[0]", "jobs[0]: the job must be a JSON object, not an array"},
		} {
			p := e.do(http.MethodPost, "/jobs/batch", tc.body).wantProblem(t, http.StatusUnprocessableEntity, tc.detail)
			if p.Field != tc.field {
				t.Errorf("%s: field got %q, want %q", tc.body, p.Field, tc.field)
			}
			if strings.Count(p.Detail, "jobs[") > 1 {
				t.Errorf("%s: detail %q names the element more than once", tc.body, p.Detail)
			}
		}
		e.do(http.MethodPost, "/jobs/batch", `{"jobs": [{"type": "a"}]}`, "Content-Type", "").
			wantProblem(t, http.StatusUnsupportedMediaType, "send it as Content-Type: application/json")
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

// TestHandler_JobBatchIdempotencyKeyHeader sends a batch with an
// Idempotency-Key header, which a batch does not read (each element has its
// own idempotencyKey): it was ignored, so that a client retrying the batch
// under the header created every job again. It is refused, creating
// nothing.
func TestHandler_JobBatchIdempotencyKeyHeader(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	p := e.do(http.MethodPost, "/jobs/batch", `{"jobs": [{"type": "noop"}]}`, "Idempotency-Key", "k1").
		wantProblem(t, http.StatusUnprocessableEntity, "give each job its own idempotencyKey")
	if p.Field != "Idempotency-Key" {
		t.Errorf("field: got %q, want Idempotency-Key", p.Field)
	}
	if l := e.list(""); len(l.Jobs) != 0 {
		t.Errorf("a refused batch created %d jobs", len(l.Jobs))
	}
}
