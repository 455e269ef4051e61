package dbtest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

// ZoneFunc writes zone as the stored time zone of job id behind the store's
// back: an unknown one makes its schedule unparseable, as a newer time zone
// database that dropped its zone, or a hand edit, would (the store refuses
// to write such a schedule itself); a known one makes it parse again, as
// the zone back in the time zone database would.
type ZoneFunc func(t *testing.T, s db.Store, id, zone string)

// badZone is a time zone no time zone database has.
const badZone = "Mars/Olympus"

// RunUnparseable checks that one recurring job whose stored schedule no
// longer parses stops nothing but itself. The claim that takes it, the
// reaper that takes back its lease and the sweep that ends its pause each
// set it aside (paused, with a reason that says how to mend it) and go on
// with the other jobs in the same transaction; a control of it answers a
// conflict that says the same; a change of its schedule mends it.
func RunUnparseable(t *testing.T, open OpenFunc, setZone ZoneFunc) {
	clock := NewClock(Start)
	f := &fixture{T: t, Store: open(t, clock.Now, func() float64 { return 0.5 }), Clock: clock, ctx: context.Background()}
	every := db.JobCreateParams{Type: "t", Schedule: "@every 1m"}

	// Claim: the ready job due first is set aside, the one-off behind it
	// is claimed.
	waiting := f.create(every)
	oneOff := f.create(db.JobCreateParams{Type: "t", RunAt: Start.Add(90 * time.Second)})
	// Reap: a running schedule and a one-off, their leases run out
	// together.
	running := f.create(every)
	// Resume: a schedule paused until a time.
	paused := f.create(every)
	if _, err := f.Store.JobPauseUntil(f.ctx, db.JobPauseParams{ID: paused.ID, Until: Start.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	held := f.claimLease("w", 2, 30*time.Second) // running and waiting are due; oneOff is not yet
	if len(held) != 2 {
		t.Fatalf("claimed %d jobs at 12:01; want the two due schedules", len(held))
	}
	var runningGen int64
	for _, c := range held {
		if c.Job.ID == running.ID {
			runningGen = c.Job.LeaseGeneration
		} else if _, err := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: c.Job.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	lateOneOff := f.create(db.JobCreateParams{Type: "t"})
	if late := f.claimLease("w", 1, 30*time.Second); len(late) != 1 || late[0].Job.ID != lateOneOff.ID {
		t.Fatalf("claimed %v; want the one-off due now", late)
	}
	for _, id := range []string{waiting.ID, running.ID, paused.ID} {
		setZone(t, f.Store, id, badZone)
	}

	clock.Advance(time.Minute) // 12:02: waiting is due again, oneOff is due, both leases ran out, the pause ended
	claims := f.claim("w", 10)
	if len(claims) != 1 || claims[0].Job.ID != oneOff.ID {
		ids := make([]string, len(claims))
		for i, c := range claims {
			ids[i] = c.Job.ID
		}
		t.Fatalf("claim at 12:02 took %v; want only the one-off %s, the unparseable schedule %s set aside", ids, oneOff.ID, waiting.ID)
	}
	wantSetAside(t, f.get(waiting.ID))
	if n := f.outcomes(waiting.ID)["running"]; n != 0 {
		t.Errorf("the set-aside job %s has %d running runs; the claim's run is undone", waiting.ID, n)
	}

	if n, err := f.Store.RunReapExpired(f.ctx); err != nil || n != 2 {
		t.Fatalf("reaped %d, %v; want both expired leases, the unparseable schedule's included", n, err)
	}
	wantSetAside(t, f.get(running.ID))
	if runs := f.runs(running.ID); runs[0].Generation != runningGen || runs[0].Outcome != db.OutcomeLeaseExpired {
		t.Errorf("the set-aside job's last run: generation %d, %s; want %d, lease_expired", runs[0].Generation, runs[0].Outcome, runningGen)
	}
	wantState(t, f.get(lateOneOff.ID), db.StateReady)

	if n, err := f.Store.JobResumeDue(f.ctx); err != nil || n != 0 {
		t.Fatalf("resumed %d, %v; want none: the one pause that ended is set aside, not resumed", n, err)
	}
	wantSetAside(t, f.get(paused.ID))
	if n, err := f.Store.JobResumeDue(f.ctx); err != nil || n != 0 {
		t.Errorf("a second sweep resumed %d, %v; the set-aside job has no pause end left", n, err)
	}

	_, err := f.Store.JobResume(f.ctx, waiting.ID)
	if !errors.Is(err, db.ErrConflict) || !strings.Contains(err.Error(), "no longer parses") {
		t.Errorf("resume of the set-aside job: %v; want a conflict saying its schedule no longer parses", err)
	}
	spec := db.SpecOf(f.get(waiting.ID))
	spec.Timezone = "UTC"
	if _, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: waiting.ID, Spec: spec}); err != nil {
		t.Fatalf("mend the schedule: %v", err)
	}
	if j, err := f.Store.JobResume(f.ctx, waiting.ID); err != nil || j.State != db.StateReady {
		t.Fatalf("resume after the mend: %s, %v; want ready", j.State, err)
	}
	checkClaimUndone(t, f, setZone)
	checkHandedBack(t, f, setZone)
}

// checkHandedBack sets aside a schedule whose run is handed back (at
// shutdown) after its zone went unknown: the run was no attempt, its slot
// never ran. Once the zone is known again, a resume records that slot
// slept through, as it records the later ones.
func checkHandedBack(t *testing.T, f *fixture, setZone ZoneFunc) {
	j := f.create(db.JobCreateParams{Type: "handed-back", Schedule: "@every 1m"})
	slot := *j.Slot
	f.Clock.Set(*j.NextRunAt)
	var held db.Claim
	for _, c := range f.claim("w", 10) {
		if c.Job.ID == j.ID {
			held = c
		} else {
			f.finish(c, db.OutcomeSucceeded, false)
		}
	}
	if held.Job.ID == "" {
		t.Fatalf("the schedule %s was not claimed at its due time", j.ID)
	}
	setZone(t, f.Store, j.ID, badZone)
	wantSetAside(t, f.finish(held, db.OutcomeReleased, false))
	if settled := resumeKnown(t, f, setZone, j.ID, slot); settled != 1 {
		t.Errorf("slot %s, handed back and set aside, is settled %d times (runs by outcome %v); want once, missed", slot.Format(time.TimeOnly), settled, f.outcomes(j.ID))
	}
}

// checkClaimUndone sets aside, at its claim, a ready schedule whose slot
// never ran: the claim is undone (its run and its attempt) and the pause
// is of a ready job. Once its zone is known again, a resume records that
// slot slept through, as it records the later ones: its firing never ran,
// and no retry of it was pending.
func checkClaimUndone(t *testing.T, f *fixture, setZone ZoneFunc) {
	j := f.create(db.JobCreateParams{Type: "t", Schedule: "@every 1m"})
	slot := *j.Slot
	setZone(t, f.Store, j.ID, badZone)
	f.Clock.Set(*j.NextRunAt)
	for _, c := range f.claim("w", 10) {
		if c.Job.ID == j.ID {
			t.Fatalf("claimed the unparseable schedule %s", j.ID)
		}
	}
	got := f.get(j.ID)
	wantSetAside(t, got)
	if got.Attempt != 0 {
		t.Errorf("the set-aside job is at attempt %d; want 0, its claim undone", got.Attempt)
	}
	events, _, err := f.Store.EventList(f.ctx, db.EventListParams{JobID: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	var paused db.ControlEvent
	for _, e := range events {
		if e.Kind == db.EventPaused {
			if err := json.Unmarshal(e.Detail, &paused); err != nil {
				t.Fatal(err)
			}
		}
	}
	if paused.From != db.StateReady || paused.To != db.StatePaused {
		t.Errorf("the set-aside's paused event moves the job from %q to %q; want ready to paused, the claim undone", paused.From, paused.To)
	}

	if n := resumeKnown(t, f, setZone, j.ID, slot); n != 1 {
		t.Errorf("slot %s, set aside at its claim, is in the ledger %d times (runs by outcome %v); want once, missed", slot.Format(time.TimeOnly), n, f.outcomes(j.ID))
	}
}

// wantSetAside checks that j was set aside: paused, for good, with a reason
// that says what to do.
func wantSetAside(t *testing.T, j db.Job) {
	t.Helper()
	if j.State != db.StatePaused || j.PauseUntil != nil || j.LeaseOwner != "" ||
		!strings.Contains(j.PauseReason, "no longer parses") || !strings.Contains(j.PauseReason, "resume it") {
		t.Errorf("job %s: %s until %v, lease %q, reason %q; want paused with no end and no lease, the reason saying its schedule no longer parses and to resume it once mended",
			j.ID, j.State, j.PauseUntil, j.LeaseOwner, j.PauseReason)
	}
}

// resumeKnown makes the zone of set-aside job id known again and resumes
// the job 150 s later; it returns how many of the job's runs settle slot.
func resumeKnown(t *testing.T, f *fixture, setZone ZoneFunc, id string, slot time.Time) int {
	t.Helper()
	setZone(t, f.Store, id, "UTC")
	f.Clock.Advance(150 * time.Second)
	if _, err := f.Store.JobResume(f.ctx, id); err != nil {
		t.Fatal(err)
	}
	return f.settled(id, slot)
}
