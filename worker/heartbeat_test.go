package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/internal/syncbuf"
	"github.com/sked-dev/sked/worker"
)

// errNotStopped is what a handler returns when its context was not
// cancelled within a long guard: the pool did not give the run up.
var errNotStopped = errors.New("handler not stopped within 30 s")

// untilStopped is a handler that reports its start, waits for the pool to
// cancel it, and sends the cause to causes.
func untilStopped(started chan<- struct{}, causes chan<- error) worker.HandlerFunc {
	return func(ctx context.Context, _ *worker.Job) error {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
			return ctx.Err()
		case <-time.After(30 * time.Second):
			causes <- errNotStopped
			return errNotStopped
		}
	}
}

// waitLog waits until the log holds s.
func waitLog(t *testing.T, logs *syncbuf.Buffer, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log after 30 s:\n%s", s, logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A renewal refused as stale (the reaper took the job back and it may run
// elsewhere) stops the handler; the pool still reports how the run ended,
// the store refuses it and keeps it on the run as its late outcome beside
// the reaper's lease_expired, and the next claim runs the job.
func TestPool_HeartbeatStaleStopsRun(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	var now atomic.Pointer[time.Time]
	setNow := func(t time.Time) { now.Store(&t) }
	setNow(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	s.NowFunc = func() time.Time { return *now.Load() }
	b := &faultyStore{Store: s}
	const lease = 1500 * time.Millisecond
	started, causes := make(chan struct{}, 1), make(chan error, 1)
	stuck := untilStopped(started, causes)
	var logs syncbuf.Buffer
	p, _ := startPool(t, s, worker.PoolConfig{Store: b, Lease: lease, Slots: 1, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Handlers: map[string]worker.HandlerFunc{"long": func(ctx context.Context, j *worker.Job) error {
			if j.Generation == 1 {
				return stuck(ctx, j)
			}
			return nil
		}}})
	j := create(t, s, db.JobCreateParams{Type: "long"})
	p.Wake()
	<-started
	setNow(now.Load().Add(time.Hour))
	if n, err := s.RunReapExpired(context.Background()); err != nil || n != 1 {
		t.Fatalf("reap: %d, %v", n, err)
	}
	if err := <-causes; err == nil || !strings.Contains(err.Error(), "lease lost") {
		t.Fatalf("handler stopped with cause %v, want the lease lost", err)
	}
	waitState(t, s, j.ID, db.StateDone)
	rs := runs(t, s, j.ID) // newest first
	if len(rs) != 2 || rs[1].Generation != 1 || rs[1].Outcome != db.OutcomeLeaseExpired || rs[1].LateOutcome != db.OutcomeFailed ||
		rs[0].Outcome != db.OutcomeSucceeded {
		t.Fatalf("runs %+v, want generation 1 lease_expired with its late outcome failed, then a success", rs)
	}
	if got := b.finishCalls.Load(); got != 2 {
		t.Errorf("%d outcomes sent, want 2 (generation 1's, refused, and generation 2's)", got)
	}
	waitLog(t, &logs, `"msg":"run outcome refused: lease no longer held"`)
}

// Renewals that fail (the store unreachable) until half the lease has
// passed give the run up before the lease can expire: the handler is
// stopped, and its run recorded failed (a store that is back in time takes
// it; one that is not leaves the run to the reaper). Here the store hangs until each
// renewal's deadline, five sixths of the lease after the claim, so the
// first renewal already fails past half the lease and is the only one.
func TestPool_HeartbeatGivesUpWhenStoreUnreachable(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	const lease = 3 * time.Second
	var left atomic.Int64 // how long the first renewal was given, as it was sent
	b := &faultyStore{Store: s, BeatFunc: func(ctx context.Context, n int32) error {
		if deadline, ok := ctx.Deadline(); ok && n == 1 {
			left.Store(int64(time.Until(deadline)))
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	started, causes := make(chan struct{}, 1), make(chan error, 1)
	var logs syncbuf.Buffer
	p, _ := startPool(t, s, worker.PoolConfig{Store: b, Lease: lease, Slots: 1, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Handlers: map[string]worker.HandlerFunc{"long": untilStopped(started, causes)}})
	j := create(t, s, db.JobCreateParams{Type: "long"})
	p.Wake()
	<-started
	if err := <-causes; err == nil || !strings.Contains(err.Error(), "lease renewals failed") {
		t.Fatalf("handler stopped with cause %v, want the renewals failed", err)
	}
	waitLog(t, &logs, `"msg":"run finished"`)
	if !strings.Contains(logs.String(), `"msg":"heartbeat failed until the lease may expire; giving the run up"`) {
		t.Errorf("the give-up is not logged:\n%s", logs.String())
	}
	if got := b.sentBeats.Load(); got != 1 {
		t.Errorf("%d renewals sent, want 1: the first failed past half the lease", got)
	}
	// Sent a third of the lease after the claim, it may wait until five
	// sixths: at most half a lease, leaving the handler a sixth to stop.
	if got := time.Duration(left.Load()); got <= 0 || got > lease/2 {
		t.Errorf("the renewal was given %s, want at most %s", got, lease/2)
	}
	if rs := runs(t, s, j.ID); len(rs) != 1 || rs[0].Outcome != db.OutcomeFailed || !strings.Contains(rs[0].Error, "lease renewals failed") {
		t.Errorf("runs %+v, want the one run failed for its renewals", rs)
	}
}

// Renewals count from the last one that succeeded: after a success, the
// next renewal may wait until five sixths of a lease after that success was
// sent, not after the claim. Here the second renewal hangs until its
// deadline, which ends the run.
func TestPool_HeartbeatCountsFromLastRenewal(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	const lease = 3 * time.Second
	var firstSent, secondDeadline atomic.Int64 // Unix ns
	b := &faultyStore{Store: s, BeatFunc: func(ctx context.Context, n int32) error {
		if n == 1 {
			firstSent.Store(time.Now().UnixNano())
			return nil
		}
		if deadline, ok := ctx.Deadline(); ok && n == 2 {
			secondDeadline.Store(deadline.UnixNano())
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	started, causes := make(chan struct{}, 1), make(chan error, 1)
	p, _ := startPool(t, s, worker.PoolConfig{Store: b, Lease: lease, Slots: 1,
		Handlers: map[string]worker.HandlerFunc{"long": untilStopped(started, causes)}})
	create(t, s, db.JobCreateParams{Type: "long"})
	p.Wake()
	<-started
	if err := <-causes; err == nil || !strings.Contains(err.Error(), "lease renewals failed") {
		t.Fatalf("handler stopped with cause %v, want the renewals failed", err)
	}
	// Counted from the claim, it would lie at most half a lease after the
	// first renewal, which went out a third of a lease after the claim.
	if got := time.Duration(secondDeadline.Load() - firstSent.Load()); got <= lease/2 {
		t.Errorf("the second renewal's deadline is %s after the first renewal, want more than %s", got, lease/2)
	}
	if got := b.sentBeats.Load(); got != 2 {
		t.Errorf("%d renewals sent, want 2", got)
	}
}

// A renewal that fails while the lease is still young is tried again at
// the next tick; the run goes on and succeeds once.
func TestPool_HeartbeatRetriesWithinTheLease(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	b := &faultyStore{Store: s, BeatFunc: func(_ context.Context, n int32) error {
		if n == 1 {
			return errIO
		}
		return nil
	}}
	var logs syncbuf.Buffer
	// The first renewal goes out at a third of the lease, 2 s, a second
	// before the give-up point at half of it.
	p, _ := startPool(t, s, worker.PoolConfig{Store: b, Lease: 6 * time.Second, Slots: 1, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Handlers: map[string]worker.HandlerFunc{"long": func(ctx context.Context, _ *worker.Job) error {
			for b.sentBeats.Load() < 2 {
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(10 * time.Millisecond):
				}
			}
			return nil
		}}})
	j := create(t, s, db.JobCreateParams{Type: "long", Timeout: time.Minute})
	p.Wake()
	oneRun(t, s, j.ID)
	if n := strings.Count(logs.String(), `"msg":"heartbeat"`); n != 1 {
		t.Errorf("%d failed renewals logged, want 1:\n%s", n, logs.String())
	}
}
