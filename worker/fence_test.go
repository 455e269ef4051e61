package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/clock"
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

// finish is a completion a pool sent and the store's answer.
type finish struct {
	p   db.RunFinishParams
	err error
}

// finishLog passes on the completions a pool sends, with the store's
// answers.
type finishLog struct {
	*sqlite.Store
	sent chan finish
}

func (f *finishLog) RunFinish(ctx context.Context, p db.RunFinishParams) (db.Job, error) {
	j, err := f.Store.RunFinish(ctx, p)
	f.sent <- finish{p, err}
	return j, err
}

// TestPool_LostLeaseStillReported: the lease of a running job expires and
// another worker claims the job; the pool's heartbeat finds the lease lost
// and stops the handler, and the pool still sends the run's completion,
// which the store refuses as stale.
func TestPool_LostLeaseStillReported(t *testing.T) {
	const lease = 6 * time.Second // the first renewal comes after the takeover
	v := clock.NewVirtual(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	f := &finishLog{Store: sqlitetest.Open(t), sent: make(chan finish, 10)}
	f.UseClock(clock.NewGuard(v.Now, v.Elapsed, nil))
	started := make(chan struct{})
	startPool(t, f.Store, worker.PoolConfig{Store: f, Lease: lease, Handlers: map[string]worker.HandlerFunc{
		"job": func(ctx context.Context, j *worker.Job) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		},
	}})
	j := create(t, f.Store, db.JobCreateParams{Type: "job", MaxAttempts: 5})
	<-started
	v.Advance(time.Hour)
	ctx := context.Background()
	if n, err := f.RunReapExpired(ctx); n != 1 || err != nil {
		t.Fatalf("reap = %d, %v", n, err)
	}
	if c, err := f.Store.RunClaim(ctx, db.RunClaimParams{WorkerID: "other", Types: []string{"job"}, Max: 1, Lease: time.Hour}); len(c) != 1 || err != nil {
		t.Fatalf("the other worker's claim = %v, %v", c, err)
	}
	if got := <-f.sent; got.p.JobID != j.ID || got.p.Generation != 1 || got.p.Outcome != db.OutcomeFailed || !errors.Is(got.err, db.ErrStale) {
		t.Fatalf("completion %+v answered %v; want generation 1, failed, refused as stale", got.p, got.err)
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

// downStore is a store whose heartbeats fail: it is out of reach.
type downStore struct{ *sqlite.Store }

func (d downStore) RunHeartbeat(context.Context, db.RunHeartbeatParams) (db.Heartbeat, error) {
	return db.Heartbeat{}, errIO
}

// TestPool_FailedRenewalsCancelInTime: when renewals fail, a Go handler's
// context is cancelled while the lease still holds in the store, so that
// it can stop before another worker may take the job.
func TestPool_FailedRenewalsCancelInTime(t *testing.T) {
	s := sqlitetest.Open(t)
	held := make(chan error, 1)
	startPool(t, s, worker.PoolConfig{Store: downStore{s}, Lease: 3 * time.Second, Handlers: map[string]worker.HandlerFunc{
		"job": func(ctx context.Context, j *worker.Job) error {
			<-ctx.Done()
			got, err := s.JobGet(context.Background(), j.ID)
			if err == nil && (got.State != db.StateRunning || got.LeaseGeneration != j.Generation || !got.LeaseUntil.After(s.Now())) {
				err = fmt.Errorf("cancelled (%v) when the job was %s, generation %d, lease until %s, now %s",
					context.Cause(ctx), got.State, got.LeaseGeneration, got.LeaseUntil, s.Now())
			}
			held <- err
			return ctx.Err()
		},
	}})
	create(t, s, db.JobCreateParams{Type: "job", MaxAttempts: 1})
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}
