package dbtest

import (
	"encoding/json"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/sked-dev/sked/clock"
	"github.com/sked-dev/sked/db"
)

// testRunFinishGroup finishes many claimed runs at once, so that the store
// commits them in groups: each caller gets its own result, its own job
// back, and a stale call (every fourth, in the second round; none in the
// first) changes nothing of its job while its neighbours in the same
// transaction are recorded.
func testRunFinishGroup(t *testing.T, f *fixture) {
	for _, staleEvery := range []int{0, 4} {
		const n = 60
		ps := make([]db.JobCreateParams, n)
		for i := range ps {
			ps[i] = db.JobCreateParams{Type: "t"}
		}
		if _, err := f.Store.JobCreateBatch(f.ctx, ps); err != nil {
			t.Fatal(err)
		}
		claims, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Max: n, Lease: time.Minute})
		if err != nil || len(claims) != n {
			t.Fatalf("claimed %d, %v; want %d", len(claims), err, n)
		}
		stale := func(i int) bool { return staleEvery > 0 && i%staleEvery == 0 }
		errs, got := make([]error, n), make([]db.Job, n)
		var wg sync.WaitGroup
		for i, c := range claims {
			wg.Go(func() {
				gen := c.Job.LeaseGeneration
				if stale(i) {
					gen++
				}
				got[i], errs[i] = f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: c.Job.ID, Generation: gen, Outcome: db.OutcomeSucceeded})
			})
		}
		wg.Wait()
		for i, c := range claims {
			j := f.get(c.Job.ID)
			switch {
			case stale(i) && !errors.Is(errs[i], db.ErrStale):
				t.Errorf("job %d: finish with a stale generation: got %v, want ErrStale", i, errs[i])
			case stale(i) && j.State != db.StateRunning:
				t.Errorf("job %d: a stale finish moved the job to %s", i, j.State)
			case !stale(i) && errs[i] != nil:
				t.Errorf("job %d: finish: %v", i, errs[i])
			case !stale(i) && j.State != db.StateDone:
				t.Errorf("job %d: state %s after its finish, want done", i, j.State)
			case !stale(i) && (got[i].ID != c.Job.ID || got[i].State != db.StateDone):
				t.Errorf("job %d: finish returned job %s in state %s, want its own, done", i, got[i].ID, got[i].State)
			}
		}
	}
}

// testLateOutcome checks that a completion refused as stale is still
// recorded on its own run: the execution happened, whether the reaper got
// there first or not yet.
func testLateOutcome(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{MaxAttempts: 3})
	first := f.claimLease("w1", 1, 10*time.Second)[0]
	f.Clock.Advance(11 * time.Second)
	// The lease ran out but nobody reaped it yet: still refused.
	if _, err := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: j.ID, Generation: first.Job.LeaseGeneration,
		Outcome: db.OutcomeSucceeded, Output: "done once"}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("finish after the lease ran out: %v, want ErrStale", err)
	}
	if n, err := f.Store.RunReapExpired(f.ctx); err != nil || n != 1 {
		t.Fatalf("reaped %d, %v", n, err)
	}
	second := f.claimOne("w2")
	// A second late report of the first run changes nothing more.
	if _, err := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: j.ID, Generation: first.Job.LeaseGeneration,
		Outcome: db.OutcomeFailed, Error: "again"}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("second late finish: %v, want ErrStale", err)
	}
	f.finish(second, db.OutcomeSucceeded, false)
	runs := f.runs(j.ID) // newest first
	if len(runs) != 2 {
		t.Fatalf("runs = %+v, want 2", runs)
	}
	late, live := runs[1], runs[0]
	if late.Outcome != db.OutcomeLeaseExpired || late.LateOutcome != db.OutcomeSucceeded || late.LateFinishedAt == nil {
		t.Errorf("first run = outcome %s, late outcome %q at %v; want lease_expired, late succeeded", late.Outcome, late.LateOutcome, late.LateFinishedAt)
	}
	wantTime(t, "late finished at", late.LateFinishedAt, Start.Add(11*time.Second))
	if live.Outcome != db.OutcomeSucceeded || live.LateOutcome != "" {
		t.Errorf("second run = outcome %s, late %q; want succeeded and no late outcome", live.Outcome, live.LateOutcome)
	}
}

// testReleasedBeforeDue checks that a run handed back before it was due
// (claimed ahead) does not end before it started.
func testReleasedBeforeDue(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{RunAt: Start.Add(200 * time.Millisecond)})
	c, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Max: 1, Ahead: time.Second})
	if err != nil || len(c) != 1 {
		t.Fatalf("claim ahead: %d, %v", len(c), err)
	}
	f.Clock.Advance(50 * time.Millisecond)
	f.finish(c[0], db.OutcomeReleased, false)
	r := f.runs(j.ID)[0]
	if r.StartedAt == nil || r.FinishedAt == nil || r.FinishedAt.Before(*r.StartedAt) {
		t.Fatalf("released run started %v, finished %v: it ends before it starts", r.StartedAt, r.FinishedAt)
	}
	wantTime(t, "finished at", r.FinishedAt, Start.Add(50*time.Millisecond))
}

// testPauseUntilAsOf checks that a pause with an end resumes as of that end,
// however late the sweep runs: the slots at or after it run.
func testPauseUntilAsOf(t *testing.T, f *fixture) {
	for _, tc := range []struct {
		name        string
		until       time.Duration // after Start
		sweep       time.Duration // after Start
		slot        time.Duration // the slot it resumes at
		missedSlots int
	}{
		{"BetweenSlots", 36 * time.Second, 40*time.Second + 290*time.Millisecond, 40 * time.Second, 3},
		{"OnASlot", 40 * time.Second, 40*time.Second + 290*time.Millisecond, 40 * time.Second, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.Clock.Set(Start)
			j := f.create(db.JobCreateParams{Schedule: "*/10 * * * * *"})
			if _, err := f.Store.JobPauseUntil(f.ctx, db.JobPauseParams{ID: j.ID, Until: Start.Add(tc.until)}); err != nil {
				t.Fatal(err)
			}
			f.Clock.Set(Start.Add(tc.sweep))
			if n, err := f.Store.JobResumeDue(f.ctx); err != nil || n != 1 {
				t.Fatalf("resumed %d, %v", n, err)
			}
			got := f.get(j.ID)
			wantTime(t, "slot after the pause", got.Slot, Start.Add(tc.slot))
			wantCounts(t, f.outcomes(j.ID), map[string]int{"missed:paused": tc.missedSlots})
			if _, err := f.Store.JobCancel(f.ctx, j.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// testRunFinishAfterClose checks that a completion sent to a closed store
// fails instead of waiting for a committer that has stopped, and that
// closing twice is harmless.
func testRunFinishAfterClose(t *testing.T, f *fixture) {
	if err := f.Store.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var err error
		for range 50 {
			if _, e := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: "x", Generation: 1, Outcome: db.OutcomeSucceeded}); e == nil {
				err = errors.New("RunFinish on a closed store succeeded")
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunFinish on a closed store is still waiting after 30s")
	}
	if err := f.Store.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// testMissedSpan checks that an event that passes over more slots than get
// a row each still accounts for every one: the rest are one span row.
func testMissedSpan(t *testing.T, f *fixture) {
	f.create(db.JobCreateParams{Schedule: "@every 1s"})
	f.Clock.Set(Start.Add(4 * time.Hour))
	c := f.claimLease("w", 1, time.Hour)
	if len(c) != 1 {
		t.Fatalf("claimed %d after four hours down, want 1", len(c))
	}
	wantTime(t, "catch-up slot", c[0].Job.Slot, Start.Add(4*time.Hour))
	after := f.finish(c[0], db.OutcomeSucceeded, false)
	const missed = 4*3600 - 1 // every second from Start+1s, but the one that ran
	if after.MissedSlots != missed {
		t.Fatalf("missedSlots = %d, want %d", after.MissedSlots, missed)
	}
	f.wantMissed(after, map[string]int{db.MissedDowntime: 10000},
		db.Run{Slot: new(Start.Add(10001 * time.Second)), LastSlot: new(Start.Add(4*time.Hour - time.Second)), SlotCount: missed - 10000, Reason: db.MissedDowntime})
}

// testMissedSpanStepped: a forward clock step over more slots than get a
// row each records the rest as one span too, with the reason of the slots
// it continues, clock_step: whether the step jumped over every slot missed
// or came after downtime that missed the first of them.
func testMissedSpanStepped(t *testing.T, f *fixture) {
	s, ok := f.Store.(interface{ UseClock(*clock.Guard) })
	if !ok {
		t.Skip("the store takes no clock guard")
	}
	// The guard's elapsed time is a second clock: moved with the wall
	// clock, time passes; the wall clock moved alone, it steps.
	elapsed := NewClock(Start)
	s.UseClock(clock.NewGuard(f.Clock.Now, elapsed.Now, nil))
	down := f.create(db.JobCreateParams{Schedule: "@every 1s"})
	f.Clock.Advance(time.Hour)
	elapsed.Advance(time.Hour)
	jumped := f.create(db.JobCreateParams{Schedule: "@every 1s"})
	f.Clock.Advance(3 * time.Hour) // a step, from Start+1h to Start+4h
	if c := f.claimLease("w", 2, time.Hour); len(c) != 2 {
		t.Fatalf("claimed %d after the step, want 2", len(c))
	}
	last := Start.Add(4*time.Hour - time.Second) // the slot before the one that runs
	f.wantMissed(f.get(jumped.ID), map[string]int{db.MissedClockStep: 10000},
		db.Run{Slot: new(Start.Add(time.Hour + 10001*time.Second)), LastSlot: new(last), SlotCount: 3*3600 - 1 - 10000, Reason: db.MissedClockStep})
	f.wantMissed(f.get(down.ID), map[string]int{db.MissedDowntime: 3600, db.MissedClockStep: 6400},
		db.Run{Slot: new(Start.Add(10001 * time.Second)), LastSlot: new(last), SlotCount: 4*3600 - 1 - 10000, Reason: db.MissedClockStep})
}

// wantMissed checks j's missed runs: rows says how many slots of each
// reason have a row of their own, and one span row follows, like span in
// its slots, count and reason; together they account for all of j's
// missedSlots.
func (f *fixture) wantMissed(j db.Job, rows map[string]int, span db.Run) {
	f.Helper()
	got := map[string]int{}
	var spans []db.Run
	for _, r := range f.runs(j.ID) {
		switch {
		case r.Outcome != db.OutcomeMissed:
		case r.SlotCount > 0:
			spans = append(spans, r)
		default:
			got[r.Reason]++
		}
	}
	if !maps.Equal(got, rows) || len(spans) != 1 {
		f.Fatalf("job %s: missed rows by reason %v and %d spans; want %v and one span", j.ID, got, len(spans), rows)
	}
	r := spans[0]
	wantTime(f.T, "span's first slot", r.Slot, *span.Slot)
	wantTime(f.T, "span's last slot", r.LastSlot, *span.LastSlot)
	if r.SlotCount != span.SlotCount || r.Reason != span.Reason {
		f.Errorf("job %s: span of %d slots, reason %q; want %d, %q", j.ID, r.SlotCount, r.Reason, span.SlotCount, span.Reason)
	}
	var listed int64
	for _, n := range got {
		listed += int64(n)
	}
	if listed+r.SlotCount != j.MissedSlots {
		f.Errorf("job %s: missed runs account for %d slots, missedSlots = %d", j.ID, listed+r.SlotCount, j.MissedSlots)
	}
}

// testGaveUpStart: the gave_up event of a one-off job without a ping URL
// tells when its run started, whether its worker reported the failure or
// the reaper took the lease back.
func testGaveUpStart(t *testing.T, f *fixture) {
	reported := f.create(db.JobCreateParams{MaxAttempts: 1})
	c := f.claimLease("w", 1, time.Hour)[0]
	f.Clock.Advance(5 * time.Minute)
	wantState(t, f.finish(c, db.OutcomeFailed, true), db.StateDead)

	reaped := f.create(db.JobCreateParams{MaxAttempts: 1})
	f.claimLease("w", 1, time.Minute)
	f.Clock.Advance(5 * time.Minute)
	if n, err := f.Store.RunReapExpired(f.ctx); err != nil || n != 1 {
		t.Fatalf("RunReapExpired = %d, %v; want 1", n, err)
	}
	wantState(t, f.get(reaped.ID), db.StateDead)

	for _, want := range []struct {
		job   string
		start time.Time
	}{{reported.ID, Start}, {reaped.ID, Start.Add(5 * time.Minute)}} {
		events, _, err := f.Store.EventList(f.ctx, db.EventListParams{JobID: want.job})
		if err != nil || len(events) != 1 || events[0].Kind != db.EventGaveUp {
			t.Fatalf("events of %s = %+v, %v; want one gave_up", want.job, events, err)
		}
		var run db.RunEvent
		if err := json.Unmarshal(events[0].Detail, &run); err != nil {
			t.Fatalf("gave_up detail %s: %v", events[0].Detail, err)
		}
		wantTime(t, "gave_up startedAt of "+want.job, run.StartedAt, want.start)
	}
}

// testReleasedKeepsPlace hands back, at shutdown, a job that was due before
// another fell due: like a reaped one, it is due again at once in its old
// place, and claims take it first.
func testReleasedKeepsPlace(t *testing.T, f *fixture) {
	held := f.create(db.JobCreateParams{})
	c := f.claimOne("w1")
	f.Clock.Advance(10 * time.Second)
	later := f.create(db.JobCreateParams{})
	f.Clock.Advance(5 * time.Second)
	released := f.finish(c, db.OutcomeReleased, false)
	wantTime(t, "next run of the released job", released.NextRunAt, *held.NextRunAt)
	if next := f.claimOne("w2"); next.Job.ID != held.ID {
		t.Fatalf("claimed %s first (due %v); want the released job %s, due %v", next.Job.ID, later.NextRunAt, held.ID, held.NextRunAt)
	}
}
