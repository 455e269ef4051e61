package sqlite_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

// TestStore_RunFinishGroup finishes many claimed runs at once, some with a
// stale generation, so that the committer groups them: each caller gets its
// own result, and a stale call changes nothing of its job while its
// neighbours in the same transaction are recorded.
func TestStore_RunFinishGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := sqlitetest.Open(t)
	const n = 60
	ps := make([]db.JobCreateParams, n)
	for i := range ps {
		ps[i] = db.JobCreateParams{Type: "t"}
	}
	if _, err := s.JobCreateBatch(ctx, ps); err != nil {
		t.Fatal(err)
	}
	claims, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Max: n, Lease: time.Minute})
	if err != nil || len(claims) != n {
		t.Fatalf("claimed %d, %v; want %d", len(claims), err, n)
	}
	stale := func(i int) bool { return i%4 == 0 }
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, c := range claims {
		wg.Go(func() {
			gen := c.Job.LeaseGeneration
			if stale(i) {
				gen++
			}
			_, errs[i] = s.RunFinish(ctx, db.RunFinishParams{JobID: c.Job.ID, Generation: gen, Outcome: db.OutcomeSucceeded})
		})
	}
	wg.Wait()
	for i, c := range claims {
		j, err := s.JobGet(ctx, c.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case stale(i) && !errors.Is(errs[i], db.ErrStale):
			t.Errorf("job %d: finish with a stale generation: got %v, want ErrStale", i, errs[i])
		case stale(i) && j.State != db.StateRunning:
			t.Errorf("job %d: a stale finish moved the job to %s", i, j.State)
		case !stale(i) && errs[i] != nil:
			t.Errorf("job %d: finish: %v", i, errs[i])
		case !stale(i) && j.State != db.StateDone:
			t.Errorf("job %d: state %s after its finish, want done", i, j.State)
		}
	}
}

// TestStore_RunFinishAfterClose checks that a completion sent to a closed
// store fails instead of waiting for a committer that has stopped.
func TestStore_RunFinishAfterClose(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// sqlitetest closes the store again at cleanup; that must not panic.
	done := make(chan error, 1)
	go func() {
		var err error
		for range 50 {
			if _, e := s.RunFinish(context.Background(), db.RunFinishParams{JobID: "x", Generation: 1, Outcome: db.OutcomeSucceeded}); e == nil {
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
}
