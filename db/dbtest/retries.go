package dbtest

import (
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

// failFirstAttempt creates a schedule firing every minute with three
// attempts and backoff, and fails its first firing's first attempt.
func failFirstAttempt(f *fixture, schedule string, backoff time.Duration) (db.Job, time.Time) {
	f.Helper()
	j := f.create(db.JobCreateParams{Schedule: schedule, MaxAttempts: 3, Backoff: backoff})
	f.Clock.Set(*j.NextRunAt)
	f.finish(f.claimOne("w"), db.OutcomeFailed, true)
	return j, *j.Slot
}

// testTriggerDuringRetry triggers an extra run while a failed firing's retry
// is pending: the retry is still a retry of its slot, attempt 2, that waits
// its backoff again after the extra run (not at once: the trigger took the
// time it was due at), and the slot is in the ledger once (as runs, not
// also as missed).
func testTriggerDuringRetry(t *testing.T, f *fixture) {
	j, slot := failFirstAttempt(f, "* * * * *", 5*time.Minute)
	f.Clock.Advance(70 * time.Second)
	if _, err := f.Store.JobTrigger(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	after := f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	if !after.NextRunAt.After(f.Clock.Now()) {
		t.Fatalf("after the extra run the retry is due at %v, at once (now %v); want after its backoff", after.NextRunAt, f.Clock.Now())
	}
	if c := f.claim("w", 1); len(c) != 0 {
		t.Fatalf("the retry was claimed right after the extra run")
	}
	f.Clock.Set(*after.NextRunAt)
	c := f.claimOne("w")
	if c.Job.Attempt != 2 || !c.Job.Slot.Equal(slot) {
		t.Errorf("the retry after a triggered run: slot %v attempt %d; want slot %v attempt 2", c.Job.Slot, c.Job.Attempt, slot)
	}
	if n := f.outcomes(j.ID)["missed:downtime"]; n != 0 {
		t.Errorf("runs by outcome %v: the failing slot is in the ledger twice", f.outcomes(j.ID))
	}
}

// testRedefineDuringRetry changes the schedule of a firing whose retry is
// pending: the new schedule's slot is a firing of its own, attempt 1.
func testRedefineDuringRetry(t *testing.T, f *fixture) {
	j, _ := failFirstAttempt(f, "* * * * *", 10*time.Minute)
	spec := db.SpecOf(f.get(j.ID))
	spec.Schedule = "*/2 * * * *"
	got, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	f.Clock.Set(*got.NextRunAt)
	if c := f.claimOne("w"); c.Job.Attempt != 1 {
		t.Errorf("first run of the redefined schedule's slot %v is attempt %d, want 1", c.Job.Slot, c.Job.Attempt)
	}
}

// testPauseDuringRetry pauses and resumes a schedule whose failed firing's
// retry is pending: the retry is dropped with its firing, and its slot is
// not also recorded missed.
func testPauseDuringRetry(t *testing.T, f *fixture) {
	j, slot := failFirstAttempt(f, "0 * * * *", time.Minute)
	if _, err := f.Store.JobPause(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(time.Second)
	got, err := f.Store.JobResume(f.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.outcomes(j.ID)["missed:paused"]; n != 0 || !got.Slot.After(slot) || got.Attempt != 0 {
		t.Errorf("resumed at slot %v attempt %d, runs by outcome %v; want the next slot, attempt 0, and the failed slot in the ledger once",
			got.Slot, got.Attempt, f.outcomes(j.ID))
	}
}

// testSkipDuringRetry skips the next firing of a schedule whose failed
// firing's retry is pending: the retry is what is skipped, and its slot is
// not also recorded missed.
func testSkipDuringRetry(t *testing.T, f *fixture) {
	j, slot := failFirstAttempt(f, "0 * * * *", time.Minute)
	got, err := f.Store.JobSkipNext(f.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.outcomes(j.ID)["missed:skipped"]; n != 0 || !got.Slot.Equal(slot.Add(time.Hour)) || got.Attempt != 0 {
		t.Errorf("after the skip: slot %v attempt %d, runs by outcome %v; want %v, attempt 0, and the failed slot in the ledger once",
			got.Slot, got.Attempt, f.outcomes(j.ID), slot.Add(time.Hour))
	}
}

// testTriggeredSlot claims a triggered run in a transaction whose clock was
// read before the trigger committed: the handler and the ledger agree on
// the run's slot.
func testTriggeredSlot(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *"})
	f.Clock.Advance(time.Minute)
	if _, err := f.Store.JobTrigger(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	f.Clock.Set(f.Clock.Now().Add(-5 * time.Millisecond))
	cs, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Max: 1, Ahead: 10 * time.Millisecond})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %d, %v", len(cs), err)
	}
	if r := f.runs(j.ID)[0]; !cs[0].Job.Slot.Equal(*r.Slot) {
		t.Errorf("the handler is given slot %v; the ledger's run %d has slot %v", cs[0].Job.Slot, r.ID, r.Slot)
	}
}

// testRescheduleAccountsPassedSlots changes the schedule of a job whose old
// schedule's slots have passed without running: slept through while it was
// paused, due and not yet claimed, or passed while a failed firing's retry
// waited. The change moves the job to the new schedule's next slot; the
// passed slots must still be in the ledger, missed, and counted, not
// dropped in silence. A slot not yet due simply moves.
func testRescheduleAccountsPassedSlots(t *testing.T, f *fixture) {
	reschedule := func(id, schedule string) db.Job {
		t.Helper()
		spec := db.SpecOf(f.get(id))
		spec.Schedule = schedule
		got, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: id, Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	check := func(what string, j db.Job, reason string, want int) {
		t.Helper()
		counts := f.outcomes(j.ID)
		if counts["missed:"+reason] != want || j.MissedSlots != int64(want) || f.get(j.ID).MissedSlots != int64(want) {
			t.Errorf("%s: runs by outcome %v, missed slots %d (stored %d); want %d missed (%s) and counted",
				what, counts, j.MissedSlots, f.get(j.ID).MissedSlots, want, reason)
		}
	}

	// Paused at 12:00 waiting for 13:00; changed at 15:30; resumed at 15:45:
	// 13:00, 14:00 and 15:00 were slept through.
	paused := f.create(db.JobCreateParams{Schedule: "0 * * * *"})
	if _, err := f.Store.JobPause(f.ctx, paused.ID); err != nil {
		t.Fatal(err)
	}
	f.Clock.Set(Start.Add(3*time.Hour + 30*time.Minute))
	reschedule(paused.ID, "30 * * * *")
	f.Clock.Advance(15 * time.Minute)
	resumed, err := f.Store.JobResume(f.ctx, paused.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("a paused job changed, then resumed", resumed, db.MissedPaused, 3)

	// Due at 16:00 and not yet claimed when it is changed at 16:00:30.
	due := f.create(db.JobCreateParams{Schedule: "0 * * * *"})
	f.Clock.Set(*due.NextRunAt)
	f.Clock.Advance(30 * time.Second)
	check("a due job changed", reschedule(due.ID, "30 * * * *"), db.MissedSkipped, 1)

	// Not yet due: the pending slot moves, nothing is missed.
	waiting := f.create(db.JobCreateParams{Schedule: "0 * * * *"})
	check("a waiting job changed", reschedule(waiting.ID, "30 * * * *"), db.MissedSkipped, 0)

	// The firing of one slot failed; while its retry waits, three more
	// slots pass. The failed slot is in the ledger as its run; the three
	// are missed.
	retrying, _ := failFirstAttempt(f, "* * * * *", 10*time.Minute)
	f.Clock.Advance(3*time.Minute + 30*time.Second)
	check("a job changed while a retry waits", reschedule(retrying.ID, "*/5 * * * *"), db.MissedSkipped, 3)
}

// testRescheduleAfterSkip skips a slot ahead of now and then changes the
// schedule: the skip, of the old schedule, is taken back, so that no slot
// of the new one is both skipped and run.
func testRescheduleAfterSkip(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "*/2 * * * *"}) // at 12:00, pending 12:02
	if _, err := f.Store.JobSkipNext(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(30 * time.Second)
	spec := db.SpecOf(f.get(j.ID))
	spec.Schedule = "* * * * *"
	got, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		f.Clock.Set(*got.NextRunAt)
		got = f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	}
	seen := map[time.Time]db.Outcome{}
	for _, r := range f.runs(j.ID) {
		if o, ok := seen[*r.Slot]; ok {
			t.Fatalf("slot %s is in the ledger twice: %s and %s", r.Slot.Format(time.TimeOnly), o, r.Outcome)
		}
		seen[*r.Slot] = r.Outcome
	}
	if len(seen) != 2 {
		t.Fatalf("ledger %v; want two runs on the new schedule (the skip of 12:02, ahead, taken back by the change)", seen)
	}
}

// testRescheduleKeepsOffset changes the schedule of a job with jitter: its
// new pending slot is due at the job's own offset inside the jitter, as
// every later slot is, not at another one.
func testRescheduleKeepsOffset(t *testing.T, f *fixture) {
	for i := range 8 { // offsets from the ids of eight jobs: not all can agree by chance
		j := f.create(db.JobCreateParams{Schedule: "0 * * * *", Jitter: 50 * time.Minute})
		offset := j.NextRunAt.Sub(*j.Slot)
		spec := db.SpecOf(j)
		spec.Schedule = "0 */2 * * *"
		got, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		if d := got.NextRunAt.Sub(*got.Slot); d != offset {
			t.Fatalf("job %d: due %s after its slot once rescheduled, %s before; want its own offset kept", i, d, offset)
		}
	}
}

// testRescheduleKeepsPassedSlot changes only the jitter of a schedule whose
// pending slot has passed but is not yet due (its offset inside the old
// jitter has not come): the slot is the new schedule's too, and nothing
// ran or missed it, so it stays the pending slot; moved past it, the slot
// would be in the ledger nowhere.
func testRescheduleKeepsPassedSlot(t *testing.T, f *fixture) {
	var j db.Job
	for i := 0; ; i++ { // an id whose offset inside the jitter is over ten minutes
		j = f.create(db.JobCreateParams{Schedule: "0 * * * *", Jitter: 50 * time.Minute})
		if j.NextRunAt.Sub(*j.Slot) > 10*time.Minute {
			break
		}
		if _, err := f.Store.JobCancel(f.ctx, j.ID); err != nil || i > 50 {
			t.Fatalf("cancel %s: %v (try %d)", j.ID, err, i)
		}
	}
	slot := *j.Slot                        // 13:00
	f.Clock.Set(slot.Add(5 * time.Minute)) // passed, not yet due
	spec := db.SpecOf(j)
	spec.Jitter = 0
	got, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if got.Slot == nil || !got.Slot.Equal(slot) {
		t.Errorf("without its jitter, the job's pending slot is %v; want %v, passed and never run", got.Slot, slot)
	}
	f.Clock.Set(slot.Add(time.Hour)) // 14:00: run what is due
	for _, c := range f.claim("w", 10) {
		f.finish(c, db.OutcomeSucceeded, false)
	}
	if n := f.settled(j.ID, slot); n != 1 {
		t.Errorf("slot %s is in the ledger %d times (runs by outcome %v); want once", slot.Format(time.TimeOnly), n, f.outcomes(j.ID))
	}
}
