package worker_test

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/worker"
)

// errIO stands for a failed write or fsync of the database file.
var errIO = errors.New("disk I/O error (injected)")

// faultyStore is the real store behind injected faults on the worker's
// writes: the first FailFinishes completions fail before reaching it (with
// FinishErr, else errIO), and
// every heartbeat is delayed by BeatDelay (a slow fsync) before it does.
// BeatFunc, when set, then sees the n-th renewal (from 1) and may answer an
// error in the store's place (an unreachable store).
type faultyStore struct {
	*sqlite.Store
	FailFinishes int32
	FinishErr    error
	BeatDelay    time.Duration
	BeatFunc     func(ctx context.Context, n int32) error

	finishCalls atomic.Int32
	sentBeats   atomic.Int32 // heartbeats the pool sent
	beats       atomic.Int32 // heartbeats the store accepted
	staleBeats  atomic.Int32
}

func (f *faultyStore) RunFinish(ctx context.Context, p db.RunFinishParams) (db.Job, error) {
	if f.finishCalls.Add(1) <= f.FailFinishes {
		return db.Job{}, cmp.Or(f.FinishErr, errIO)
	}
	return f.Store.RunFinish(ctx, p)
}

func (f *faultyStore) RunHeartbeat(ctx context.Context, p db.RunHeartbeatParams) (db.Heartbeat, error) {
	n := f.sentBeats.Add(1)
	t := time.NewTimer(f.BeatDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return db.Heartbeat{}, ctx.Err()
	case <-t.C:
	}
	if f.BeatFunc != nil {
		if err := f.BeatFunc(ctx, n); err != nil {
			return db.Heartbeat{}, err
		}
	}
	hb, err := f.Store.RunHeartbeat(ctx, p)
	switch {
	case errors.Is(err, db.ErrStale):
		f.staleBeats.Add(1)
	case err == nil:
		f.beats.Add(1)
	}
	return hb, err
}

// startFaultyPool runs a pool on f until the test ends.
func startFaultyPool(t *testing.T, f *faultyStore, cfg worker.PoolConfig) {
	t.Helper()
	cfg.Store = f
	cfg.NextDueFunc = f.JobNextDue
	cfg.NowFunc = f.Now
	cfg.MaxIdle = 50 * time.Millisecond
	p := worker.NewPool(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// oneRun checks that job id ran once, at attempt 1, and succeeded.
func oneRun(t *testing.T, s db.Store, id string) {
	t.Helper()
	j := waitState(t, s, id, db.StateDone)
	rs := runs(t, s, id)
	if len(rs) != 1 || rs[0].Outcome != db.OutcomeSucceeded || j.Attempt != 1 {
		t.Fatalf("job attempt %d, runs %+v; want one succeeded run at attempt 1", j.Attempt, rs)
	}
}

// A completion that fails (I/O error) is not reported as recorded and is
// not dropped: the pool retries it until the store takes it, within the
// lease, and the job runs once.
func TestPool_FinishRetriedAfterIOError(t *testing.T) {
	f := &faultyStore{Store: sqlitetest.Open(t), FailFinishes: 3}
	var ran atomic.Int32
	startFaultyPool(t, f, worker.PoolConfig{Lease: 5 * time.Second, Handlers: map[string]worker.HandlerFunc{
		"noop": func(ctx context.Context, j *worker.Job) error { ran.Add(1); return nil },
	}})
	j := create(t, f.Store, db.JobCreateParams{Type: "noop"})
	oneRun(t, f.Store, j.ID)
	if got, want := f.finishCalls.Load(), int32(4); got != want {
		t.Errorf("RunFinish called %d times, want %d (3 failures, then the one that counts)", got, want)
	}
	if got := ran.Load(); got != 1 {
		t.Errorf("handler ran %d times, want 1", got)
	}
}

// A completion refused as invalid (a server's 422) is not sent again: it
// would be refused the same, and the retries only delay the reaper.
func TestPool_FinishRefusedNotRetried(t *testing.T) {
	f := &faultyStore{Store: sqlitetest.Open(t), FailFinishes: 100, FinishErr: &db.ValidationError{Field: "output", Msg: "refused (injected)"}}
	startFaultyPool(t, f, worker.PoolConfig{Lease: 5 * time.Second, Handlers: map[string]worker.HandlerFunc{
		"noop": func(ctx context.Context, j *worker.Job) error { return nil },
	}})
	create(t, f.Store, db.JobCreateParams{Type: "noop"})
	deadline := time.Now().Add(30 * time.Second)
	for f.finishCalls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // a retry would come within 50 ms
	if got := f.finishCalls.Load(); got != 1 {
		t.Errorf("RunFinish called %d times, want 1: a refused report is final", got)
	}
}

// Heartbeats slowed to 3/8 of the lease each (a slow fsync) do not lose
// the lease: the pool tolerates renewals of up to 5/12 of the lease back to
// back (see Pool.heartbeat); 3/8 leaves a twelfth of the lease (333 ms) for
// the store itself on a loaded machine (at 40% the margin, 133 ms, was not
// enough under -race at a load average of 10). The handler runs until three
// slow renewals have been accepted, which spans more than a lease and a
// half, and succeeds once.
func TestPool_SlowHeartbeatKeepsLease(t *testing.T) {
	const lease = 4 * time.Second
	f := &faultyStore{Store: sqlitetest.Open(t), BeatDelay: lease * 3 / 8}
	startFaultyPool(t, f, worker.PoolConfig{Lease: lease, Handlers: map[string]worker.HandlerFunc{
		"slow": func(ctx context.Context, j *worker.Job) error {
			for f.beats.Load() < 3 {
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(10 * time.Millisecond):
				}
			}
			return nil
		},
	}})
	j := create(t, f.Store, db.JobCreateParams{Type: "slow", Timeout: time.Minute})
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := f.JobGet(context.Background(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != db.StateRunning && got.State != db.StateReady || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	oneRun(t, f.Store, j.ID)
	if n := f.staleBeats.Load(); n > 0 {
		t.Errorf("%d heartbeats found the lease lost", n)
	}
	if n := f.beats.Load(); n < 3 {
		t.Errorf("%d slow heartbeats accepted, want at least 3: the run did not outlast the lease", n)
	}
}

// TestPool_ClaimAnswerLost: the jobs a claim leased, whose answer was lost
// with the commit's, are run at once by the pool that claimed them, once
// each, as their first attempt: they waited out their lease unrun, and a
// job of one attempt went dead never having run.
func TestPool_ClaimAnswerLost(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	var ran sync.Map // job id: how many times it ran
	handler := func(_ context.Context, j *worker.Job) error {
		n, _ := ran.LoadOrStore(j.ID, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		return nil
	}
	var ids []string
	for range 3 {
		ids = append(ids, create(t, s, db.JobCreateParams{Type: "once", MaxAttempts: 1}).ID)
	}
	store := &dbtest.CommitLost{Store: s}
	p, _ := startPool(t, s, worker.PoolConfig{Store: store, Lease: time.Hour, Handlers: map[string]worker.HandlerFunc{"once": handler}})
	p.Wake()
	for _, id := range ids {
		j := waitState(t, s, id, db.StateDone)
		if n, _ := ran.Load(id); j.Attempt != 1 || n == nil || n.(*atomic.Int32).Load() != 1 {
			t.Errorf("job %s: attempt %d, ran %v times; want once, its first attempt", id, j.Attempt, n)
		}
	}
	if !store.Lost() {
		t.Fatal("no claim's answer was lost: the test tested nothing")
	}
}
