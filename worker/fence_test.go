package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/worker"
)

// lateStore answers the first claim that takes a job late, by Delay after
// the store claimed it: the worker was frozen, or the answer was slow to
// come, while the lease ran.
type lateStore struct {
	*sqlite.Store
	Delay time.Duration
	late  atomic.Bool
}

func (l *lateStore) RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error) {
	claims, err := l.Store.RunClaim(ctx, p)
	if len(claims) > 0 && l.late.CompareAndSwap(false, true) {
		time.Sleep(l.Delay)
	}
	return claims, err
}

// TestPool_LateClaimHandedBack: a claim answered when less than half its
// lease is certainly left (measured from before the request was sent) is
// not started; the job is handed back without charging an attempt and runs
// on the next claim.
func TestPool_LateClaimHandedBack(t *testing.T) {
	const lease = 600 * time.Millisecond
	l := &lateStore{Store: sqlitetest.Open(t), Delay: lease/2 + 50*time.Millisecond}
	var attempts []int
	var mu sync.Mutex
	startPool(t, l.Store, worker.PoolConfig{Store: l, Lease: lease, Handlers: map[string]worker.HandlerFunc{
		"job": func(_ context.Context, j *worker.Job) error {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, j.Attempt)
			return nil
		},
	}})
	j := create(t, l.Store, db.JobCreateParams{Type: "job", MaxAttempts: 1})
	waitState(t, l.Store, j.ID, db.StateDone)
	r := runs(t, l.Store, j.ID)
	if len(r) != 2 || r[1].Outcome != db.OutcomeReleased || r[1].Generation != 1 || r[0].Outcome != db.OutcomeSucceeded || r[0].Generation != 2 {
		t.Fatalf("runs = %+v, want generation 1 released, then generation 2 succeeded", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 1 || attempts[0] != 1 {
		t.Fatalf("handler ran at attempts %v, want once at attempt 1", attempts)
	}
}

// TestPool_CommandOutlivesFirstLease: a command that runs for longer than
// its lease is not stopped by its supervisor: each renewal moves the
// supervisor's deadline.
func TestPool_CommandOutlivesFirstLease(t *testing.T) {
	s := sqlitetest.Open(t)
	startPool(t, s, worker.PoolConfig{Lease: 3 * time.Second, Handlers: map[string]worker.HandlerFunc{
		"exec": worker.Exec(worker.ExecConfig{}),
	}})
	j := create(t, s, db.JobCreateParams{Type: "exec", MaxAttempts: 1, Payload: []byte(`{"command": ["sleep", "5"]}`)})
	waitState(t, s, j.ID, db.StateDone)
	if r := runs(t, s, j.ID); len(r) != 1 || r[0].Outcome != db.OutcomeSucceeded {
		t.Fatalf("runs = %+v, want one succeeded", r)
	}
}
