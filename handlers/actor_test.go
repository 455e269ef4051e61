package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
)

// A bad Sked-Actor is refused the same way on every route, reads
// included, before anything is stored; the probes answer whatever it is.
func TestHandler_ActorHeader(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "noop", "name": "report", "schedule": "0 * * * *"}`, http.StatusCreated)
	routes := []struct{ method, path, body string }{
		{http.MethodPost, "/jobs", `{"type": "noop"}`},
		{http.MethodPost, "/jobs/batch", `{"jobs": [{"type": "noop"}]}`},
		{http.MethodGet, "/jobs", ""},
		{http.MethodGet, "/jobs/" + j.ID, ""},
		{http.MethodPatch, "/jobs/report", `{"maxAttempts": 2}`},
		{http.MethodPut, "/jobs/by-name/report", `{"type": "noop", "schedule": "0 5 * * *"}`},
		{http.MethodDelete, "/jobs/report", ""},
		{http.MethodPost, "/jobs/report/pause", ""},
		{http.MethodPost, "/jobs/report/trigger", ""},
		{http.MethodPost, "/claims", `{"workerId": "w", "types": ["noop"], "wait": "0s"}`},
		{http.MethodGet, "/stats", ""},
		{http.MethodGet, "/nope", ""},
	}
	for _, bad := range []struct{ value, detail string }{
		{strings.Repeat("a", maxActorLen+1), "the Sked-Actor header is 201 bytes long; at most 200 are allowed"},
		{"ann\xff@laptop", `the Sked-Actor header "ann\xff@laptop" is not printable UTF-8 text`},
		{"ann\t@laptop", `the Sked-Actor header "ann\t@laptop" is not printable UTF-8 text`},
	} {
		for _, r := range routes {
			p := e.do(r.method, r.path, r.body, actorHeader, bad.value).wantProblem(t, http.StatusBadRequest, bad.detail)
			if p.Field != actorHeader {
				t.Errorf("%s %s: field %q, want %q", r.method, r.path, p.Field, actorHeader)
			}
		}
	}
	if l := e.list(""); len(l.Jobs) != 1 || l.Jobs[0].ID != j.ID || l.Jobs[0].State != "ready" || l.Jobs[0].MaxAttempts == 2 {
		t.Errorf("refused requests changed the jobs: %+v", l.Jobs)
	}
	if events := e.events("report"); len(events) != 0 {
		t.Errorf("refused requests left events: %+v", events)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		e.do(http.MethodGet, path, "", actorHeader, "ann\xff@laptop").wantStatus(t, http.StatusOK)
	}
	// A good one passes everywhere; a change records it.
	e.create(`{"type": "noop"}`, http.StatusCreated, actorHeader, "ann@laptop")
	e.patch("report", `{"maxAttempts": 3}`, actorHeader, " ann@laptop ").job(t)
	if events := e.events("report"); len(events) != 1 || events[0].Actor != "ann@laptop (127.0.0.1)" {
		t.Errorf("events: got %+v, want one by ann@laptop (127.0.0.1)", events)
	}
}

// TestActor_OnControls: a control sent with Sked-Actor puts it, with the
// client's address, on the job's timeline.
func TestActor_OnControls(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "t", "schedule": "@hourly"}`, http.StatusCreated)
	e.do(http.MethodPost, "/jobs/"+j.ID+"/pause", `{"reason": "disk full"}`, "Sked-Actor", "ann@laptop").wantStatus(t, http.StatusOK)
	res := e.do(http.MethodGet, "/jobs/"+j.ID+"/events", "")
	res.wantStatus(t, http.StatusOK)
	var events []db.Event
	res.decode(t, &events)
	if len(events) != 1 || events[0].Kind != db.EventPaused || events[0].Actor != "ann@laptop (127.0.0.1)" ||
		!strings.Contains(string(events[0].Detail), `"reason":"disk full"`) {
		t.Fatalf("timeline = %+v; want the pause by ann@laptop (127.0.0.1) with its reason", events)
	}
}

// TestHandler_GuardedAnswers: every answer, JSON, problem or probe, tells
// a browser not to guess its type, so that a job's payload or output shown
// in one is never read as a page, and not to keep a copy of it.
func TestHandler_GuardedAnswers(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "noop", "payload": {"html": "<script>alert(1)</script>"}}`, http.StatusCreated)
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/jobs/" + j.ID},
		{http.MethodGet, "/jobs"},
		{http.MethodGet, "/jobs/nope"},
		{http.MethodDelete, "/healthz"},
		{http.MethodGet, "/healthz"},
		{http.MethodGet, "/openapi.json"},
	} {
		h := e.do(r.method, r.path, "").header
		if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s: X-Content-Type-Options %q, want nosniff", r.method, r.path, got)
		}
		if got := h.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s %s: Cache-Control %q, want no-store", r.method, r.path, got)
		}
	}
}

// TestHandler_Head: a HEAD of a GET route answers as its GET does, without
// a body (curl -I), instead of 405.
func TestHandler_Head(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "noop"}`, http.StatusCreated)
	for _, path := range []string{"/jobs", "/jobs/" + j.ID, "/stats", "/openapi.json"} {
		res := e.do(http.MethodHead, path, "")
		if res.status != http.StatusOK || len(res.body) != 0 || res.header.Get("Content-Type") == "" {
			t.Errorf("HEAD %s: %d, %d bytes, Content-Type %q; want 200 without a body", path, res.status, len(res.body), res.header.Get("Content-Type"))
		}
	}
	if res := e.do(http.MethodHead, "/jobs/nope", ""); res.status != http.StatusNotFound {
		t.Errorf("HEAD of a missing job: %d, want 404", res.status)
	}
}
