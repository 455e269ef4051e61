package handlers

import (
	"net/http"
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
