package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sked-dev/sked/db"
)

// Store is what a Pool needs of storage. db.Store satisfies it, and so does
// the HTTP client of a remote worker.
type Store interface {
	RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error)
	RunHeartbeat(ctx context.Context, p db.RunHeartbeatParams) (db.Heartbeat, error)
	RunFinish(ctx context.Context, p db.RunFinishParams) (db.Job, error)
}

// Defaults of PoolConfig.
const (
	DefaultSlots   = 16
	DefaultMaxIdle = time.Second
	DefaultGrace   = 30 * time.Second
)

// PoolConfig configures a Pool. Zero values mean the defaults.
type PoolConfig struct {
	Store    Store                  // never nil
	Handlers map[string]HandlerFunc // by job type; the pool claims only these types
	WorkerID string                 // names the pool in leases and runs
	Slots    int                    // handlers running at once
	Lease    time.Duration          // lease asked for at claim and renewed at a third of it
	// MaxIdle is the longest the dispatcher sleeps without a wake-up or a
	// known due time; it bounds how late a job written by another process
	// starts.
	MaxIdle time.Duration
	// Grace is how long shutdown waits for running handlers before it
	// cancels them and hands their jobs back.
	Grace time.Duration
	// NextDueFunc tells when the earliest job of the given types is due, so
	// the dispatcher sleeps exactly until then; nil polls every MaxIdle.
	NextDueFunc func(ctx context.Context, types []string) (time.Time, bool, error)
	// NowFunc is the clock NextDueFunc's answer is compared with (the
	// store's). nil means time.Now.
	NowFunc func() time.Time
	Logger  *slog.Logger
}

// Pool is the dispatcher and the worker slots: it claims due jobs in
// batches sized by its free slots, runs each with its handler while renewing
// the lease, and records the outcome under the lease generation.
type Pool struct {
	cfg   PoolConfig
	types []string
	wake  chan struct{} // buffered(1): a wake-up pending
	freed chan struct{} // buffered(1): a slot came free
	sem   chan struct{} // one token per running handler
	wg    sync.WaitGroup
}

// Causes a running handler's context is cancelled with.
var (
	errLeaseLost       = errors.New("lease lost: another worker may hold the job now")
	errCancelRequested = errors.New("cancellation requested")
	errShutdown        = errors.New("worker shutting down")
)

// NewPool returns a pool for cfg. It panics if cfg.Store is nil or there are
// no handlers: that is a wiring mistake.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.Store == nil || len(cfg.Handlers) == 0 {
		panic("worker: NewPool needs a store and at least one handler")
	}
	cfg.Slots = cmp.Or(cfg.Slots, DefaultSlots)
	cfg.Lease = cmp.Or(cfg.Lease, db.DefaultLease)
	cfg.MaxIdle = cmp.Or(cfg.MaxIdle, DefaultMaxIdle)
	cfg.Grace = cmp.Or(cfg.Grace, DefaultGrace)
	cfg.WorkerID = cmp.Or(cfg.WorkerID, "local")
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Pool{
		cfg:   cfg,
		types: slices.Sorted(maps.Keys(cfg.Handlers)),
		wake:  make(chan struct{}, 1),
		freed: make(chan struct{}, 1),
		sem:   make(chan struct{}, cfg.Slots),
	}
}

// Types returns the job types the pool serves.
func (p *Pool) Types() []string { return p.types }

// Wake tells the dispatcher that a job may have become due (one was created,
// resumed or retried). It never blocks.
func (p *Pool) Wake() { signal(p.wake) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Run dispatches until ctx is done, then stops claiming, waits up to Grace
// for running handlers, cancels the rest and hands their jobs back. It
// returns when every handler has returned and its outcome is recorded.
func (p *Pool) Run(ctx context.Context) error {
	runCtx, stopRuns := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopRuns(nil)
	for ctx.Err() == nil {
		p.runOnce(ctx, runCtx)
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(p.cfg.Grace):
		p.cfg.Logger.Warn("grace period over; handing back running jobs", "running", len(p.sem))
		stopRuns(errShutdown)
		<-done
	}
	return nil
}

// runOnce claims as many due jobs as there are free slots, starts them, and
// sleeps until something may be due: a wake-up, a freed slot, the earliest
// due time or MaxIdle. After a failed claim it sleeps MaxIdle whatever is
// due: a store that refuses writes (full disk, locked file) must not be
// asked again at once for a job that is already due.
func (p *Pool) runOnce(ctx, runCtx context.Context) {
	free := cap(p.sem) - len(p.sem)
	claimFailed := false
	if free > 0 {
		claims, err := p.cfg.Store.RunClaim(ctx, db.RunClaimParams{
			WorkerID: p.cfg.WorkerID, Types: p.types, Max: free, Lease: p.cfg.Lease,
		})
		if err != nil && ctx.Err() == nil {
			p.cfg.Logger.Error("claim", "err", err)
			claimFailed = true
		}
		for _, c := range claims {
			p.sem <- struct{}{}
			p.wg.Add(1)
			go p.execute(runCtx, c)
		}
		if err == nil && len(claims) == free {
			return // more may be due right now
		}
	}
	wait := p.cfg.MaxIdle
	if free > 0 && !claimFailed && p.cfg.NextDueFunc != nil {
		if next, ok, err := p.cfg.NextDueFunc(ctx, p.types); err == nil && ok {
			wait = min(wait, max(next.Sub(p.cfg.NowFunc()), time.Millisecond))
		}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-p.wake:
	case <-p.freed:
	case <-t.C:
	}
}

// execute runs one claimed job and records its outcome.
func (p *Pool) execute(runCtx context.Context, c db.Claim) {
	defer p.wg.Done()
	defer func() { <-p.sem; signal(p.freed) }()

	j := c.Job
	job := &Job{
		ID: j.ID, Type: j.Type, Payload: j.Payload, Attempt: j.Attempt, Generation: j.LeaseGeneration,
		IdempotencyKey: j.IdempotencyKey, Output: &Tail{Max: db.OutputTailBytes},
	}
	if j.Slot != nil {
		job.Slot = *j.Slot
	}
	hctx, cancel := context.WithCancelCause(runCtx)
	defer cancel(nil)
	tctx, cancelTimeout := context.WithTimeout(hctx, cmp.Or(time.Duration(j.Timeout), db.DefaultTimeout))
	defer cancelTimeout()

	stopBeat := make(chan struct{})
	beatDone := make(chan struct{})
	go func() {
		defer close(beatDone)
		p.heartbeat(hctx, j, cancel, stopBeat)
	}()
	start := time.Now()
	err := safeCall(tctx, p.cfg.Handlers[j.Type], job)
	close(stopBeat)
	<-beatDone

	fin := db.RunFinishParams{JobID: j.ID, Generation: j.LeaseGeneration, Output: job.Output.String()}
	cause := context.Cause(hctx)
	switch {
	case errors.Is(cause, errLeaseLost):
		p.cfg.Logger.Warn("run abandoned: lease lost", "job_id", j.ID, "attempt", j.Attempt, "generation", j.LeaseGeneration)
		return
	case err == nil:
		fin.Outcome = db.OutcomeSucceeded
	case errors.Is(cause, errCancelRequested):
		fin.Outcome, fin.Error = db.OutcomeCancelled, "cancelled on request: "+err.Error()
	case errors.Is(cause, errShutdown):
		fin.Outcome, fin.Error = db.OutcomeReleased, "handed back at shutdown: "+err.Error()
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		fin.Outcome, fin.Retryable = db.OutcomeTimedOut, true
		fin.Error = fmt.Sprintf("timed out after %s: %v", time.Duration(j.Timeout), err)
	default:
		fin.Outcome, fin.Retryable, fin.Error = db.OutcomeFailed, !IsPermanent(err), err.Error()
	}
	// The outcome is recorded even when shutdown cancelled runCtx.
	fctx, cancelFinish := context.WithTimeout(context.WithoutCancel(runCtx), 10*time.Second)
	defer cancelFinish()
	after, ferr := p.finish(fctx, fin)
	log := p.cfg.Logger.With("job_id", j.ID, "type", j.Type, "attempt", j.Attempt, "generation", j.LeaseGeneration,
		"outcome", fin.Outcome, "duration", time.Since(start).Round(time.Millisecond))
	switch {
	case errors.Is(ferr, db.ErrStale):
		log.Warn("run outcome refused: lease no longer held")
	case ferr != nil:
		log.Error("record run outcome", "err", ferr)
	case fin.Outcome == db.OutcomeSucceeded:
		log.Info("run finished", "next_state", after.State)
	default:
		log.Warn("run finished", "err", fin.Error, "next_state", after.State)
	}
}

// finish records fin. A failure other than a stale lease (the disk, a lock,
// an I/O error) is retried with backoff until ctx ends, so that an outcome
// the store did not take is not dropped while the lease may still hold;
// past the lease the reaper runs the job again.
func (p *Pool) finish(ctx context.Context, fin db.RunFinishParams) (db.Job, error) {
	wait := 50 * time.Millisecond
	for {
		j, err := p.cfg.Store.RunFinish(ctx, fin)
		if err == nil || errors.Is(err, db.ErrStale) {
			return j, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return db.Job{}, err
		case <-t.C:
		}
		p.cfg.Logger.Warn("record run outcome failed; retrying", "job_id", fin.JobID, "err", err)
		wait = min(2*wait, time.Second)
	}
}

// heartbeat renews the lease every third of it until stop is closed. It
// cancels the handler when the lease is lost or cancellation is requested,
// and also when renewals have failed (the store is unreachable) for so long
// that the lease may be about to expire: the pool then gives the run up
// before the reaper can hand the job to another worker. The pool's own
// clock bounds the lease from below: a renewal sent at t extends it to at
// least t+Lease on the store's clock.
//
// Margins: renewals fail for half the lease before the run is given up, and
// one renewal may take until five sixths of the lease after the last one
// that succeeded, so the handler always has a sixth of the lease to stop. A
// slow store alone does not lose the lease: renewals taking up to 5/12 of
// it each (back to back, measured from the last success) still succeed.
func (p *Pool) heartbeat(ctx context.Context, j db.Job, cancel context.CancelCauseFunc, stop <-chan struct{}) {
	t := time.NewTicker(p.cfg.Lease / 3)
	defer t.Stop()
	// The claim was answered just before the run started.
	renewed := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		sent := time.Now()
		bctx, cancelBeat := context.WithDeadline(context.WithoutCancel(ctx), renewed.Add(p.cfg.Lease*5/6))
		hb, err := p.cfg.Store.RunHeartbeat(bctx, db.RunHeartbeatParams{JobID: j.ID, Generation: j.LeaseGeneration, Lease: p.cfg.Lease})
		cancelBeat()
		switch {
		case errors.Is(err, db.ErrStale):
			cancel(errLeaseLost)
			return
		case err != nil && !time.Now().Before(renewed.Add(p.cfg.Lease/2)):
			p.cfg.Logger.Warn("heartbeat failed until the lease may expire; giving the run up", "job_id", j.ID, "err", err)
			cancel(errLeaseLost)
			return
		case err != nil:
			// The lease is still live; try again at the next tick.
			p.cfg.Logger.Warn("heartbeat", "job_id", j.ID, "err", err)
		default:
			renewed = sent
			if hb.CancelRequested {
				cancel(errCancelRequested)
			}
		}
	}
}

// safeCall runs h, turning a panic into an error.
func safeCall(ctx context.Context, h HandlerFunc, job *Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return h(ctx, job)
}
