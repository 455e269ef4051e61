package dbtest

import (
	"slices"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

// The dead-man's switch beyond its plain case (testDeadMansSwitch): what
// a pause, a resume, a redefinition and the runs that end a quiet spell do
// to it.

// quiet sweeps and returns the ids of the jobs that went quiet.
func (f *fixture) quiet() []string {
	f.Helper()
	ch, err := f.Store.JobQuietSweep(f.ctx)
	if err != nil {
		f.Fatalf("quiet sweep: %v", err)
	}
	var ids []string
	for _, j := range ch {
		ids = append(ids, j.ID)
	}
	return ids
}

// testQuietAfterResume: the switch is off while a schedule is paused, and
// its window starts again at the resume: a schedule paused for longer than
// its window is not quiet the moment it resumes, before its first slot
// since could run, but is once a whole window passes with no success.
func testQuietAfterResume(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *", ExpectSuccessWithin: 2 * time.Hour, MaxAttempts: 1})
	f.Clock.Set(Start.Add(time.Hour)) // 13:00
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	if _, err := f.Store.JobPause(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	f.Clock.Set(Start.Add(7 * time.Hour)) // 19:00, six hours since the success
	if ids := f.quiet(); len(ids) != 0 {
		t.Fatalf("a paused schedule went quiet: %v", ids)
	}
	if _, err := f.Store.JobResume(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if ids := f.quiet(); len(ids) != 0 {
		t.Fatalf("a schedule went quiet the moment it resumed, before its next slot (20:00) could run: %v", ids)
	}
	f.Clock.Set(Start.Add(9 * time.Hour)) // 21:00: two hours since the resume
	if ids := f.quiet(); len(ids) != 0 {
		t.Fatalf("quiet at the end of the window that the resume began: %v", ids)
	}
	f.Clock.Set(Start.Add(9*time.Hour + time.Second))
	if ids := f.quiet(); len(ids) != 1 || ids[0] != j.ID {
		t.Fatalf("a whole window since the resume with no success: quiet %v; want %s", ids, j.ID)
	}
}

// goneQuiet is a schedule of type typ, of an hourly slot, watched for
// two hours, created now and gone quiet two hours and a second later, with
// no run yet (with the schedules of the test before it, which are left to
// go quiet again).
func (f *fixture) goneQuiet(typ string) db.Job {
	f.Helper()
	j := f.create(db.JobCreateParams{Type: typ, Schedule: "0 * * * *", ExpectSuccessWithin: 2 * time.Hour, MaxAttempts: 1})
	f.Clock.Advance(2*time.Hour + time.Second)
	if ids := f.quiet(); !slices.Contains(ids, j.ID) {
		f.Fatalf("quiet %v; want %s among them", ids, j.ID)
	}
	return f.get(j.ID)
}

// wantRecovered checks that the success that ended j's quiet spell ended
// it at once, with a recovered event on its timeline at that success,
// which is what the notifier tells (schedule_recovered).
func (f *fixture) wantRecovered(j db.Job, how string) {
	f.Helper()
	if j.QuietSince != nil || j.LastSuccessAt == nil {
		f.Fatalf("%s: quiet since %v, last success %v; want no longer quiet", how, j.QuietSince, j.LastSuccessAt)
	}
	events, _, err := f.Store.EventList(f.ctx, db.EventListParams{JobID: j.ID})
	if err != nil || !slices.ContainsFunc(events, func(e db.Event) bool { return e.Kind == db.EventRecovered && e.At.Equal(*j.LastSuccessAt) }) {
		f.Fatalf("%s: timeline %+v, %v; want a recovered event at the success, %v", how, events, err, j.LastSuccessAt)
	}
	if ids := f.quiet(); len(ids) != 0 {
		f.Fatalf("%s: the sweep after it changed %v; want nothing", how, ids)
	}
}

// testQuietRecovered: each success of a quiet schedule ends its quiet
// spell as it is recorded, and puts the recovery on its timeline: a run of
// its own slot, an operator's extra run, and a run during which a pause
// was asked for, after which the schedule is paused (and not swept).
func testQuietRecovered(t *testing.T, f *fixture) {
	f.goneQuiet("slot")
	f.wantRecovered(f.finish(f.claimType("slot"), db.OutcomeSucceeded, false), "a success of the schedule's slot")

	j := f.goneQuiet("trigger")
	for j.NextRunAt.Before(f.Clock.Now()) { // an extra run is for a schedule not due
		var err error
		if j, err = f.Store.JobSkipNext(f.ctx, j.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Store.JobTrigger(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	c := f.claimType("trigger")
	if !c.Job.Triggered {
		t.Fatalf("claimed %+v; want the extra run", c.Job)
	}
	f.wantRecovered(f.finish(c, db.OutcomeSucceeded, false), "a success of an extra run")

	j = f.goneQuiet("pause")
	c = f.claimType("pause")
	if _, err := f.Store.JobPause(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	after := f.finish(c, db.OutcomeSucceeded, false)
	if after.State != db.StatePaused {
		t.Fatalf("paused during its run, then %s; want paused", after.State)
	}
	f.wantRecovered(after, "a success of a run during which a pause was asked for")
}

// testQuietUnwatched: a quiet schedule whose switch is turned off, that
// is cancelled or paused, is quiet no more: in the job, the jobs listed
// quiet (the dashboard's, health=quiet) and the count of quiet schedules
// (sked_schedules_quiet) alike.
func testQuietUnwatched(t *testing.T, f *fixture) {
	off := f.goneQuiet("off")
	cancelled := f.goneQuiet("cancelled")
	paused := f.goneQuiet("paused")
	if _, err := f.Store.JobPause(f.ctx, paused.ID); err != nil {
		t.Fatal(err)
	}
	spec := db.SpecOf(off)
	spec.ExpectSuccessWithin = 0
	if _, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: off.ID, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Store.JobCancel(f.ctx, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	listed, _, err := f.Store.JobList(f.ctx, db.JobListParams{Health: db.HealthQuiet})
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Store.Stats(f.ctx, f.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []db.Job{off, cancelled, paused} {
		if got := f.get(j.ID); got.QuietSince != nil {
			t.Errorf("job %s (type %s) quiet since %v; want quiet no more", j.ID, j.Type, got.QuietSince)
		}
	}
	if len(listed) != 0 || st.QuietSchedules != 0 {
		t.Errorf("%d listed quiet, %d counted quiet; want none", len(listed), st.QuietSchedules)
	}
}

// claimType claims the one due job of type typ.
func (f *fixture) claimType(typ string) db.Claim {
	f.Helper()
	c, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{typ}, Max: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 {
		f.Fatalf("claim of type %s: %d claims, %v; want 1", typ, len(c), err)
	}
	return c[0]
}

// testQuietAfterDowntime: a sweeper that starts when none swept within
// db.WatchGap (or whose database was out of reach that long) finds sked
// was down, and each switch's window starts again, once:
// a schedule with no success is quiet a whole window after the restart,
// not at once. A quicker restart keeps the windows; a quiet schedule stays
// quiet.
func testQuietAfterDowntime(t *testing.T, f *fixture) {
	watchStart := func() int {
		t.Helper()
		n, err := f.Store.JobWatchStart(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *", ExpectSuccessWithin: 2 * time.Hour, MaxAttempts: 1})
	if ids := f.quiet(); len(ids) != 0 { // sked up, watching
		t.Fatalf("quiet at once: %v", ids)
	}
	f.Clock.Advance(db.WatchGap)
	if n := watchStart(); n != 0 {
		t.Fatalf("a start %v after the last sweep started %d windows again; want none", db.WatchGap, n)
	}
	f.Clock.Set(Start.Add(5 * time.Hour)) // 17:00, down since 12:00
	if n := watchStart(); n != 1 {
		t.Fatalf("a start after five hours down started %d windows again; want 1", n)
	}
	// Another node back from the same downtime (or one whose database was
	// out of reach as long) finds the windows started: it is done once.
	f.Clock.Advance(30 * time.Second)
	if n := watchStart(); n != 0 || !db.Deref(f.get(j.ID).WatchFrom).Equal(Start.Add(5*time.Hour)) {
		t.Fatalf("a second start after the same downtime started %d windows again, the window from %v; want none, from 17:00", n, f.get(j.ID).WatchFrom)
	}
	if ids := f.quiet(); len(ids) != 0 {
		t.Fatalf("quiet the moment sked came back: %v", ids)
	}
	f.Clock.Set(Start.Add(7 * time.Hour))
	if ids := f.quiet(); len(ids) != 0 {
		t.Fatalf("quiet at the end of the window the restart began: %v", ids)
	}
	f.Clock.Set(Start.Add(7*time.Hour + time.Second))
	if ids := f.quiet(); len(ids) != 1 || ids[0] != j.ID {
		t.Fatalf("a whole window since the restart with no success: quiet %v; want %s", ids, j.ID)
	}
	f.Clock.Set(Start.Add(12 * time.Hour))
	if n := watchStart(); n != 0 || f.get(j.ID).QuietSince == nil {
		t.Fatalf("after downtime, a quiet schedule: %d windows started again, quiet since %v; want it still quiet", n, f.get(j.ID).QuietSince)
	}
}

// testQuietAfterRedefine: a change of the schedule starts the window
// again, so that the new schedule's first slot can run before the job is
// quiet: a nightly job moved from 03:00 to 13:00 just after 13:00 is not
// quiet a window after its last 03:00 run, before its first 13:00.
func testQuietAfterRedefine(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "0 3 * * *", ExpectSuccessWithin: 26 * time.Hour, MaxAttempts: 1})
	day := Start.Truncate(24 * time.Hour).Add(24 * time.Hour) // Tuesday 00:00
	f.Clock.Set(day.Add(3 * time.Hour))
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	f.Clock.Set(day.Add(13*time.Hour + 30*time.Minute))
	spec := db.SpecOf(f.get(j.ID))
	spec.Schedule = "0 13 * * *"
	if _, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	f.Clock.Set(day.Add(30 * time.Hour)) // Wednesday 06:00, 27 hours since the success
	if ids := f.quiet(); len(ids) != 0 {
		t.Fatalf("quiet before the new schedule's first slot (Wednesday 13:00): %v", ids)
	}
	f.Clock.Set(day.Add(39*time.Hour + 30*time.Minute + time.Second)) // 26 hours since the change
	if ids := f.quiet(); len(ids) != 1 || ids[0] != j.ID {
		t.Fatalf("a whole window since the change with no success: quiet %v; want %s", ids, j.ID)
	}
}

// testQuietWatchFrom: a job with a switch says when its window began
// (WatchFrom, the API's watchFrom) as created, read and returned by each
// change: its creation, then its last success, then a resume; a job
// without a switch says nothing, nor one whose switch is turned off.
func testQuietWatchFrom(t *testing.T, f *fixture) {
	want := func(j db.Job, at time.Time, how string) {
		t.Helper()
		for _, got := range []db.Job{j, f.get(j.ID)} {
			if got.WatchFrom == nil || !got.WatchFrom.Equal(at) {
				t.Fatalf("%s: window from %v; want %v", how, got.WatchFrom, at)
			}
		}
	}
	plain := f.create(db.JobCreateParams{Type: "plain", Schedule: "0 * * * *"})
	if got := f.get(plain.ID); plain.WatchFrom != nil || got.WatchFrom != nil {
		t.Fatalf("a job without a switch: window from %v, read %v; want none", plain.WatchFrom, got.WatchFrom)
	}
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *", ExpectSuccessWithin: 2 * time.Hour, MaxAttempts: 1})
	want(j, j.CreatedAt, "created")
	f.Clock.Set(Start.Add(time.Hour))
	want(f.finish(f.claimType(j.Type), db.OutcomeSucceeded, false), Start.Add(time.Hour), "after a success")
	f.Clock.Set(Start.Add(90 * time.Minute))
	if _, err := f.Store.JobPause(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	f.Clock.Set(Start.Add(2 * time.Hour))
	resumed, err := f.Store.JobResume(f.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	want(resumed, Start.Add(2*time.Hour), "resumed")
	spec := db.SpecOf(resumed)
	spec.ExpectSuccessWithin = 0
	off, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.get(j.ID); off.WatchFrom != nil || got.WatchFrom != nil {
		t.Fatalf("the switch turned off: window from %v, read %v; want none", off.WatchFrom, got.WatchFrom)
	}
}

// testQuietAfterSkip: skipping the next slot of a nightly job watched for
// 26 hours starts the window again at the slot skipped, as if it had run:
// the job is not quiet 26 hours after its last success, in the gap the
// skip left, but a whole window after the slot skipped with no success. A
// return from downtime before that slot keeps the window from it.
func testQuietAfterSkip(t *testing.T, f *fixture) {
	j, skipped, day := f.skipNightly()
	slot := day.Add(25 * time.Hour)
	if skipped.WatchFrom == nil || !skipped.WatchFrom.Equal(slot) || !skipped.Slot.Equal(day.Add(49*time.Hour)) {
		t.Fatalf("skipped: window from %v, next slot %v; want the window from the slot skipped, %v, and Thursday 01:00 next", skipped.WatchFrom, skipped.Slot, slot)
	}
	f.Clock.Set(day.Add(20 * time.Hour)) // down since 15:00
	if _, err := f.Store.JobWatchStart(f.ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.get(j.ID); !db.Deref(got.WatchFrom).Equal(slot) {
		t.Fatalf("back from downtime before the slot skipped: window from %v; want still %v", got.WatchFrom, slot)
	}
	f.Clock.Set(day.Add(27*time.Hour + time.Second)) // Wednesday 03:00, 26 hours since the success
	if ids := f.quiet(); len(ids) != 0 {
		t.Fatalf("quiet in the gap the skip left: %v", ids)
	}
	f.Clock.Set(slot.Add(26 * time.Hour)) // Thursday 03:00, no run of Thursday 01:00
	if ids := f.quiet(); len(ids) != 0 {
		t.Fatalf("quiet at the end of the window the slot skipped began: %v", ids)
	}
	f.Clock.Set(slot.Add(26*time.Hour + time.Second))
	if ids := f.quiet(); len(ids) != 1 || ids[0] != j.ID {
		t.Fatalf("a whole window since the slot skipped with no success: quiet %v; want %s", ids, j.ID)
	}
}

// testQuietSkipThenLonger: a longer window given after the next slot was
// skipped keeps its start at the slot skipped, as a return from downtime
// does: started at the change, it went off before the slot after the one
// skipped had come, in the gap the skip left.
func testQuietSkipThenLonger(t *testing.T, f *fixture) {
	j, skipped, day := f.skipNightly()
	slot := day.Add(25 * time.Hour)
	f.Clock.Set(day.Add(16 * time.Hour))
	spec := db.SpecOf(skipped)
	spec.ExpectSuccessWithin = 27 * time.Hour
	longer, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.get(j.ID); !db.Deref(longer.WatchFrom).Equal(slot) || !db.Deref(got.WatchFrom).Equal(slot) {
		t.Fatalf("a longer window after the skip: window from %v, read %v; want still the slot skipped, %v", longer.WatchFrom, got.WatchFrom, slot)
	}
	f.Clock.Set(day.Add(43*time.Hour + time.Second)) // Wednesday 19:00, 27 hours since the change
	if ids := f.quiet(); len(ids) != 0 {
		t.Fatalf("quiet in the gap the skip left: %v", ids)
	}
	f.Clock.Set(slot.Add(27*time.Hour + time.Second)) // Thursday 04:00, no run of Thursday 01:00
	if ids := f.quiet(); len(ids) != 1 || ids[0] != j.ID {
		t.Fatalf("a whole window since the slot skipped with no success: quiet %v; want %s", ids, j.ID)
	}
}

// skipNightly creates a job that runs at 01:00 watched for 26 hours, runs
// it with success on Tuesday 01:00 (day is that Tuesday's 00:00) and skips
// its next slot, Wednesday 01:00, on Tuesday at 15:00; it returns the job
// as created and as skipped.
func (f *fixture) skipNightly() (j, skipped db.Job, day time.Time) {
	f.Helper()
	day = Start.Truncate(24 * time.Hour).Add(24 * time.Hour)
	j = f.create(db.JobCreateParams{Schedule: "0 1 * * *", ExpectSuccessWithin: 26 * time.Hour, MaxAttempts: 1})
	f.Clock.Set(day.Add(time.Hour))
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	f.Clock.Set(day.Add(15 * time.Hour))
	skipped, err := f.Store.JobSkipNext(f.ctx, j.ID)
	if err != nil {
		f.Fatal(err)
	}
	return j, skipped, day
}
