package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestStore_ReapersOnTwoNodes reaps expired leases from two nodes at once,
// two reapers each, while the vanished workers' late reports reach one node
// and the other claims the reaped jobs again: every lease is reaped once
// (one lease_expired run, one attempt charged), a late report changes no
// job and is kept on its run as its late outcome, and each job is claimed
// again under one new generation.
func TestStore_ReapersOnTwoNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	clock := dbtest.NewClock(dbtest.Start)
	a, b := postgrestest.OpenURL(t, url), postgrestest.OpenURL(t, url)
	a.NowFunc, b.NowFunc = clock.Now, clock.Now
	const n = 300
	ps := make([]db.JobCreateParams, n)
	for i := range ps {
		ps[i] = db.JobCreateParams{Type: "t", MaxAttempts: 3}
	}
	if _, err := a.JobCreateBatch(ctx, ps); err != nil {
		t.Fatal(err)
	}
	claims, err := a.RunClaim(ctx, db.RunClaimParams{WorkerID: "gone", Max: n, Lease: 10 * time.Second})
	if err != nil || len(claims) != n {
		t.Fatalf("claimed %d, %v; want %d", len(claims), err, n)
	}
	clock.Advance(11 * time.Second)

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		reaped  int
		again   = map[string]int64{} // job id: generation claimed again
		errs    []error
		reapers = []interface {
			RunReapExpired(context.Context) (int, error)
		}{a, b, a, b}
	)
	for _, r := range reapers {
		wg.Go(func() {
			for {
				k, err := r.RunReapExpired(ctx)
				mu.Lock()
				reaped += k
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if err != nil || k == 0 {
					return
				}
			}
		})
	}
	for _, c := range claims[:n/3] {
		wg.Go(func() {
			_, err := b.RunFinish(ctx, db.RunFinishParams{JobID: c.Job.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeSucceeded})
			if !errors.Is(err, db.ErrStale) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			got, err := a.RunClaim(ctx, db.RunClaimParams{WorkerID: "next", Max: 50, Lease: time.Minute})
			mu.Lock()
			for _, c := range got {
				again[c.Job.ID] = c.Job.LeaseGeneration
			}
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
		}
	})
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	if reaped != n {
		t.Errorf("reaped %d leases in all; want each of the %d once", reaped, n)
	}
	for i, c := range claims {
		late := db.Outcome("")
		if i < n/3 {
			late = db.OutcomeSucceeded
		}
		runs, _, err := a.RunList(ctx, db.RunListParams{JobID: c.Job.ID})
		if err != nil {
			t.Fatal(err)
		}
		var expired, running int
		for _, r := range runs {
			switch {
			case r.Outcome == db.OutcomeLeaseExpired && r.Generation == c.Job.LeaseGeneration && r.LateOutcome == late:
				expired++
			case r.Outcome == db.OutcomeRunning && r.Generation == again[c.Job.ID]:
				running++
			}
		}
		want := 0
		if _, ok := again[c.Job.ID]; ok {
			want = 1
		}
		if expired != 1 || running != want || len(runs) != 1+want {
			t.Fatalf("job %s: runs %+v; want its lease reaped once, late outcome %q, and %d run claimed again", c.Job.ID, runs, late, want)
		}
		if j, _ := a.JobGet(ctx, c.Job.ID); j.Attempt != 1+want {
			t.Fatalf("job %s: attempt %d; want the reaped attempt charged once", j.ID, j.Attempt)
		}
	}
}
