package handlers

import (
	"net/http"
	"strings"
	"testing"
)

// TestHandler_ControlsTakeNoBody sends a body to each control that takes
// none. It was never read: POST /jobs/{id}/trigger {"runAt": …} ran the job
// at once, as a trigger without it, and a malformed body or one of another
// Content-Type changed the job all the same. A body with a field is refused
// naming it, one of another Content-Type answers 415, and neither changes
// the job; no body, white space, and {} are as before.
func TestHandler_ControlsTakeNoBody(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "noop", "name": "nightly", "schedule": "0 3 * * *"}`, http.StatusCreated)
	paused := e.do(http.MethodPost, "/jobs/nightly/pause", "").job(t)
	for _, action := range []string{"resume", "trigger", "skip", "retry", "cancel-run"} {
		path := "/jobs/nightly/" + action
		p := e.do(http.MethodPost, path, `{"runAt": "2027-01-01T00:00:00Z"}`).
			wantProblem(t, http.StatusUnprocessableEntity, `unknown field "runAt"; POST /jobs/{id}/`+action+` takes no body`)
		if p.Field != "runAt" {
			t.Errorf("%s: field %q, want runAt", action, p.Field)
		}
		e.do(http.MethodPost, path, `{`).wantProblem(t, http.StatusBadRequest, "not valid JSON")
		e.do(http.MethodPost, path, `now`, "Content-Type", "text/plain").wantProblem(t, http.StatusUnsupportedMediaType, "send application/json")
	}
	e.do(http.MethodDelete, "/jobs/nightly", `{"reason": "x"}`).wantProblem(t, http.StatusUnprocessableEntity, `unknown field "reason"`)
	if got := e.do(http.MethodGet, "/jobs/"+j.ID, "").job(t); got.State != paused.State || !got.UpdatedAt.Equal(paused.UpdatedAt) {
		t.Fatalf("refused controls changed the job: %s updated %v, want %s %v", got.State, got.UpdatedAt, paused.State, paused.UpdatedAt)
	}
	if evs := e.events(j.ID); len(evs) != 1 {
		t.Errorf("events: got %d, want 1 (the pause)", len(evs))
	}
	for _, body := range []string{"", " \n", "{}"} {
		e.do(http.MethodPost, "/jobs/nightly/resume", body).wantStatus(t, http.StatusOK)
		e.do(http.MethodPost, "/jobs/nightly/pause", body).wantStatus(t, http.StatusOK)
	}
	// A chunked empty body is no body: a plain pause, as without one.
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/jobs/nightly/resume", strings.NewReader(""))
	req.TransferEncoding = []string{"chunked"}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("chunked empty resume: %d", res.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, e.srv.URL+"/jobs/nightly/pause", strings.NewReader(""))
	req.TransferEncoding = []string{"chunked"}
	if res, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("chunked empty pause: %d, want 200 (its body is optional)", res.StatusCode)
	}
}
