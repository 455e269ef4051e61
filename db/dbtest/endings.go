package dbtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

// testRetryCrossesSlot fails every attempt of a recurring firing whose
// backoff carries a retry past the schedule's next slot. The firing must
// spend its attempts (its last run gaveUp), and every slot must be in the
// ledger once: the failed slot is a failed run, not also a slot missed for
// downtime (the server was never down).
func testRetryCrossesSlot(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "* * * * *", MaxAttempts: 3, Backoff: 40 * time.Second})
	slot := *j.Slot
	f.Clock.Set(*j.NextRunAt)
	for attempt := 1; attempt <= j.MaxAttempts; attempt++ {
		c := f.claimOne("w")
		if !c.Job.Slot.Equal(slot) || c.Job.Attempt != attempt {
			t.Errorf("claim %d ran slot %s attempt %d; want slot %s attempt %d (the failing firing's retry)",
				attempt, c.Job.Slot.Format(time.TimeOnly), c.Job.Attempt, slot.Format(time.TimeOnly), attempt)
		}
		after := f.finish(c, db.OutcomeFailed, true)
		f.Clock.Set(*after.NextRunAt)
	}
	gaveUp := false
	for _, r := range f.runs(j.ID) {
		gaveUp = gaveUp || r.GaveUp
	}
	counts := f.outcomes(j.ID)
	if !gaveUp || counts["missed:downtime"] != 0 {
		t.Fatalf("after %d failed attempts: gave up = %v, runs by outcome %v; want the firing given up and no slot missed for downtime",
			j.MaxAttempts, gaveUp, counts)
	}
}

// testCancelRunReaped asks a running one-off job to stop, and then its
// worker vanishes: the run ends by the reaper, not by the handler. The
// request to stop was accepted, so the job must not run again.
func testCancelRunReaped(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{MaxAttempts: 3})
	f.claimLease("w1", 1, 10*time.Second)
	if _, err := f.Store.JobRequestCancelRun(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(11 * time.Second)
	if n, err := f.Store.RunReapExpired(f.ctx); err != nil || n != 1 {
		t.Fatalf("reaped %d, %v; want 1", n, err)
	}
	if again := f.claim("w2", 1); len(again) != 0 || f.get(j.ID).State != db.StateCancelled {
		t.Fatalf("after cancel-run and a reaped lease: job %s, claimed again %d times; want cancelled, not run again",
			f.get(j.ID).State, len(again))
	}
}

// testFinishRepeated reports a run's end again, as a worker does when the
// answer to its first report was lost: the repeat is of the same execution,
// which ended while its lease held, so it is answered as recorded, and the
// run must not show a late outcome (an execution that ended after its lease
// had moved on). Reports sent at once, which a group commit may take
// together, are answered alike; a report of another outcome is stale.
func testFinishRepeated(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{})
	c := f.claimOne("w")
	p := db.RunFinishParams{JobID: j.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeSucceeded}
	answers := make(chan error, 3)
	for range 3 {
		go func() {
			got, err := f.Store.RunFinish(f.ctx, p)
			if err == nil && (got.ID != j.ID || got.State != db.StateDone) {
				err = fmt.Errorf("answered job %s in state %s; want %s done", got.ID, got.State, j.ID)
			}
			answers <- err
		}()
	}
	for range 3 {
		if err := <-answers; err != nil {
			t.Fatalf("a report repeated by its worker: %v; want it answered as recorded", err)
		}
	}
	r := f.runs(j.ID)[0]
	if r.Outcome != db.OutcomeSucceeded || r.LateOutcome != "" {
		t.Fatalf("repeated reports left run %d with outcome %s and late outcome %s at %v; want succeeded and no late outcome",
			r.ID, r.Outcome, r.LateOutcome, r.LateFinishedAt)
	}
	p.Outcome, p.Error = db.OutcomeFailed, "boom"
	if _, err := f.Store.RunFinish(f.ctx, p); !errors.Is(err, db.ErrStale) {
		t.Fatalf("a report of another outcome after the run ended = %v; want ErrStale", err)
	}
	if r := f.runs(j.ID)[0]; r.Outcome != db.OutcomeSucceeded || r.LateOutcome != "" {
		t.Fatalf("a conflicting report changed run %d: outcome %s, late outcome %s", r.ID, r.Outcome, r.LateOutcome)
	}

	// Repeated after the job's retry was claimed by another lease: still
	// answered as recorded, with the job as it is now.
	k := f.create(db.JobCreateParams{MaxAttempts: 2})
	first := f.claimOne("w")
	failed := f.finish(first, db.OutcomeFailed, true)
	f.Clock.Set(*failed.NextRunAt)
	second := f.claimOne("w2")
	got, err := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: k.ID, Generation: first.Job.LeaseGeneration,
		Outcome: db.OutcomeFailed, Retryable: true, Error: errorFor(db.OutcomeFailed)})
	if err != nil || got.State != db.StateRunning || got.LeaseGeneration != second.Job.LeaseGeneration {
		t.Fatalf("a report repeated after the retry was claimed: %s generation %d, %v; want it answered with the job running generation %d",
			got.State, got.LeaseGeneration, err, second.Job.LeaseGeneration)
	}
}

// testFinishRepeatedText repeats reports whose error and output are not
// text every store keeps as it is: a NUL byte, bytes that are not UTF-8, a
// tail of the output that begins inside a rune. Each repeat is still the
// report its run ended with, and is answered as recorded; and the job the
// first report answers is the job as stored.
func testFinishRepeatedText(t *testing.T, f *fixture) {
	long := "é" + strings.Repeat("x", db.OutputTailBytes-1) // its tail begins inside the é
	for _, tc := range []struct{ name, err, output string }{
		{"NUL", "exit 1\x00", "a\x00b"},
		{"not UTF-8", "bad \xff byte", "bad \xfe output"},
		{"tail inside a rune", "boom", long},
	} {
		j := f.create(db.JobCreateParams{MaxAttempts: 3})
		c := f.claimOne("w")
		p := db.RunFinishParams{JobID: j.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeFailed, Retryable: true,
			Error: tc.err, Output: tc.output}
		first, err := f.Store.RunFinish(f.ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if stored := f.get(j.ID); first.LastError != stored.LastError {
			t.Errorf("%s: the report answered the job with last error %q; the store holds %q", tc.name, first.LastError, stored.LastError)
		}
		if _, err := f.Store.RunFinish(f.ctx, p); err != nil {
			t.Errorf("%s: the report sent again: %v; want it answered as recorded", tc.name, err)
		}
		if r := f.runs(j.ID)[0]; r.Outcome != db.OutcomeFailed || r.LateOutcome != "" {
			t.Errorf("%s: run %d ended %s with late outcome %q; want failed and no late outcome", tc.name, r.ID, r.Outcome, r.LateOutcome)
		}
	}
}
