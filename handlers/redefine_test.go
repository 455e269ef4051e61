package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/wire"
)

// patch sends body as a JSON merge patch of job id, with extra headers as
// for do.
func (e *testEnv) patch(id, body string, headers ...string) response {
	e.t.Helper()
	return e.do(http.MethodPatch, "/jobs/"+id, body, append([]string{"Content-Type", mergePatchType}, headers...)...)
}

// job decodes a 200 answer carrying a job.
func (r response) job(t *testing.T) db.Job {
	t.Helper()
	r.wantStatus(t, http.StatusOK)
	var j db.Job
	r.decode(t, &j)
	return j
}

// events returns the job's timeline from GET /jobs/{id}/events.
func (e *testEnv) events(id string) []db.Event {
	e.t.Helper()
	res := e.do(http.MethodGet, "/jobs/"+id+"/events", "")
	res.wantStatus(e.t, http.StatusOK)
	var events []db.Event
	res.decode(e.t, &events)
	return events
}

func TestHandler_JobNames(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"name": "nightly-backup", "type": "noop", "schedule": "0 3 * * *"}`, http.StatusCreated)
	if j.Name != "nightly-backup" {
		t.Fatalf("name: got %q, want nightly-backup", j.Name)
	}

	t.Run("Conflict", func(t *testing.T) {
		p := e.do(http.MethodPost, "/jobs", `{"name": "nightly-backup", "type": "noop"}`).
			wantProblem(t, http.StatusConflict, `the name "nightly-backup" belongs to job `+j.ID+" (ready); change that job (PATCH /jobs/nightly-backup")
		if p.State != db.StateReady {
			t.Errorf("state member: got %q, want ready (the holder's)", p.State)
		}
		e.do(http.MethodPost, "/jobs/batch", `{"jobs": [{"name": "twin", "type": "a"}, {"name": "twin", "type": "b"}]}`).
			wantProblem(t, http.StatusConflict, `two jobs of the request are named "twin"`)
		if l := e.list("name=twin"); len(l.Jobs) != 0 {
			t.Errorf("a refused batch stored %d jobs", len(l.Jobs))
		}
	})

	t.Run("BadNames", func(t *testing.T) {
		for body, detail := range map[string]string{
			`{"name": "nightly backup", "type": "noop"}`:                   `may hold only ASCII letters, digits, '-', '_' and '.'`,
			`{"name": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "type": "noop"}`:       "looks like a job id",
			`{"name": "by-name", "type": "noop"}`:                          `name "by-name" is a word of the API's paths (/jobs/by-name); pick another`,
			`{"name": "batch", "type": "noop"}`:                            "is a word of the API's paths",
			`{"name": "..", "type": "noop"}`:                               "is only dots",
			`{"name": "-nightly", "type": "noop"}`:                         `name "-nightly" begins with '-': names may not begin with '-'`,
			`{"name": "-", "type": "noop"}`:                                "names may not begin with '-'",
			`{"name": "` + strings.Repeat("n", 101) + `", "type": "noop"}`: "at most 100",
			`{"name": "` + strings.Repeat("é", 60) + `", "type": "noop"}`:  "may hold only ASCII letters",
		} {
			p := e.do(http.MethodPost, "/jobs", body).wantProblem(t, http.StatusUnprocessableEntity, detail)
			if p.Field != "name" {
				t.Errorf("%s: field %q, want name", body, p.Field)
			}
		}
		p := e.do(http.MethodPost, "/jobs/batch", `{"jobs": [{"type": "a"}, {"name": "a b", "type": "b"}]}`).
			wantProblem(t, http.StatusUnprocessableEntity, "jobs[1].name \"a b\" may hold only ASCII")
		if p.Field != "jobs[1].name" {
			t.Errorf("batch field: got %q, want jobs[1].name", p.Field)
		}
	})

	// A job named before names could not begin with '-' is still read,
	// listed, renamed and deleted by its name; a change that keeps the
	// name is refused, saying so.
	t.Run("LeadingDashKept", func(t *testing.T) {
		old, _, err := e.store.JobCreate(context.Background(), db.JobCreateParams{Name: "-legacy", Type: "noop", Schedule: "@hourly"})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.do(http.MethodGet, "/jobs/-legacy", "").job(t); got.ID != old.ID {
			t.Errorf("GET /jobs/-legacy: got %s, want %s", got.ID, old.ID)
		}
		e.do(http.MethodGet, "/jobs/-legacy/runs", "").wantStatus(t, http.StatusOK)
		if l := e.list("name=-legacy"); len(l.Jobs) != 1 || l.Jobs[0].ID != old.ID {
			t.Errorf("jobs named -legacy: got %+v, want %s", l.Jobs, old.ID)
		}
		e.do(http.MethodPatch, "/jobs/-legacy", `{"schedule": "@daily"}`, "Content-Type", mergePatchType).
			wantProblem(t, http.StatusUnprocessableEntity, "names may not begin with '-'")
		if got := e.do(http.MethodPatch, "/jobs/-legacy", `{"name": "legacy"}`, "Content-Type", mergePatchType).job(t); got.ID != old.ID || got.Name != "legacy" {
			t.Errorf("rename of -legacy: got %s %q, want %s legacy", got.ID, got.Name, old.ID)
		}
		gone, _, err := e.store.JobCreate(context.Background(), db.JobCreateParams{Name: "-gone", Type: "noop", RunAt: testNow.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		e.do(http.MethodDelete, "/jobs/-gone", "").wantStatus(t, http.StatusNoContent)
		if got := e.do(http.MethodGet, "/jobs/"+gone.ID, "").job(t); got.State != db.StateCancelled {
			t.Errorf("DELETE /jobs/-gone: the job is %s, want cancelled", got.State)
		}
	})

	t.Run("ListByName", func(t *testing.T) {
		e.create(`{"name": "hourly-report", "type": "noop", "schedule": "@hourly"}`, http.StatusCreated)
		l := e.list("name=nightly-backup")
		if len(l.Jobs) != 1 || l.Jobs[0].ID != j.ID {
			t.Errorf("jobs named nightly-backup: got %+v, want %s alone", l.Jobs, j.ID)
		}
		if l := e.list("name=nobody"); len(l.Jobs) != 0 {
			t.Errorf("jobs named nobody: got %d", len(l.Jobs))
		}
	})

	t.Run("ByName", func(t *testing.T) {
		for _, path := range []string{"/jobs/nightly-backup", "/jobs/by-name/nightly-backup"} {
			if got := e.do(http.MethodGet, path, "").job(t); got.ID != j.ID {
				t.Errorf("GET %s: got %s, want %s", path, got.ID, j.ID)
			}
		}
		res := e.do(http.MethodGet, "/jobs/nightly-backup/runs", "")
		res.wantStatus(t, http.StatusOK)
		e.do(http.MethodGet, "/jobs/nightly-backup/events", "").wantStatus(t, http.StatusOK)
		if got := e.do(http.MethodPost, "/jobs/nightly-backup/pause", "").job(t); got.ID != j.ID || got.State != db.StatePaused {
			t.Errorf("pause by name: got %s %s", got.ID, got.State)
		}
		if got := e.do(http.MethodPost, "/jobs/nightly-backup/resume", "").job(t); got.State != db.StateReady {
			t.Errorf("resume by name: got %s", got.State)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		const detail = `job "nobody" does not exist: no job has that id or name`
		e.do(http.MethodGet, "/jobs/nobody", "").wantProblem(t, http.StatusNotFound, detail)
		e.do(http.MethodGet, "/jobs/by-name/nobody", "").wantProblem(t, http.StatusNotFound, detail)
		e.do(http.MethodGet, "/jobs/nobody/runs", "").wantProblem(t, http.StatusNotFound, detail)
		e.do(http.MethodGet, "/jobs/nobody/events", "").wantProblem(t, http.StatusNotFound, detail)
		e.do(http.MethodPost, "/jobs/nobody/pause", "").wantProblem(t, http.StatusNotFound, detail)
		e.do(http.MethodDelete, "/jobs/nobody", "").wantProblem(t, http.StatusNotFound, detail)
		e.patch("nobody", `{"maxAttempts": 2}`).wantProblem(t, http.StatusNotFound, detail)
		// By name, an id is no name: not the job of that id.
		e.do(http.MethodGet, "/jobs/by-name/"+j.ID, "").wantProblem(t, http.StatusNotFound, `job "`+j.ID+`" does not exist`)
	})
}

// TestHandler_JobNames_Running checks the controls of a running job by its
// name, and that a cancelled job's name is free and can be deleted again.
func TestHandler_JobNames_Running(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"name": "backup", "type": "noop"}`, http.StatusCreated)
	c := e.claim()
	if len(c) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(c))
	}
	e.do(http.MethodDelete, "/jobs/backup", "").wantProblem(t, http.StatusConflict, "job backup is running on worker w1")
	if got := e.do(http.MethodPost, "/jobs/backup/cancel-run", "").job(t); !got.CancelRequested {
		t.Errorf("cancel-run by name: cancelRequested false")
	}
	if _, err := e.store.RunFinish(context.Background(), db.RunFinishParams{
		JobID: j.ID, Generation: c[0].Job.LeaseGeneration, Outcome: db.OutcomeFailed, Error: "boom",
	}); err != nil {
		t.Fatal(err)
	}
	e.do(http.MethodDelete, "/jobs/backup", "").wantStatus(t, http.StatusNoContent)
	// Repeated, it finds the cancelled job of that name: still done.
	e.do(http.MethodDelete, "/jobs/backup", "").wantStatus(t, http.StatusNoContent)
	if got := e.do(http.MethodGet, "/jobs/backup", "").job(t); got.ID != j.ID || got.State != db.StateCancelled {
		t.Errorf("GET by the name of a cancelled job: got %s %s, want %s cancelled", got.ID, got.State, j.ID)
	}
	next := e.create(`{"name": "backup", "type": "noop"}`, http.StatusCreated)
	if got := e.do(http.MethodGet, "/jobs/by-name/backup", "").job(t); got.ID != next.ID {
		t.Errorf("the name after a new job took it: got %s, want %s", got.ID, next.ID)
	}
}

func TestHandler_JobCreate_KeyReused(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	first := e.create(`{"type": "noop", "idempotencyKey": "k"}`, http.StatusCreated)
	p := e.do(http.MethodPost, "/jobs", `{"type": "other", "idempotencyKey": "k"}`).
		wantProblem(t, http.StatusUnprocessableEntity, `idempotency key "k" was used by a different request, which created job `+first.ID)
	if p.Field != "idempotencyKey" {
		t.Errorf("field: got %q, want idempotencyKey", p.Field)
	}
}

func TestHandler_JobNotify(t *testing.T) {
	t.Parallel()
	mail := mustSink(t, "smtp://alerts:secret@mail.example.com:587?from=sked@example.com&to=ops@example.com")
	n := &notify.Notifier{Sinks: []notify.Sink{mail}}
	e := newTestEnv(t, func(c *Config) { c.CheckNotifyFunc = n.CheckSettings })

	j := e.create(`{"type": "noop", "schedule": "@daily", "notify": {"on": ["gave_up", "recovered"], "sinks": ["ntfy:https://ntfy.sh/backups"], "ping": "https://hc-ping.com/abc"}}`, http.StatusCreated)
	want := db.Notify{On: []string{"gave_up", "recovered"}, Sinks: []string{"ntfy:https://ntfy.sh/backups"}, Ping: "https://hc-ping.com/abc"}
	if got := e.do(http.MethodGet, "/jobs/"+j.ID, "").job(t); got.Notify == nil || db.NotifyText(got.Notify) != db.NotifyText(&want) {
		t.Errorf("stored notify: got %+v, want %+v", got.Notify, want)
	}
	// The server's email sink, named with its password masked.
	if !strings.Contains(mail.SMTP.Name, "xxxxx") {
		t.Fatalf("sink name %q does not mask the password", mail.SMTP.Name)
	}
	e.create(`{"type": "noop", "notify": {"sinks": ["`+mail.SMTP.Name+`"]}}`, http.StatusCreated)
	// Settings that say nothing are none; "none" alone tells no event.
	if got := e.create(`{"type": "noop", "notify": {"sinks": []}}`, http.StatusCreated); got.Notify != nil {
		t.Errorf("empty notify stored as %+v, want none", got.Notify)
	}
	if got := e.create(`{"type": "noop", "notify": {"on": ["none"]}}`, http.StatusCreated); got.Notify == nil || len(got.Notify.On) != 1 {
		t.Errorf("notify on none stored as %+v, want it kept", got.Notify)
	}

	for _, tt := range []struct {
		name, notify, field, detail string
	}{
		{"UnknownEvent", `{"on": ["sometimes"]}`, "notify.on", `"sometimes" is not an event; use gave_up, failing, recovered or quiet`},
		{"EmptyEvents", `{"on": []}`, "notify.on", `notify.on is empty: leave it out for the default events, or give ["none"] to tell none`},
		{"NoneWithEvents", `{"on": ["none", "gave_up"]}`, "notify.on", `"none" tells no event, and stands alone`},
		{"BadSink", `{"sinks": ["pager:https://example.com"]}`, "notify.sinks", "pager"},
		{"ForeignEmail", `{"sinks": ["smtp://me:pw@other.example?from=me@example.com&to=x@example.com"]}`, "notify.sinks", "is not one sked serve was started with"},
		{"BadPing", `{"ping": "hc-ping.com/abc"}`, "notify.ping", "give the check's absolute http(s) URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := e.do(http.MethodPost, "/jobs", `{"type": "noop", "notify": `+tt.notify+`}`).wantProblem(t, http.StatusUnprocessableEntity, tt.detail)
			if p.Field != tt.field {
				t.Errorf("field: got %q, want %q", p.Field, tt.field)
			}
			p = e.do(http.MethodPost, "/jobs/batch", `{"jobs": [{"type": "noop", "notify": `+tt.notify+`}]}`).wantProblem(t, http.StatusUnprocessableEntity, tt.detail)
			if p.Field != "jobs[0]."+tt.field {
				t.Errorf("batch field: got %q, want jobs[0].%s", p.Field, tt.field)
			}
			p = e.patch(j.ID, `{"notify": `+tt.notify+`}`).wantProblem(t, http.StatusUnprocessableEntity, tt.detail)
			if p.Field != tt.field {
				t.Errorf("patch field: got %q, want %q", p.Field, tt.field)
			}
		})
	}
}

func TestHandler_JobNotify_Shape(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	for body, want := range map[string]problem{
		`{"on": "gave_up"}`: {Field: "notify.on", Detail: "notify: field on must be an array, not a string"},
		`{"sink": []}`:      {Field: "notify.sink", Detail: `notify: unknown field "sink"; allowed fields are on, sinks, ping`},
		`["gave_up"]`:       {Field: "notify", Detail: `notify must be an object such as {"on": ["gave_up"], "sinks": ["ntfy:https://ntfy.sh/topic"]}, not an array`},
		`7`:                 {Field: "notify", Detail: "not a number"},
	} {
		p := e.do(http.MethodPost, "/jobs", `{"type": "noop", "notify": `+body+`}`).wantProblem(t, http.StatusUnprocessableEntity, want.Detail)
		if p.Field != want.Field {
			t.Errorf("%s: field %q, want %q", body, p.Field, want.Field)
		}
	}
}

func mustSink(t *testing.T, s string) notify.Sink {
	t.Helper()
	sink, err := notify.ParseSink(s)
	if err != nil {
		t.Fatal(err)
	}
	return sink
}

func TestHandler_JobPatch(t *testing.T) {
	t.Parallel()

	t.Run("ScheduleMovesNextRun", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		j := e.create(`{"name": "report", "type": "noop", "schedule": "0 * * * *"}`, http.StatusCreated)
		if want := testNow.Add(time.Hour); !j.NextRunAt.Equal(want) {
			t.Fatalf("first nextRunAt %v, want %v", j.NextRunAt, want)
		}
		wakes := e.wakes.Load()
		got := e.patch("report", `{"schedule": "*/15 * * * *", "timezone": "Europe/Berlin"}`).job(t)
		if got.ID != j.ID || got.Schedule != "*/15 * * * *" || got.Timezone != "Europe/Berlin" {
			t.Errorf("patched: got %s %q %q", got.ID, got.Schedule, got.Timezone)
		}
		if want := testNow.Add(15 * time.Minute); got.NextRunAt == nil || !got.NextRunAt.Equal(want) || !got.Slot.Equal(want) {
			t.Errorf("nextRunAt, slot: got %v, %v, want %v", got.NextRunAt, got.Slot, want)
		}
		if e.wakes.Load() != wakes+1 {
			t.Errorf("a change does not wake the dispatcher")
		}
		if stored := e.do(http.MethodGet, "/jobs/"+j.ID, "").job(t); stored.Schedule != "*/15 * * * *" {
			t.Errorf("stored schedule %q", stored.Schedule)
		}
	})

	t.Run("MergeSemantics", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		j := e.create(`{"name": "hook", "type": "noop", "schedule": "@hourly", "payload": {"url": "https://a.example", "method": "POST"},
			"maxAttempts": 3, "jitter": "1m", "notify": {"on": ["gave_up"], "ping": "https://hc.example/1"}}`, http.StatusCreated)
		// application/json is taken as a merge patch too.
		got := e.do(http.MethodPatch, "/jobs/hook", `{"payload": {"method": null, "body": "hi"}, "maxAttempts": null, "jitter": null, "notify": {"ping": null}}`).job(t)
		var payload map[string]any
		if err := json.Unmarshal(got.Payload, &payload); err != nil || len(payload) != 2 || payload["url"] != "https://a.example" || payload["body"] != "hi" {
			t.Errorf("payload: got %s, want the objects merged: url and body", got.Payload)
		}
		if got.MaxAttempts != db.DefaultMaxAttempts || got.Jitter != 0 {
			t.Errorf("maxAttempts, jitter after null: got %d, %v; want the defaults", got.MaxAttempts, got.Jitter)
		}
		if got.Notify == nil || got.Notify.Ping != "" || len(got.Notify.On) != 1 {
			t.Errorf("notify: got %+v, want on [gave_up] alone", got.Notify)
		}
		// null removes the name (and then the settings), and frees it.
		got = e.patch(j.ID, `{"name": null, "notify": null}`).job(t)
		if got.Name != "" || got.Notify != nil {
			t.Errorf("after null name and notify: got %q, %+v", got.Name, got.Notify)
		}
		e.do(http.MethodGet, "/jobs/hook", "").wantProblem(t, http.StatusNotFound, `job "hook" does not exist`)
		// Named again, then renamed.
		if got = e.patch(j.ID, `{"name": "hook-2"}`).job(t); got.Name != "hook-2" {
			t.Errorf("name: got %q, want hook-2", got.Name)
		}
		// Nothing to change: 200 and nothing recorded.
		before := len(e.events(j.ID))
		e.patch("hook-2", `{"maxAttempts": 5}`).job(t)
		if after := len(e.events(j.ID)); after != before {
			t.Errorf("a patch that changes nothing added %d events", after-before)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		j := e.create(`{"name": "daily", "type": "noop", "schedule": "@daily", "idempotencyKey": "daily-1"}`, http.StatusCreated)
		one := e.create(`{"name": "once", "type": "noop", "runAt": "2026-03-02T00:00:00Z"}`, http.StatusCreated)
		for _, tt := range []struct {
			name, id, body string
			status         int
			field, detail  string
		}{
			{"Type", "daily", `{"type": "other"}`, 422, "type", "job " + j.ID + " is of type noop; a type cannot change: create a new job"},
			{"IdempotencyKey", "daily", `{"idempotencyKey": "daily-2"}`, 422, "idempotencyKey", "an idempotency key cannot change"},
			{"RunAt", "once", `{"runAt": "2026-03-03T00:00:00Z"}`, 422, "runAt", "runAt cannot be patched"},
			{"RunIn", "once", `{"runIn": "1h"}`, 422, "runIn", "runIn cannot be patched"},
			{"OneOffToRecurring", "once", `{"schedule": "@hourly"}`, 422, "schedule", "a one-off job cannot become recurring"},
			{"RecurringToOneOff", "daily", `{"schedule": null}`, 422, "schedule", "nor a recurring job one-off"},
			{"NameTaken", "once", `{"name": "daily"}`, 409, "", `the name "daily" belongs to job ` + j.ID},
			{"NotAnObject", "daily", `["schedule"]`, 400, "", "request body must be a JSON object, not an array"},
			{"NotJSON", "daily", `{"schedule": }`, 400, "", "request body is not valid JSON"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				p := e.patch(tt.id, tt.body).wantProblem(t, tt.status, tt.detail)
				if p.Field != tt.field {
					t.Errorf("field: got %q, want %q", p.Field, tt.field)
				}
			})
		}
		e.do(http.MethodPatch, "/jobs/daily", `{"maxAttempts": 2}`, "Content-Type", "application/json-patch+json").
			wantProblem(t, http.StatusUnsupportedMediaType, `send application/merge-patch+json or application/json`)
		if events := e.events(j.ID); len(events) != 0 {
			t.Errorf("refused patches recorded %d events", len(events))
		}
		if got := e.do(http.MethodGet, "/jobs/"+one.ID, "").job(t); got.Name != "once" || got.Schedule != "" {
			t.Errorf("a refused patch changed the job: %+v", got)
		}
		// A cancelled job is not changed.
		e.do(http.MethodDelete, "/jobs/once", "").wantStatus(t, http.StatusNoContent)
		e.patch(one.ID, `{"maxAttempts": 2}`).wantProblem(t, http.StatusConflict, "job "+one.ID+" is cancelled; create a new one")
	})

	t.Run("Actor", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		j := e.create(`{"name": "report", "type": "noop", "schedule": "0 * * * *"}`, http.StatusCreated)
		e.patch("report", `{"schedule": "30 * * * *"}`, actorHeader, "ann@laptop").job(t)
		e.patch("report", `{"maxAttempts": 9}`).job(t)
		e.patch("report", `{"maxAttempts": 8}`, actorHeader, strings.Repeat("a", maxActorLen+1)).
			wantProblem(t, http.StatusBadRequest, "the Sked-Actor header is 201 bytes long; at most 200 are allowed")

		events := e.events("report")
		if len(events) != 2 {
			t.Fatalf("events: got %d, want 2", len(events))
		}
		// Newest first.
		if events[0].Actor != "api (127.0.0.1)" || events[1].Actor != "ann@laptop (127.0.0.1)" {
			t.Errorf("actors: got %q, %q; want the API's, then ann's", events[0].Actor, events[1].Actor)
		}
		var changes db.Changes
		if err := json.Unmarshal(events[1].Detail, &changes); err != nil {
			t.Fatal(err)
		}
		if c := changes["schedule"]; len(changes) != 1 || c.From != "0 * * * *" || c.To != "30 * * * *" {
			t.Errorf("changes: got %s, want the schedule alone", events[1].Detail)
		}
		if events[1].Kind != db.EventChanged || events[1].JobID != j.ID || !events[1].At.Equal(testNow) {
			t.Errorf("event: got %+v", events[1])
		}
	})
}

// TestHandler_JobPatch_SameChecksAsCreate checks that a patch is refused
// with the very problem POST /jobs answers for the definition it makes.
func TestHandler_JobPatch_SameChecksAsCreate(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, func(c *Config) {
		c.DisabledTypes = map[string]string{"exec": "exec jobs are off; start sked serve with --enable-exec"}
	})
	const base = `{"name": "report", "type": "noop", "schedule": "@hourly"`
	e.create(base+`}`, http.StatusCreated)
	for _, field := range []string{
		`"schedule": "61 * * * *"`,
		`"schedule": "0 0 30 2 *"`,
		`"timezone": "Mars/Olympus"`,
		`"maxAttempts": 0`,
		`"maxAttempts": "3"`,
		`"overlap": "always"`,
		`"misfire": "later"`,
		`"timeout": "soon"`,
		`"backoff": "0s"`,
		`"jitter": "2h"`,
		`"expectSuccessWithin": "-1h"`,
		`"name": "a b"`,
		`"name": "by-name"`,
		`"foo": 1`,
		`"notify": {"sink": []}`,
	} {
		created := e.do(http.MethodPost, "/jobs", `{"type": "noop", "schedule": "@hourly", `+field+`}`)
		patched := e.patch("report", `{`+field+`}`)
		var want, got problem
		created.decode(t, &want)
		patched.decode(t, &got)
		if created.status != http.StatusUnprocessableEntity {
			t.Errorf("create with %s: status %d, want 422", field, created.status)
		}
		if got.Status != want.Status || got.Field != want.Field || got.Detail != want.Detail {
			t.Errorf("patch %s:\n got %d %q %q\nwant %d %q %q (as POST /jobs)", field, got.Status, got.Field, got.Detail, want.Status, want.Field, want.Detail)
		}
	}
}

// raceStore is a real store whose JobGet lets another change of the job
// in between its read and what the caller does with it.
type raceStore struct {
	db.Store
	between func(db.Job)
}

func (s raceStore) JobGet(ctx context.Context, id string) (db.Job, error) {
	j, err := s.Store.JobGet(ctx, id)
	if err == nil {
		s.between(j)
	}
	return j, err
}

func TestHandler_JobPatch_Concurrent(t *testing.T) {
	t.Parallel()
	var e *testEnv
	e = newTestEnv(t, func(c *Config) {
		c.Store = raceStore{Store: c.Store, between: func(j db.Job) {
			spec := db.SpecOf(j)
			spec.MaxAttempts++
			if _, err := e.store.JobRedefine(context.Background(), db.JobRedefineParams{ID: j.ID, Spec: spec, Actor: "bob"}); err != nil {
				t.Error(err)
			}
		}}
	})
	j := e.create(`{"name": "report", "type": "noop", "schedule": "@hourly", "maxAttempts": 3}`, http.StatusCreated)
	p := e.patch("report", `{"schedule": "@daily"}`).wantProblem(t, http.StatusConflict, "job "+j.ID+" was changed by someone else since it was read; read it again and retry")
	if p.State != db.StateReady {
		t.Errorf("state member: got %q, want ready", p.State)
	}
	stored, err := e.store.JobGet(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Schedule != "@hourly" || stored.MaxAttempts != 4 {
		t.Errorf("stored: schedule %q maxAttempts %d; want bob's change alone", stored.Schedule, stored.MaxAttempts)
	}
}

func TestHandler_JobPut(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	put := func(name, body string, headers ...string) response {
		t.Helper()
		return e.do(http.MethodPut, "/jobs/by-name/"+name, body, headers...)
	}
	const certs = `{"type": "noop", "schedule": "0 4 * * *", "payload": {"domains": ["example.com"]}}`

	result := func(res response) db.JobPutResult {
		t.Helper()
		var r db.JobPutResult
		res.decode(t, &r)
		return r
	}
	// A dry run says what a put would do and writes nothing.
	dry := put("certs?dryRun=true", certs)
	dry.wantStatus(t, http.StatusCreated)
	if r := result(dry); !r.Created || r.Job.Name != "certs" || dry.header.Get("Sked-Changed") != "false" {
		t.Errorf("dry run: %+v, Sked-Changed %q", r, dry.header.Get("Sked-Changed"))
	}
	e.do(http.MethodGet, "/jobs/by-name/certs", "").wantStatus(t, http.StatusNotFound)

	res := put("certs", certs, actorHeader, "ci@runner")
	res.wantStatus(t, http.StatusCreated)
	created := result(res)
	j := created.Job
	if !created.Created || j.Name != "certs" || j.Schedule != "0 4 * * *" || res.header.Get("Sked-Changed") != "true" || res.header.Get("Location") != "/jobs/"+j.ID {
		t.Errorf("created: %+v, Sked-Changed %q, Location %q", created, res.header.Get("Sked-Changed"), res.header.Get("Location"))
	}

	// The same again, with the name in the body too, and its spacing changed.
	res = put("certs", `{"name": "certs", "type": "noop", "schedule": "0 4 * * *", "payload": {"domains":["example.com"]}}`)
	if r := result(res); r.Job.ID != j.ID || r.Changed() || res.header.Get("Sked-Changed") != "false" {
		t.Errorf("unchanged: %+v, Sked-Changed %q; want %s, false", r, res.header.Get("Sked-Changed"), j.ID)
	}
	if events := e.events("certs"); len(events) != 0 {
		t.Errorf("an unchanged put recorded %d events", len(events))
	}

	res = put("certs", `{"type": "noop", "schedule": "0 5 * * *", "payload": {"domains": ["example.com"]}}`, actorHeader, "ci@runner")
	changed := result(res)
	got := changed.Job
	if got.ID != j.ID || got.Schedule != "0 5 * * *" || changed.Changes["schedule"].To != "0 5 * * *" || res.header.Get("Sked-Changed") != "true" {
		t.Errorf("changed: %+v, Sked-Changed %q", changed, res.header.Get("Sked-Changed"))
	}
	if want := time.Date(2026, 3, 2, 5, 0, 0, 0, time.UTC); !got.NextRunAt.Equal(want) {
		t.Errorf("nextRunAt: got %v, want %v", got.NextRunAt, want)
	}
	if events := e.events("certs"); len(events) != 1 || events[0].Actor != "ci@runner (127.0.0.1)" {
		t.Errorf("events: got %+v, want one change by ci@runner", events)
	}

	for _, tt := range []struct {
		name, path, body string
		status           int
		field, detail    string
	}{
		{"NameDiffers", "certs", `{"name": "other", "type": "noop"}`, 422, "name", `name "other" in the definition differs from "certs", the name it is put under`},
		{"BadName", "a.b%20c", `{"type": "noop"}`, 422, "name", "may hold only ASCII letters"},
		{"IDShapedName", j.ID, `{"type": "noop"}`, 422, "name", "looks like a job id"},
		{"TypeChange", "certs", `{"type": "other", "schedule": "0 5 * * *"}`, 422, "type", "a type cannot change"},
		{"BadField", "certs", `{"type": "noop", "schedule": "0 5 * * *", "jitter": "25h"}`, 422, "jitter", "longer than 24h0m0s, the shortest time between two slots"},
		{"NoType", "fresh", `{"schedule": "@daily"}`, 422, "type", "type is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := put(tt.path, tt.body).wantProblem(t, tt.status, tt.detail)
			if p.Field != tt.field {
				t.Errorf("field: got %q, want %q", p.Field, tt.field)
			}
		})
	}
	if l := e.list(""); len(l.Jobs) != 1 {
		t.Errorf("jobs: got %d, want 1", len(l.Jobs))
	}
}

// TestHandler_JobPut_DisabledTypeUnchanged: a server that does not run
// exec jobs answers a put of one that another server stored, with the very
// definition, as unchanged (sked apply sends every job of its file); a put
// that would change or create one is refused as before, and writes nothing.
func TestHandler_JobPut_DisabledTypeUnchanged(t *testing.T) {
	t.Parallel()
	const off = "exec jobs are off; start sked serve with --enable-exec"
	e := newTestEnv(t, func(c *Config) { c.DisabledTypes = map[string]string{"exec": off} })
	runsExec := httptest.NewServer(New(Config{Store: e.store}))
	defer runsExec.Close()
	const deploy = `{"type": "exec", "schedule": "0 4 * * *", "payload": {"command": ["./deploy.sh"]}}`
	req, err := http.NewRequest(http.MethodPut, runsExec.URL+"/jobs/by-name/deploy", strings.NewReader(deploy))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	stored, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	stored.Body.Close()
	if stored.StatusCode != http.StatusCreated {
		t.Fatalf("put on the server that runs exec jobs: %d", stored.StatusCode)
	}

	for _, path := range []string{"/jobs/by-name/deploy?dryRun=true", "/jobs/by-name/deploy"} {
		res := e.do(http.MethodPut, path, deploy)
		res.wantStatus(t, http.StatusOK)
		var r db.JobPutResult
		res.decode(t, &r)
		if r.Changed() || r.Job.Name != "deploy" || res.header.Get("Sked-Changed") != "false" {
			t.Errorf("PUT %s of the stored definition: %+v, Sked-Changed %q; want it unchanged", path, r, res.header.Get("Sked-Changed"))
		}
	}
	for _, c := range []struct{ path, body string }{
		{"/jobs/by-name/deploy", `{"type": "exec", "schedule": "0 5 * * *", "payload": {"command": ["./deploy.sh"]}}`},
		{"/jobs/by-name/deploy?dryRun=true", `{"type": "exec", "schedule": "0 4 * * *", "payload": {"command": ["./other.sh"]}}`},
		{"/jobs/by-name/fresh", deploy},
	} {
		if p := e.do(http.MethodPut, c.path, c.body).wantProblem(t, http.StatusUnprocessableEntity, off); p.Field != "type" {
			t.Errorf("PUT %s %s: field %q, want type", c.path, c.body, p.Field)
		}
	}
	if l := e.list(""); len(l.Jobs) != 1 || l.Jobs[0].Schedule != "0 4 * * *" {
		t.Errorf("jobs: got %+v, want deploy alone, unchanged", l.Jobs)
	}
	// In-process (API.JobPut, an embedding program's Server.Put), the same.
	def := wire.JobCreateRequest{Type: "exec", Schedule: "0 4 * * *", Payload: json.RawMessage(`{"command": ["./deploy.sh"]}`)}
	if r, err := e.api.JobPut(t.Context(), "deploy", def); err != nil || r.Changed() {
		t.Errorf("API.JobPut of the stored definition: %+v, %v; want it unchanged", r, err)
	}
	changed := def
	changed.Schedule = "0 5 * * *"
	if _, err := e.api.JobPut(t.Context(), "deploy", changed); err == nil || !strings.Contains(err.Error(), off) {
		t.Errorf("API.JobPut of a changed definition: %v; want %q", err, off)
	}
	if events := e.events("deploy"); len(events) != 0 {
		t.Errorf("the puts recorded %d events, want none", len(events))
	}
}

func TestHandler_EventList(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"name": "report", "type": "noop", "schedule": "@hourly"}`, http.StatusCreated)
	if events := e.events(j.ID); len(events) != 0 {
		t.Fatalf("a new job's events: got %d, want none", len(events))
	}
	for i := 2; i <= 4; i++ {
		e.patch("report", `{"maxAttempts": `+strconv.Itoa(i)+`}`).job(t)
	}
	res := e.do(http.MethodGet, "/jobs/report/events?limit=2", "")
	res.wantStatus(t, http.StatusOK)
	var page []db.Event
	res.decode(t, &page)
	next := res.header.Get("Sked-Next-Cursor")
	if len(page) != 2 || next == "" || page[0].ID < page[1].ID {
		t.Fatalf("first page: got %+v, cursor %q; want the 2 newest and a cursor", page, next)
	}
	if got, want := res.header.Get("Link"), `</jobs/report/events?cursor=`+next+`&limit=2>; rel="next"`; got != want {
		t.Errorf("Link: got %q, want %q", got, want)
	}
	var changes db.Changes
	if err := json.Unmarshal(page[0].Detail, &changes); err != nil || changes["maxAttempts"].To != float64(4) {
		t.Errorf("newest change: got %s (%v), want maxAttempts to 4", page[0].Detail, err)
	}
	res = e.do(http.MethodGet, "/jobs/report/events?limit=2&cursor="+next, "")
	res.decode(t, &page)
	if len(page) != 1 || res.header.Get("Sked-Next-Cursor") != "" {
		t.Errorf("second page: got %d events, cursor %q; want the oldest alone", len(page), res.header.Get("Sked-Next-Cursor"))
	}
	e.do(http.MethodGet, "/jobs/report/events?cursor=x", "").wantProblem(t, http.StatusBadRequest, `cursor "x" is not a cursor of events`)
	e.do(http.MethodGet, "/jobs/report/events?since=1", "").wantProblem(t, http.StatusBadRequest, `unknown query parameter "since"`)
}

// TestHandler_WriteQueries: a write given a query parameter it does not
// take is refused and writes nothing: a PUT's ?dryrun=true (a typo) or
// its dryRun given twice would have written, and so would POST
// /jobs?dryRun=true.
func TestHandler_WriteQueries(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	for _, r := range []struct{ method, path, body, field string }{
		{http.MethodPut, "/jobs/by-name/nightly?dryrun=true", `{"type": "t", "schedule": "@daily"}`, "dryrun"},
		{http.MethodPut, "/jobs/by-name/nightly?dryRun=false&dryRun=true", `{"type": "t", "schedule": "@daily"}`, "dryRun"},
		{http.MethodPut, "/jobs/by-name/nightly?dryRun=yes", `{"type": "t", "schedule": "@daily"}`, "dryRun"},
		{http.MethodPost, "/jobs?dryRun=true", `{"type": "t"}`, "dryRun"},
		{http.MethodPost, "/jobs/batch?dryRun=true", `{"jobs": [{"type": "t"}]}`, "dryRun"},
	} {
		p := e.do(r.method, r.path, r.body).wantProblem(t, http.StatusBadRequest, "")
		if p.Field != r.field {
			t.Errorf("%s %s: field %q (%s); want %q", r.method, r.path, p.Field, p.Detail, r.field)
		}
	}
	if jobs, _, err := e.store.JobList(t.Context(), db.JobListParams{}); err != nil || len(jobs) != 0 {
		t.Errorf("after refused writes: %d jobs, %v; want none", len(jobs), err)
	}
	e.do(http.MethodPut, "/jobs/by-name/nightly?dryRun=true", `{"type": "t", "schedule": "@daily"}`).wantStatus(t, http.StatusCreated)
}

// TestHandler_GapBoundsAnyDay: a recurring job's dead-man's switch and
// jitter are bounded by the gaps of its schedule's DST days however far off
// they are, so that a definition is accepted or refused whatever the day:
// before, hourly in New York with expectSuccessWithin 1h30m (the November
// fall-back has a 2h gap) was accepted in September and then an unchanged
// PUT (sked apply) or a PATCH of another field refused near the fall-back;
// hourly on Lord Howe with jitter 1h (30 minutes of DST: a 30m gap in
// October) was accepted in March and refused in late September.
func TestHandler_GapBoundsAnyDay(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	put := func(name, body string) response {
		t.Helper()
		return e.do(http.MethodPut, "/jobs/by-name/"+name, body)
	}
	accepted := func(res response) db.Job {
		t.Helper()
		if res.status != http.StatusOK && res.status != http.StatusCreated {
			t.Fatalf("status: got %d, want 200 or 201; body %s", res.status, res.body)
		}
		var r db.JobPutResult
		res.decode(t, &r)
		return r.Job
	}
	const (
		newYork  = `{"type": "exec", "schedule": "0 * * * *", "timezone": "America/New_York", "expectSuccessWithin": %q, "payload": {"command": ["true"]}}`
		lordHowe = `{"type": "noop", "schedule": "0 * * * *", "timezone": "Australia/Lord_Howe", "jitter": %q}`
	)
	for i, clock := range []time.Time{
		testNow, // March
		time.Date(2026, 9, 25, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC), // the eve of New York's fall-back
		time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC),   // an hour after it: the next is in 2027
	} {
		e.store.NowFunc = func() time.Time { return clock }
		put("qq", fmt.Sprintf(newYork, "1h30m")).wantProblem(t, http.StatusUnprocessableEntity,
			`expectSuccessWithin 1h30m0s is no longer than 2h0m0s, the longest time between two slots of schedule "0 * * * *" (`)
		j := accepted(put("qq", fmt.Sprintf(newYork, "2h30m")))
		e.patch(j.ID, fmt.Sprintf(`{"maxAttempts": %d}`, i+2)).wantStatus(t, http.StatusOK)

		put("lh", fmt.Sprintf(lordHowe, "1h")).wantProblem(t, http.StatusUnprocessableEntity,
			`jitter 1h0m0s is longer than 30m0s, the shortest time between two slots of schedule "0 * * * *" (`)
		accepted(put("lh", fmt.Sprintf(lordHowe, "30m")))
	}
	// The gap named is the coming one, months away.
	e.store.NowFunc = func() time.Time { return time.Date(2026, 9, 25, 12, 0, 0, 0, time.UTC) }
	put("qq", fmt.Sprintf(newYork, "2h")).wantProblem(t, http.StatusUnprocessableEntity,
		"(2026-11-01T01:00:00-04:00 to 2026-11-01T02:00:00-05:00)")
	put("lh", fmt.Sprintf(lordHowe, "31m")).wantProblem(t, http.StatusUnprocessableEntity,
		"(2026-10-04T02:30:00+11:00 to 2026-10-04T03:00:00+11:00)")
}

// TestHandler_JobPatchFieldCase patches a field under a name of another
// case. A merge patch applies its members by their exact names, so
// {"Jitter": null} removed nothing while answering 200 (and {"Jitter":
// "1m"} set jitter, as the decoding of the merged definition folds case):
// the patch is refused naming the field and the one meant, and the job is
// left as it was.
func TestHandler_JobPatchFieldCase(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"name": "nightly", "type": "noop", "schedule": "0 3 * * *", "jitter": "5m",
		"notify": {"on": ["gave_up"]}}`, http.StatusCreated)
	for _, tc := range []struct{ body, field, meant string }{
		{`{"Jitter": null}`, "Jitter", "jitter"},
		{`{"SCHEDULE": "0 4 * * *"}`, "SCHEDULE", "schedule"},
		{`{"notify": {"On": null}}`, "notify.On", "on"},
	} {
		p := e.patch(j.ID, tc.body).wantProblem(t, http.StatusUnprocessableEntity, `did you mean "`+tc.meant+`"?`)
		if p.Field != tc.field {
			t.Errorf("%s: field %q, want %q", tc.body, p.Field, tc.field)
		}
	}
	got := e.do(http.MethodGet, "/jobs/"+j.ID, "").job(t)
	if got.Jitter != j.Jitter || got.Schedule != j.Schedule || got.Notify == nil || len(got.Notify.On) != 1 {
		t.Errorf("refused patches changed the job: jitter %v schedule %q notify %+v", got.Jitter, got.Schedule, got.Notify)
	}
	if evs := e.events(j.ID); len(evs) != 0 {
		t.Errorf("events: got %d, want none", len(evs))
	}
	// The exact names still patch.
	if got := e.patch(j.ID, `{"jitter": null, "notify": {"on": null}}`).job(t); got.Jitter != 0 || got.Notify != nil {
		t.Errorf("patch: jitter %v notify %+v, want both removed", got.Jitter, got.Notify)
	}
}
