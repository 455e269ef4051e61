package handlers

import (
	"net/http"
	"testing"
)

// TestHandler_PercentEncodedPath names jobs in the path percent-encoded.
// The router matches the path as sent when it is not encoded as Go would
// encode it, and the job's id or name was then read still encoded: GET
// /jobs/%61%31 (a1) answered 404, and PUT /jobs/by-name/%2e%2e was refused
// for the name "%2e%2e", where a %00 or an encoded U+200F were decoded.
func TestHandler_PercentEncodedPath(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"name": "a1", "type": "noop"}`, http.StatusCreated)
	if got := e.do(http.MethodGet, "/jobs/%61%31", "").job(t); got.ID != j.ID {
		t.Errorf("GET /jobs/%%61%%31: got job %s, want %s", got.ID, j.ID)
	}
	if got := e.do(http.MethodGet, "/jobs/by-name/a%31", "").job(t); got.ID != j.ID {
		t.Errorf("GET /jobs/by-name/a%%31: got job %s, want %s", got.ID, j.ID)
	}
	e.do(http.MethodGet, "/jobs/%61%31/events", "").wantStatus(t, http.StatusOK)
	e.do(http.MethodGet, "/jobs/a1%2Fevents", "").wantProblem(t, http.StatusNotFound, `job "a1/events" does not exist`)
	e.do(http.MethodPut, "/jobs/by-name/%2e%2e", `{"type": "noop"}`).wantProblem(t, http.StatusUnprocessableEntity, `name ".." is only dots`)
	res := e.do(http.MethodPut, "/jobs/by-name/%61%31", `{"type": "noop", "maxAttempts": 3}`)
	res.wantStatus(t, http.StatusOK)
	// A literal percent sign, sent as %25, is not decoded twice.
	e.do(http.MethodGet, "/jobs/a%2531", "").wantProblem(t, http.StatusNotFound, `job "a%31" does not exist`)
}
