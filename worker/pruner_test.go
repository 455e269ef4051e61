package worker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

// TestPruner_RunOnce fills a store with old and recent history on an
// injected clock and checks that one pass, in batches of two, deletes
// exactly the old finished one-off jobs and the old runs of recurring jobs.
func TestPruner_RunOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.Open(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Pointer[time.Time]
	setClock := func(t time.Time) { clock.Store(&t) }
	setClock(t0)
	store.NowFunc = func() time.Time { return *clock.Load() }

	create := func(p db.JobCreateParams) db.Job {
		t.Helper()
		j, _, err := store.JobCreate(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	// run claims the due job of typ and finishes it with outcome.
	run := func(typ string, outcome db.Outcome) {
		t.Helper()
		cs, err := store.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{typ}, Max: 1, Lease: time.Minute})
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim %s: %v, %d claims", typ, err, len(cs))
		}
		_, err = store.RunFinish(ctx, db.RunFinishParams{JobID: cs[0].Job.ID, Generation: cs[0].Job.LeaseGeneration, Outcome: outcome})
		if err != nil {
			t.Fatal(err)
		}
	}
	// History at t0: five done and one cancelled one-off job, one dead,
	// one paused, and three runs of a daily job.
	var oldDone []db.Job
	for range 5 {
		oldDone = append(oldDone, create(db.JobCreateParams{Type: "done"}))
		run("done", db.OutcomeSucceeded)
	}
	oldCancelled := create(db.JobCreateParams{Type: "x", RunAt: t0.Add(time.Hour)})
	if _, err := store.JobCancel(ctx, oldCancelled.ID); err != nil {
		t.Fatal(err)
	}
	dead := create(db.JobCreateParams{Type: "dead", MaxAttempts: 1})
	run("dead", db.OutcomeFailed)
	paused := create(db.JobCreateParams{Type: "x", RunAt: t0.Add(time.Hour)})
	if _, err := store.JobPause(ctx, paused.ID); err != nil {
		t.Fatal(err)
	}
	rec := create(db.JobCreateParams{Type: "rec", Schedule: "@daily"})
	for i := range 3 {
		setClock(t0.Add(time.Duration(i+1) * 24 * time.Hour))
		run("rec", db.OutcomeSucceeded)
	}

	// 40 days later: one recent job and one recent run.
	now := t0.Add(40 * 24 * time.Hour)
	setClock(now)
	recent := create(db.JobCreateParams{Type: "done"})
	run("done", db.OutcomeSucceeded)
	run("rec", db.OutcomeSucceeded) // misfired slots are recorded missed now, too

	recRuns := func() []db.Run {
		t.Helper()
		runs, _, err := store.RunList(ctx, db.RunListParams{JobID: rec.ID, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	before := recRuns()

	p := &Pruner{Store: store, Retention: 30 * 24 * time.Hour, BatchSize: 2, BatchWait: time.Millisecond, NowFunc: store.Now}
	got := p.runOnce(ctx)
	if want := (db.Pruned{Jobs: 6, Runs: 3}); got != want {
		t.Errorf("pruned %+v, want %+v", got, want)
	}
	for _, j := range append(oldDone, oldCancelled) {
		if _, err := store.JobGet(ctx, j.ID); err != db.ErrNotFound {
			t.Errorf("old job %s (%s): JobGet = %v, want ErrNotFound", j.ID, j.Type, err)
		}
	}
	for _, j := range []db.Job{dead, paused, rec, recent} {
		if _, err := store.JobGet(ctx, j.ID); err != nil {
			t.Errorf("job %s (%s) must stay: %v", j.ID, j.Type, err)
		}
	}
	after := recRuns()
	if len(after) != len(before)-3 {
		t.Errorf("recurring job has %d runs after pruning, want %d", len(after), len(before)-3)
	}
	for _, r := range after {
		if r.FinishedAt != nil && r.FinishedAt.Before(now.Add(-p.Retention)) {
			t.Errorf("run %d finished %s is older than the retention", r.ID, r.FinishedAt)
		}
	}
	if again := p.runOnce(ctx); again != (db.Pruned{}) {
		t.Errorf("second pass pruned %+v, want nothing", again)
	}
}
