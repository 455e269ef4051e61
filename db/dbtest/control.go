package dbtest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

func testPauseUntil(t *testing.T, f *fixture) {
	c := f.Store
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *"})
	// An end that has passed by the store's clock is refused, whoever asks.
	if _, err := c.JobPauseUntil(f.ctx, db.JobPauseParams{ID: j.ID, Until: Start}); !errors.Is(err, db.ErrInvalid) || !strings.Contains(err.Error(), "is not in the future (it is "+Start.Format(time.RFC3339)+" now): give a later time") {
		t.Fatalf("pause until now: %v; want a validation error", err)
	}
	p, err := c.JobPauseUntil(f.ctx, db.JobPauseParams{ID: j.ID, Reason: "maintenance", Until: Start.Add(150 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if p.State != db.StatePaused || p.PauseReason != "maintenance" || p.PauseUntil == nil {
		t.Fatalf("paused job = %+v", p)
	}
	f.Clock.Set(Start.Add(149 * time.Minute))
	if n, err := c.JobResumeDue(f.ctx); err != nil || n != 0 {
		t.Fatalf("resumed %d (%v) before the pause ran out", n, err)
	}
	f.Clock.Set(Start.Add(150 * time.Minute))
	if n, err := c.JobResumeDue(f.ctx); err != nil || n != 1 {
		t.Fatalf("resumed %d (%v), want 1", n, err)
	}
	got := f.get(j.ID)
	wantState(t, got, db.StateReady)
	wantTime(t, "slot after the pause", got.Slot, Start.Add(3*time.Hour))
	if got.PauseReason != "" || got.PauseUntil != nil {
		t.Fatalf("pause kept after resume: %q %v", got.PauseReason, got.PauseUntil)
	}
	wantCounts(t, f.outcomes(j.ID), map[string]int{"missed:paused": 2})
	// The timeline says the pause ran out: resumed, by sked.
	events, _, err := c.EventList(f.ctx, db.EventListParams{JobID: j.ID, Limit: 1})
	if err != nil || len(events) != 1 || events[0].Kind != db.EventResumed || events[0].Actor != "sked" || !events[0].At.Equal(f.Clock.Now()) {
		t.Fatalf("newest event %+v (%v); want resumed by sked at %s", events, err, f.Clock.Now())
	}
}

func testTrigger(t *testing.T, f *fixture) {
	c := f.Store
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *", MaxAttempts: 3})
	f.Clock.Set(Start.Add(10 * time.Minute))
	if _, err := c.JobTrigger(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	claim := f.claimOne("w")
	wantTime(t, "the triggered run's slot", claim.Job.Slot, f.Clock.Now())
	if _, err := c.JobTrigger(f.ctx, j.ID); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("trigger of a running job: %v", err)
	}
	got := f.finish(claim, db.OutcomeFailed, true)
	wantState(t, got, db.StateReady)
	wantTime(t, "slot after the triggered run", got.Slot, Start.Add(time.Hour))
	wantTime(t, "due after the triggered run", got.NextRunAt, Start.Add(time.Hour))
	if got.Triggered || got.Attempt != 0 {
		t.Fatalf("after the triggered run: triggered %v attempt %d", got.Triggered, got.Attempt)
	}
	runs := f.runs(j.ID)
	if len(runs) != 1 || runs[0].Reason != db.ReasonManual || !runs[0].GaveUp {
		t.Fatalf("triggered run = %+v, want one manual run that does not retry", runs)
	}
	// The schedule carries on: 13:00 runs as usual.
	f.Clock.Set(Start.Add(time.Hour))
	wantTime(t, "scheduled slot", f.claimOne("w").Job.Slot, Start.Add(time.Hour))

	one := f.create(db.JobCreateParams{RunAt: Start.Add(48 * time.Hour)})
	got, err := c.JobTrigger(f.ctx, one.ID)
	if err != nil || !got.NextRunAt.Equal(f.Clock.Now()) || got.Triggered {
		t.Fatalf("trigger of a future one-off: %+v, %v", got, err)
	}
	if _, err := c.JobTrigger(f.ctx, one.ID); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("trigger of a due job: %v", err)
	}
}

// testTriggerHealth: an operator's extra run of a schedule is not one of
// its firings, so it neither makes the schedule failing when it gives up
// nor ends its failing when it succeeds; the schedule's own firings do.
// The timeline says so: the extra run's gave_up is not the first failure,
// and its success is no recovery.
func testTriggerHealth(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *", MaxAttempts: 1})
	trigger := func(outcome db.Outcome) db.Job {
		t.Helper()
		if _, err := f.Store.JobTrigger(f.ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		return f.finish(f.claimOne("w"), outcome, false)
	}
	failingNow := func(when string, want *time.Time, got db.Job) {
		t.Helper()
		if (got.FailingSince == nil) != (want == nil) || want != nil && !got.FailingSince.Equal(*want) {
			t.Errorf("%s: failing since %v; want %v", when, got.FailingSince, want)
		}
		listed, _, err := f.Store.JobList(f.ctx, db.JobListParams{Health: db.HealthFailing})
		st, serr := f.Store.Stats(f.ctx, f.Clock.Now())
		if n := int64(len(listed)); err != nil || serr != nil || n != st.FailingSchedules || (n == 1) != (want != nil) {
			t.Errorf("%s: health=failing lists %d (%v), stats count %d (%v); want both %v", when, n, err, st.FailingSchedules, serr, want != nil)
		}
	}
	lastEvent := func(when, kind string, firstFailure bool) {
		t.Helper()
		events, _, err := f.Store.EventList(f.ctx, db.EventListParams{JobID: j.ID, Limit: 1})
		if err != nil || len(events) != 1 {
			t.Fatalf("%s: events %v, %v", when, events, err)
		}
		var d db.RunEvent
		if err := json.Unmarshal(events[0].Detail, &d); err != nil || events[0].Kind != kind || d.FirstFailure != firstFailure {
			t.Errorf("%s: newest event %s %s (%v); want %s with firstFailure %v", when, events[0].Kind, events[0].Detail, err, kind, firstFailure)
		}
	}

	f.Clock.Set(Start.Add(10 * time.Minute))
	failingNow("an extra run that gave up", nil, trigger(db.OutcomeFailed))
	lastEvent("an extra run that gave up", db.EventGaveUp, false)

	f.Clock.Set(Start.Add(time.Hour))
	failedAt := f.Clock.Now()
	failingNow("a firing that gave up", &failedAt, f.finish(f.claimOne("w"), db.OutcomeFailed, false))
	lastEvent("a firing that gave up", db.EventGaveUp, true)

	f.Clock.Set(Start.Add(70 * time.Minute))
	failingNow("an extra run that succeeded", &failedAt, trigger(db.OutcomeSucceeded))
	lastEvent("an extra run that succeeded", db.EventTriggered, false)
	f.Clock.Set(Start.Add(80 * time.Minute))
	failingNow("another extra run that gave up", &failedAt, trigger(db.OutcomeFailed))
	lastEvent("another extra run that gave up", db.EventGaveUp, false)

	f.Clock.Set(Start.Add(2 * time.Hour))
	failingNow("a firing that succeeded", nil, f.finish(f.claimOne("w"), db.OutcomeSucceeded, false))
	lastEvent("a firing that succeeded", db.EventRecovered, false)
}

func testSkipNext(t *testing.T, f *fixture) {
	c := f.Store
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *"})
	got, err := c.JobSkipNext(f.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "slot after skip", got.Slot, Start.Add(2*time.Hour))
	wantCounts(t, f.outcomes(j.ID), map[string]int{"missed:skipped": 1})
	one := f.create(db.JobCreateParams{})
	if _, err := c.JobSkipNext(f.ctx, one.ID); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("skip of a one-off: %v", err)
	}
}

func testBackfill(t *testing.T, f *fixture) {
	c := f.Store
	j := f.create(db.JobCreateParams{Type: "report", Schedule: "0 * * * *"})
	// 13:00 runs as scheduled; then 10:00 to 13:00 is backfilled.
	f.Clock.Set(Start.Add(time.Hour))
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	p := db.JobBackfillParams{ID: j.ID, From: Start.Add(-2 * time.Hour), To: Start.Add(time.Hour)}
	b, err := c.JobBackfill(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if b.Slots != 4 || b.Created != 3 || len(b.JobIDs) != 3 || b.LeftToSchedule != 0 {
		t.Fatalf("backfill = %+v, want 4 slots and 3 jobs (13:00 already ran)", b)
	}
	again, err := c.JobBackfill(f.ctx, p)
	if err != nil || again.Created != 0 || len(again.JobIDs) != 3 || again.JobIDs[0] != b.JobIDs[0] {
		t.Fatalf("repeated backfill = %+v, %v; want the same jobs, none created", again, err)
	}
	child := f.get(b.JobIDs[0])
	if child.ParentID != j.ID || child.Type != "report" || child.Recurring() {
		t.Fatalf("backfill job = %+v", child)
	}
	wantTime(t, "backfill slot", child.Slot, Start.Add(-2*time.Hour))
	if _, err := c.JobBackfill(f.ctx, db.JobBackfillParams{ID: j.ID, From: Start.Add(-2000 * time.Hour), To: Start}); !errors.Is(err, db.ErrInvalid) || !strings.Contains(err.Error(), "backfill at most") {
		t.Fatalf("backfill of too many slots: %v", err)
	}
	// A range that ends after the store's now holds slots yet to come.
	if _, err := c.JobBackfill(f.ctx, db.JobBackfillParams{ID: j.ID, From: Start, To: Start.Add(2 * time.Hour)}); !errors.Is(err, db.ErrInvalid) || !strings.Contains(err.Error(), "to is in the future") {
		t.Fatalf("backfill into the future: %v", err)
	}
}

// testBackfillAfterRedefine: a backfill repeated after the schedule's
// definition changed creates nothing and answers the first one's jobs
// ("repeating a backfill creates nothing new"); it was refused as a reuse
// of their keys by another request.
func testBackfillAfterRedefine(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Type: "report", Schedule: "0 * * * *", Payload: json.RawMessage(`{"v":1}`)})
	f.Clock.Set(Start.Add(time.Hour))
	p := db.JobBackfillParams{ID: j.ID, From: Start.Add(-2 * time.Hour), To: Start.Add(-time.Hour)}
	first, err := f.Store.JobBackfill(f.ctx, p)
	if err != nil || first.Created != 2 {
		t.Fatalf("backfill = %+v, %v", first, err)
	}
	spec := db.SpecOf(f.get(j.ID))
	spec.Payload = json.RawMessage(`{"v":2}`)
	if _, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	again, err := f.Store.JobBackfill(f.ctx, p)
	if err != nil || again.Created != 0 || !slices.Equal(again.JobIDs, first.JobIDs) {
		t.Fatalf("backfill repeated after a change of payload = %+v, %v; want the first's jobs %v, none created", again, err, first.JobIDs)
	}
}

// testBackfillLeavesTheScheduleItsOwn: a backfill creates no job for the
// slot the schedule is running, nor for the one it is about to run: those
// are the schedule's, and a child of them would run the slot twice, at once
// while it runs.
func testBackfillLeavesTheScheduleItsOwn(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Type: "report", Schedule: "0 * * * *"})
	f.Clock.Set(Start.Add(time.Hour)) // 13:00
	running := f.claimOne("w")
	b, err := f.Store.JobBackfill(f.ctx, db.JobBackfillParams{ID: j.ID, From: Start.Add(-time.Hour), To: Start.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if b.Slots != 3 || b.Created != 2 || b.LeftToSchedule != 1 {
		t.Fatalf("backfill of 11:00 to 13:00 while 13:00 runs = %+v; want 3 slots, 2 jobs (11:00, 12:00) and 1 left to the schedule", b)
	}
	for _, id := range b.JobIDs {
		if slot := f.get(id).Slot; !slot.Before(Start.Add(time.Hour)) {
			t.Errorf("backfill made job %s for slot %v, which the schedule is running", id, slot)
		}
	}
	f.finish(running, db.OutcomeSucceeded, false)
	f.Clock.Set(Start.Add(2*time.Hour + 30*time.Minute)) // 14:30: 14:00 is due, not yet claimed
	b, err = f.Store.JobBackfill(f.ctx, db.JobBackfillParams{ID: j.ID, From: Start.Add(90 * time.Minute), To: Start.Add(150 * time.Minute)})
	if err != nil || b.Slots != 1 || b.Created != 0 || len(b.JobIDs) != 0 || b.LeftToSchedule != 1 {
		t.Fatalf("backfill of 13:30 to 14:30 while 14:00 is due = %+v, %v; want its 1 slot, no job and 1 left to the schedule, which runs it", b, err)
	}
	claims := f.claim("w", 10) // the schedule's 14:00 and the children of 11:00 and 12:00
	for _, c := range claims {
		if c.Job.ID == j.ID && !c.Job.Slot.Equal(Start.Add(2*time.Hour)) {
			t.Fatalf("the schedule claimed slot %v; want 14:00", c.Job.Slot)
		}
		if c.Job.ID != j.ID && !c.Job.Slot.Before(Start.Add(time.Hour)) {
			t.Fatalf("claimed backfill job %s of slot %v", c.Job.ID, c.Job.Slot)
		}
	}
	if len(claims) != 3 {
		t.Fatalf("claimed %d jobs at 14:30; want the schedule's 14:00 and the two backfilled", len(claims))
	}
}

// testQuietToTheMillisecond: a sweep finds a schedule quiet a millisecond
// after its window, counted from its last success, ran out, and not at its
// end (the stores read only the watched jobs whose window ran out).
func testQuietToTheMillisecond(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "@every 1m", ExpectSuccessWithin: 10 * time.Minute})
	f.Clock.Set(Start.Add(time.Minute))
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	end := Start.Add(11 * time.Minute)
	f.Clock.Set(end)
	if quiet, err := f.Store.JobQuietSweep(f.ctx); err != nil || len(quiet) != 0 {
		t.Fatalf("sweep as the window ends = %+v, %v; want nothing", quiet, err)
	}
	f.Clock.Set(end.Add(time.Millisecond))
	if quiet, err := f.Store.JobQuietSweep(f.ctx); err != nil || len(quiet) != 1 || quiet[0].ID != j.ID {
		t.Fatalf("sweep a millisecond later = %+v, %v; want the job quiet", quiet, err)
	}
}

func testDeadMansSwitch(t *testing.T, f *fixture) {
	c := f.Store
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *", ExpectSuccessWithin: 2 * time.Hour, MaxAttempts: 1})
	f.Clock.Set(Start.Add(2 * time.Hour))
	if ch, err := c.JobQuietSweep(f.ctx); err != nil || len(ch) != 0 {
		t.Fatalf("quiet sweep inside the window: %+v %v", ch, err)
	}
	f.Clock.Set(Start.Add(2*time.Hour + time.Second))
	ch, err := c.JobQuietSweep(f.ctx)
	if err != nil || len(ch) != 1 || ch[0].QuietSince == nil {
		t.Fatalf("quiet sweep past the window = %+v, %v; want the job gone quiet", ch, err)
	}
	if again, _ := c.JobQuietSweep(f.ctx); len(again) != 0 {
		t.Fatalf("a quiet job was reported twice: %+v", again)
	}
	events, _, err := c.EventList(f.ctx, db.EventListParams{JobID: j.ID})
	var detail db.QuietEvent
	if err != nil || len(events) != 1 || events[0].Kind != db.EventQuiet || events[0].Actor != "sked" ||
		json.Unmarshal(events[0].Detail, &detail) != nil || detail.ExpectSuccessWithin != db.Duration(2*time.Hour) {
		t.Fatalf("the timeline after the switch went off: %+v, %v; want one quiet event by sked", events, err)
	}
	// The notifier's outbox has it, written with the mark: what tells it.
	outbox := f.eventsAfter(0, db.OutboxKinds, func(evs []db.Event) bool {
		return slices.ContainsFunc(evs, func(e db.Event) bool { return e.ID == events[0].ID })
	})
	if i := slices.IndexFunc(outbox, func(e db.Event) bool { return e.ID == events[0].ID }); i < 0 || !outbox[i].At.Equal(*ch[0].QuietSince) {
		t.Fatalf("the outbox %+v; want the quiet event at the mark, %v", outbox, ch[0].QuietSince)
	}
	f.Clock.Set(Start.Add(3 * time.Hour))
	f.finish(f.claimLease("w", 1, time.Hour)[0], db.OutcomeSucceeded, false)
	if got := f.get(j.ID); got.QuietSince != nil || got.LastSuccessAt == nil {
		t.Fatalf("after a success: quiet since %v, last success %v; want recovered", got.QuietSince, got.LastSuccessAt)
	}
	if ch, err = c.JobQuietSweep(f.ctx); err != nil || len(ch) != 0 {
		t.Fatalf("sweep after a success = %+v, %v; want nothing", ch, err)
	}
}

// testControlEvents: each control that changes a job puts an event on its
// timeline, by the actor its context carries, with what it did; a control
// that changes nothing puts none.
func testControlEvents(t *testing.T, f *fixture) {
	const ann = "ann@laptop (192.0.2.7)"
	c, ctx := f.Store, db.WithActor(f.ctx, ann)
	must := func(_ db.Job, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *"})
	until := Start.Add(5 * time.Hour)
	must(c.JobPauseUntil(ctx, db.JobPauseParams{ID: j.ID, Reason: "maintenance", Until: until}))
	must(c.JobPauseUntil(ctx, db.JobPauseParams{ID: j.ID, Reason: "maintenance", Until: until})) // no change
	must(c.JobResume(ctx, j.ID))
	skipped := *f.get(j.ID).Slot
	must(c.JobSkipNext(ctx, j.ID))
	must(c.JobTrigger(ctx, j.ID))
	run := f.claimOne("w")
	must(c.JobRequestCancelRun(ctx, j.ID))
	if _, err := c.JobBackfill(ctx, db.JobBackfillParams{ID: j.ID, From: Start.Add(-3 * time.Hour), To: Start.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}

	k := f.create(db.JobCreateParams{MaxAttempts: 1, Type: "other"})
	claims, err := c.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Max: 1, Types: []string{"other"}})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim of the one-off job: %d, %v", len(claims), err)
	}
	f.finish(claims[0], db.OutcomeFailed, false)
	must(c.JobRetry(ctx, k.ID))
	must(c.JobCancel(ctx, k.ID))
	must(c.JobCancel(ctx, k.ID)) // no change

	timeline := func(id string) []db.ControlEvent {
		t.Helper()
		events, _, err := c.EventList(f.ctx, db.EventListParams{JobID: id, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		var out []db.ControlEvent
		for i := len(events) - 1; i >= 0; i-- { // oldest first
			e := events[i]
			if e.Kind == db.EventGaveUp {
				continue // the run's, not a control's
			}
			var d db.ControlEvent
			if err := json.Unmarshal(e.Detail, &d); err != nil || e.Actor != ann {
				t.Fatalf("event %+v: %v; want a control's detail by %s", e, err, ann)
			}
			out = append(out, d)
		}
		return out
	}
	kindsOf := func(id string) string {
		events, _, _ := c.EventList(f.ctx, db.EventListParams{JobID: id, Limit: 50})
		var kinds []string
		for i := len(events) - 1; i >= 0; i-- {
			kinds = append(kinds, events[i].Kind)
		}
		return strings.Join(kinds, ",")
	}
	if got, want := kindsOf(j.ID), "paused,resumed,skipped,triggered,cancel_requested,backfilled"; got != want {
		t.Fatalf("timeline of the schedule: %s; want %s", got, want)
	}
	d := timeline(j.ID)
	if d[0].From != db.StateReady || d[0].To != db.StatePaused || d[0].Reason != "maintenance" || d[0].Until == nil || !d[0].Until.Equal(until) {
		t.Errorf("paused: %+v; want ready to paused, its reason and end", d[0])
	}
	if d[2].Slot == nil || !d[2].Slot.Equal(skipped) {
		t.Errorf("skipped: %+v; want the slot %s", d[2], skipped)
	}
	if d[4].Generation != run.Job.LeaseGeneration || d[4].From != db.StateRunning {
		t.Errorf("cancel_requested: %+v; want the run of generation %d", d[4], run.Job.LeaseGeneration)
	}
	if d[5].JobsCreated != 3 || d[5].RangeFrom == nil || d[5].RangeTo == nil {
		t.Errorf("backfilled: %+v; want its range and 3 jobs", d[5])
	}
	if got, want := kindsOf(k.ID), "gave_up,retried,cancelled"; got != want {
		t.Fatalf("timeline of the one-off job: %s; want %s", got, want)
	}
	if d := timeline(k.ID); d[0].From != db.StateDead || d[0].To != db.StateReady || d[1].To != db.StateCancelled {
		t.Errorf("one-off job's controls: %+v", d)
	}
}

// testPauseWhileRunning pauses a schedule whose run is in flight: the run
// goes on, and the job pauses when it ends, with the pause's reason; a
// resume before then takes the pause back. A one-off job's run is all of
// it: its pause is a conflict.
func testPauseWhileRunning(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *", MaxAttempts: 3})
	f.Clock.Set(*j.NextRunAt)
	c := f.claimLease("w", 1, time.Hour)[0]
	p := db.JobPauseParams{ID: j.ID, Reason: "maintenance"}
	got, err := f.Store.JobPauseUntil(f.ctx, p)
	if err != nil || got.State != db.StateRunning || !got.PauseRequested || got.PauseReason != "maintenance" {
		t.Fatalf("pause during the run: %s, requested %v, reason %q, %v; want running, to pause", got.State, got.PauseRequested, got.PauseReason, err)
	}
	if _, err := f.Store.JobPauseUntil(f.ctx, p); err != nil {
		t.Fatal(err)
	}
	if again, err := f.Store.JobPause(f.ctx, j.ID); err != nil || again.PauseReason != "maintenance" {
		t.Fatalf("a bare pause again: reason %q, %v; want the pause asked for kept", again.PauseReason, err)
	}
	if events, _, _ := f.Store.EventList(f.ctx, db.EventListParams{JobID: j.ID}); len(events) != 1 || events[0].Kind != db.EventPaused {
		t.Errorf("events after the same pause thrice: %+v; want one paused", events)
	}
	after := f.finish(c, db.OutcomeFailed, true) // its retry is dropped with the pause
	if after.State != db.StatePaused || after.PauseRequested || after.PauseReason != "maintenance" {
		t.Fatalf("after the run: %s, requested %v, reason %q; want paused for maintenance", after.State, after.PauseRequested, after.PauseReason)
	}
	events, _, _ := f.Store.EventList(f.ctx, db.EventListParams{JobID: j.ID})
	var begun db.ControlEvent
	if len(events) != 2 || events[0].Kind != db.EventPaused || events[0].Actor != "sked" ||
		json.Unmarshal(events[0].Detail, &begun) != nil || begun.To != db.StatePaused || begun.Reason != "maintenance" {
		t.Errorf("events after the run: %+v; want the pause beginning, by sked, on top of the one asked for", events)
	}
	f.Clock.Advance(10 * time.Minute)
	resumed, err := f.Store.JobResume(f.ctx, j.ID)
	if err != nil || resumed.State != db.StateReady || resumed.Attempt != 0 || !resumed.Slot.Equal(j.Slot.Add(time.Hour)) {
		t.Fatalf("resumed: %s attempt %d slot %v, %v; want ready at the next slot, its retry dropped", resumed.State, resumed.Attempt, resumed.Slot, err)
	}

	// Taken back before the run ends.
	f.Clock.Set(*resumed.NextRunAt)
	c = f.claimLease("w", 1, time.Hour)[0]
	if _, err := f.Store.JobPause(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Store.JobResume(f.ctx, j.ID); err != nil || got.PauseRequested || got.State != db.StateRunning {
		t.Fatalf("resume during the run: %s requested %v, %v; want running, no pause to come", got.State, got.PauseRequested, err)
	}
	if after := f.finish(c, db.OutcomeSucceeded, false); after.State != db.StateReady || after.PauseReason != "" {
		t.Fatalf("after the run: %s, reason %q; want ready", after.State, after.PauseReason)
	}

	once := f.create(db.JobCreateParams{})
	f.claimLease("w", 1, time.Hour)
	var conflict *db.ConflictError
	if _, err := f.Store.JobPause(f.ctx, once.ID); !errors.As(err, &conflict) || conflict.State != db.StateRunning {
		t.Fatalf("pause of a running one-off job: %v; want a conflict", err)
	}
}

// testPauseReasonNotText pauses with a reason that not every store can keep
// as it is, a NUL or a byte that is not UTF-8 (PostgreSQL's text refuses
// both, SQLite would keep them), or one too long to show on every page of
// the job's events: each backend refuses it alike, naming the field, and
// the job stays as it was.
func testPauseReasonNotText(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *"})
	for _, reason := range []string{"a\x00b", "a\xffb", strings.Repeat("r", db.MaxReasonLen+1)} {
		_, err := f.Store.JobPauseUntil(f.ctx, db.JobPauseParams{ID: j.ID, Reason: reason})
		var ve *db.ValidationError
		if !errors.As(err, &ve) || ve.Field != "reason" {
			t.Fatalf("pause for reason %q: %v; want a validation error of field reason", reason, err)
		}
		if got := f.get(j.ID); got.State != db.StateReady || got.PauseReason != "" {
			t.Fatalf("after the refused pause for reason %q: %s, reason %q; want ready as it was", reason, got.State, got.PauseReason)
		}
	}
	if events, _, err := f.Store.EventList(f.ctx, db.EventListParams{JobID: j.ID}); err != nil || len(events) != 0 {
		t.Fatalf("timeline %+v (%v); want no event: nothing happened", events, err)
	}
}

// testServeRunNotRemote: a remote renewal or report (Remote, as the worker
// protocol sends them) of a lease that sked serve's own pool holds is a
// conflict, decided in the transaction that would write it, and changes
// nothing: the job stays running under the pool's lease, its run keeps no
// late outcome. The pool's own report of it goes through.
func testServeRunNotRemote(t *testing.T, f *fixture) {
	f.create(db.JobCreateParams{})
	c := f.claimOne(db.ServeWorkerPrefix + "host/1")
	gen := c.Job.LeaseGeneration
	_, hbErr := f.Store.RunHeartbeat(f.ctx, db.RunHeartbeatParams{JobID: c.Job.ID, Generation: gen, Lease: 24 * time.Hour, Remote: true})
	_, finErr := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: c.Job.ID, Generation: gen, Outcome: db.OutcomeSucceeded, Output: "forged", Remote: true})
	for _, err := range []error{hbErr, finErr} {
		if !errors.Is(err, db.ErrConflict) || !strings.Contains(err.Error(), "sked serve's own pool") {
			t.Fatalf("a remote renewal or report of the pool's run: %v; want a conflict naming the pool", err)
		}
	}
	if got := f.get(c.Job.ID); got.State != db.StateRunning || got.LeaseGeneration != gen || !got.LeaseUntil.Equal(*c.Job.LeaseUntil) {
		t.Fatalf("after refused remote writes: %s, generation %d, lease until %v; want running as claimed, until %v", got.State, got.LeaseGeneration, got.LeaseUntil, c.Job.LeaseUntil)
	}
	if rs := f.runs(c.Job.ID); len(rs) != 1 || rs[0].Outcome != db.OutcomeRunning || rs[0].LateOutcome != "" || rs[0].Output != "" {
		t.Fatalf("runs %+v; want the pool's run running, nothing recorded on it", rs)
	}
	if j := f.finish(c, db.OutcomeSucceeded, false); j.State != db.StateDone {
		t.Fatalf("the pool's own report: %s; want done", j.State)
	}
}

// testRemoteRunTimedOut: a remote worker that renews its run past the
// job's timeout (and a minute's grace for its own end of it) has the run
// ended timed_out by that renewal, which answers a conflict: the job is
// retried as after any timeout. Within the timeout the renewal goes
// through. A worker that ignored timeouts renewed its run for ever.
func testRemoteRunTimedOut(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Timeout: time.Minute, MaxAttempts: 3})
	c := f.claimLease("box1/42", 1, time.Minute)[0]
	renew := func() error {
		_, err := f.Store.RunHeartbeat(f.ctx, db.RunHeartbeatParams{JobID: j.ID, Generation: c.Job.LeaseGeneration, Lease: time.Minute, Remote: true})
		return err
	}
	for range 2 {
		f.Clock.Advance(50 * time.Second) // to 1m40s: within the timeout and its grace
		if err := renew(); err != nil {
			t.Fatalf("renewal within the timeout: %v", err)
		}
	}
	f.Clock.Advance(30 * time.Second) // 2m10s: past them
	err := renew()
	if !errors.Is(err, db.ErrConflict) || !strings.Contains(err.Error(), "passed its timeout") {
		t.Fatalf("renewal past the timeout: %v; want a conflict saying the run timed out", err)
	}
	// The conflict's state is the job's as the run ended (the 409's state):
	// it said running, of a job already ready for its retry.
	if ce := (*db.ConflictError)(nil); !errors.As(err, &ce) || ce.State != db.StateReady {
		t.Fatalf("renewal past the timeout: %#v; want a conflict with the job's state after it, ready", err)
	}
	if got := f.get(j.ID); got.State != db.StateReady || got.Attempt != 1 || got.LeaseGeneration != c.Job.LeaseGeneration {
		t.Fatalf("job after: %s, attempt %d; want ready for its retry", got.State, got.Attempt)
	}
	if rs := f.runs(j.ID); len(rs) != 1 || rs[0].Outcome != db.OutcomeTimedOut {
		t.Fatalf("runs %+v; want one, timed_out", rs)
	}
	if _, err := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: j.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeSucceeded, Remote: true}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("the worker's late report: %v; want stale", err)
	}
	if rs := f.runs(j.ID); len(rs) != 1 || rs[0].Outcome != db.OutcomeTimedOut || rs[0].LateOutcome != db.OutcomeSucceeded {
		t.Fatalf("runs %+v; want the timed_out run to keep the worker's report as its late outcome, as the renewal said", rs)
	}
}

// testServeRunNotRemoteStale: a remote report of a run of sked serve's own
// pool records nothing on it when the pool's lease has ended, either (the
// late outcome it would take is the pool's to write).
func testServeRunNotRemoteStale(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{MaxAttempts: 3})
	c := f.claimLease(db.ServeWorkerPrefix+"host/1", 1, 30*time.Second)[0]
	f.Clock.Advance(31 * time.Second) // ended, not reaped yet
	_, err := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: j.ID, Generation: c.Job.LeaseGeneration,
		Outcome: db.OutcomeFailed, Error: "forged", Remote: true})
	if !errors.Is(err, db.ErrStale) {
		t.Fatalf("remote report of the pool's ended lease: %v; want stale", err)
	}
	if rs := f.runs(j.ID); len(rs) != 1 || rs[0].LateOutcome != "" || rs[0].LateError != "" {
		t.Fatalf("runs %+v; want nothing of the remote report on the pool's run", rs)
	}
}

// testRemoteRenewalReaped: a remote worker renews and reports a generation
// that was reaped, and whose job sked serve's own pool has claimed since:
// both are stale, on every store (the renewal was a conflict naming the
// pool where a store read the job whatever its generation).
func testRemoteRenewalReaped(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{MaxAttempts: 3})
	old := f.claimLease("box/1", 1, 30*time.Second)[0]
	f.Clock.Advance(31 * time.Second)
	if n, err := f.Store.RunReapExpired(f.ctx); err != nil || n != 1 {
		t.Fatalf("reap: %d, %v", n, err)
	}
	f.claimOne(db.ServeWorkerPrefix + "host/1")
	_, hbErr := f.Store.RunHeartbeat(f.ctx, db.RunHeartbeatParams{JobID: j.ID, Generation: old.Job.LeaseGeneration, Lease: time.Minute, Remote: true})
	_, finErr := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: j.ID, Generation: old.Job.LeaseGeneration, Outcome: db.OutcomeSucceeded, Remote: true})
	for what, err := range map[string]error{"renewal": hbErr, "report": finErr} {
		if !errors.Is(err, db.ErrStale) {
			t.Errorf("remote %s of the reaped generation: %v; want stale", what, err)
		}
	}
}

// testPayloadEscapedNUL creates a job whose payload holds an escaped NUL
// (\u0000), valid JSON that every store keeps as it is: PostgreSQL's
// payload column is json, which takes it (jsonb would not).
func testPayloadEscapedNUL(t *testing.T, f *fixture) {
	payload := json.RawMessage(`{"a":"\u0000"}`)
	j := f.create(db.JobCreateParams{Payload: payload})
	if got := f.get(j.ID); string(got.Payload) != string(payload) {
		t.Fatalf("payload read back %s; want %s", got.Payload, payload)
	}
}

// testRunsHeld: RunsHeld names the jobs whose live lease a worker holds,
// with their running runs, as the claim answered them; not another
// worker's, nor a lease that ended.
func testRunsHeld(t *testing.T, f *fixture) {
	for range 3 {
		f.create(db.JobCreateParams{})
	}
	mine := f.claimLease("box/1", 2, 30*time.Second)
	f.claimLease("box/2", 1, time.Hour)
	held, err := f.Store.RunsHeld(f.ctx, "box/1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{mine[0].Job.ID: mine[0].RunID, mine[1].Job.ID: mine[1].RunID}
	if len(held) != 2 {
		t.Fatalf("RunsHeld(box/1) = %d claims; want the 2 it claimed", len(held))
	}
	for _, c := range held {
		if want[c.Job.ID] != c.RunID || c.Job.LeaseOwner != "box/1" || c.Job.State != db.StateRunning {
			t.Errorf("held %s run %d (%s, %s); want one of %v", c.Job.ID, c.RunID, c.Job.LeaseOwner, c.Job.State, want)
		}
	}
	f.Clock.Advance(31 * time.Second)
	if held, err := f.Store.RunsHeld(f.ctx, "box/1"); err != nil || len(held) != 0 {
		t.Errorf("RunsHeld after the leases ended = %v, %v; want none", held, err)
	}

	// A triggered run's slot is its claim's time, as the claim answered
	// it, not the schedule's pending slot.
	j := f.create(db.JobCreateParams{Type: "yearly", Schedule: "0 9 1 1 *"})
	if _, err := f.Store.JobTrigger(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	c := f.claimLease("box/3", 1, time.Minute)
	held, err = f.Store.RunsHeld(f.ctx, "box/3")
	if err != nil || len(c) != 1 || len(held) != 1 || !held[0].Job.Slot.Equal(*c[0].Job.Slot) {
		t.Fatalf("RunsHeld of a triggered run = %v, %v; want the slot the claim answered (%v)", held, err, c)
	}
}
