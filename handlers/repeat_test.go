package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
)

// TestHandler_CompleteRepeatIsTheSameReport: a completion sent again because
// its answer was lost is answered 200 as recorded; a second completion of
// the same generation that reports something else (the same outcome, but
// another error and no retry) is not that repeat, was not recorded, and must
// not be answered as if it had been.
func TestHandler_CompleteRepeatIsTheSameReport(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "t", "maxAttempts": 3}`, http.StatusCreated)
	if c := e.claim(); len(c) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(c))
	}
	first := `{"generation": 1, "outcome": "failed", "error": "boom", "retryable": true}`
	e.do(http.MethodPost, "/jobs/"+j.ID+"/complete", first).wantStatus(t, http.StatusOK)
	var again db.Job
	e.do(http.MethodPost, "/jobs/"+j.ID+"/complete", first).decode(t, &again)
	if again.State != db.StateReady {
		t.Fatalf("the repeat: job %s; want it answered as recorded (ready to retry)", again.State)
	}

	other := `{"generation": 1, "outcome": "failed", "error": "disk on fire", "retryable": false}`
	res := e.do(http.MethodPost, "/jobs/"+j.ID+"/complete", other)
	if res.status == http.StatusOK {
		var got db.Job
		res.decode(t, &got)
		t.Fatalf("a different report of generation 1 (error %q, not retryable) answered 200 with the job %s to retry: "+
			"the worker believes a report that was never recorded; want 409", "disk on fire", got.State)
	}
	res.wantProblem(t, http.StatusConflict, "no longer holds")
}

// TestHandler_StaleDetailSaysWhy: a 409 to a heartbeat or completion says
// why the generation no longer holds the job, as its run tells it. A
// report that differs from the one its run already ended with, a
// heartbeat after the worker's own completion and a generation no claim
// gave were all told "its lease expired or another worker claimed it",
// with the report "kept on the run as its late outcome": none was so, and
// the worker's author looked for a lapse that never happened.
func TestHandler_StaleDetailSaysWhy(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "t", "maxAttempts": 3}`, http.StatusCreated)
	if c := e.claim(); len(c) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(c))
	}
	e.do(http.MethodPost, "/jobs/"+j.ID+"/complete", `{"generation": 1, "outcome": "succeeded", "output": "one"}`).wantStatus(t, http.StatusOK)
	for _, tc := range []struct{ name, path, body, want string }{
		{"another report", "/complete", `{"generation": 1, "outcome": "succeeded", "output": "two"}`, "its run already ended succeeded, and this report is not the one it ended with"},
		{"heartbeat after the report", "/heartbeat", `{"generation": 1}`, "its run already ended succeeded; nothing was renewed"},
		{"a generation never given", "/heartbeat", `{"generation": 7}`, "generation 7 never held job"},
		{"a report of one never given", "/complete", `{"generation": 7, "outcome": "failed"}`, "generation 7 never held job"},
	} {
		p := e.do(http.MethodPost, "/jobs/"+j.ID+tc.path, tc.body).wantProblem(t, http.StatusConflict, tc.want)
		if strings.Contains(p.Detail, "lease expired") || strings.Contains(p.Detail, "late outcome") {
			t.Errorf("%s: detail %q blames a lapsed lease or promises a late outcome", tc.name, p.Detail)
		}
		// A 409 about a job carries its state, as the other conflicts do.
		if p.State != db.StateDone {
			t.Errorf("%s: state %q, want the job's, done", tc.name, p.State)
		}
	}
	runs, _, err := e.store.RunList(t.Context(), db.RunListParams{JobID: j.ID, Limit: 10})
	if err != nil || len(runs) != 1 || runs[0].Output != "one" || runs[0].LateOutcome != "" {
		t.Fatalf("runs %+v, %v; want one, succeeded with its first report's output and no late outcome", runs, err)
	}
}
