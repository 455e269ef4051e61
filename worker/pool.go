package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/sked-dev/sked/clock"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/failurelog"
)

// Store is what a Pool needs of storage. db.Store satisfies it, and so does
// the HTTP client of a remote worker.
type Store interface {
	RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error)
	RunHeartbeat(ctx context.Context, p db.RunHeartbeatParams) (db.Heartbeat, error)
	RunFinish(ctx context.Context, p db.RunFinishParams) (db.Job, error)
}

// ClaimWaiter is a Store whose claims may wait before they claim: the HTTP
// client, whose claims long-poll the server. A pool whose Store has it
// claims with RunClaimWaited, so that a wait is not taken for a lease
// running out.
type ClaimWaiter interface {
	// RunClaimWaited is RunClaim that also says how long after the call
	// the claims were made at the earliest: their leases began no sooner.
	RunClaimWaited(ctx context.Context, p db.RunClaimParams) ([]db.Claim, time.Duration, error)
}

// HeldReader is a Store that can say which jobs a worker holds (db.Store):
// after a claim whose commit's answer was lost (db.ErrCommitUnknown), a
// pool reads them and runs those it does not run already, which a lost
// claim leased to it (its worker id must be its own); else they would
// wait out their lease unrun, each an attempt spent.
type HeldReader interface {
	RunsHeld(ctx context.Context, worker string) ([]db.Claim, error)
}

// WorkerStopper is a Store that keeps a record of the workers that claim
// (db.Store; the HTTP client, through the server): a pool tells it when it
// has shut down, so that it is not taken for a worker still serving its
// types until its record grows old.
type WorkerStopper interface {
	WorkerStopped(ctx context.Context, id string) error
}

// Defaults of PoolConfig.
const (
	DefaultSlots   = 16
	DefaultMaxIdle = time.Second
	DefaultGrace   = 30 * time.Second
	// DefaultClaimBatch bounds one claim: a spike of due jobs is taken in
	// transactions of this many, so the first of them start while the rest
	// are still being claimed.
	DefaultClaimBatch = 256
	// DefaultClaimAhead is how far ahead of their due time jobs are
	// claimed (see PoolConfig.ClaimAhead).
	DefaultClaimAhead = 250 * time.Millisecond
)

// MaxClaimAhead is the longest PoolConfig.ClaimAhead for lease: a quarter
// of it, so that a job claimed ahead starts with most of its lease left.
func MaxClaimAhead(lease time.Duration) time.Duration { return lease / 4 }

// PoolConfig configures a Pool. Zero values mean the defaults.
type PoolConfig struct {
	Store    Store                  // never nil
	Handlers map[string]HandlerFunc // by job type; the pool claims only these types
	WorkerID string                 // names the pool in leases and runs
	Slots    int                    // handlers running at once
	Lease    time.Duration          // lease asked for at claim and renewed at a third of it
	// ClaimBatch is the most jobs one claim takes; while claims come back
	// full the dispatcher claims again, as soon as a batch of slots is free
	// or the runs just started stop freeing slots.
	ClaimBatch int
	// ClaimAhead claims the jobs that fall due within it before they are
	// due, and starts each when it is due on the store's clock: a spike
	// known ahead (a schedule, jobs created for later) starts on time
	// however long claiming it takes. A job claimed ahead is held by this
	// worker, so cancelling it answers 409 as for a running job. 0 means
	// DefaultClaimAhead; a negative value claims only due jobs. It is at
	// most a quarter of Lease.
	ClaimAhead time.Duration
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
	// recheck: a run ended with its job ready again (a retry, a schedule's
	// next slot), so the earliest due time may have moved; buffered(1).
	recheck chan struct{}
	wg      sync.WaitGroup // running handlers
	workers sync.WaitGroup // worker goroutines

	idleMu     sync.Mutex
	idle       []chan *claimed // each idle worker's channel, the most recently idle last; guarded by idleMu
	workerIdle time.Duration   // workerIdle, but in tests

	// leasesMu is held for reading by claims and renewals in flight, and
	// for writing by RenewAhead, which must see no other lease change.
	leasesMu sync.RWMutex
	runsMu   sync.Mutex
	running  map[string]*claimed // the pool's claims by job ID; guarded by runsMu
	// ended are the runs this pool ended lately, at most maxEnded (endedOrder
	// the oldest first): a claim answered again (see claim) may name one
	// whose end the store recorded after it read it. Guarded by runsMu.
	ended      map[runID]struct{}
	endedOrder []runID

	// The dispatcher goroutine's own: drained is set when the last claim
	// took every due job, and then next (if hasNext) is the earliest due
	// time read since.
	drained bool
	next    time.Time
	hasNext bool
	claims  failurelog.Log // the dispatcher's failed claims
	// claimLog is cfg.Logger naming the pool's worker id, for the lines of
	// claims, which a sked serve's two pools each log.
	claimLog *slog.Logger
}

// claimed is a job the pool holds, its lease, and its handler's context,
// made at the claim so that a cancellation requested before the handler
// starts (CancelRun) is already in it.
type claimed struct {
	*db.Claim // into the claim's answer, not a copy of it
	lease     *lease
	// answered is when the claim's answer arrived: a run that starts at
	// once tells what is left of its lease from it.
	answered reading
	ctx      context.Context
	cancel   context.CancelCauseFunc // cancels ctx; safe from any goroutine
	// late: the claim was answered after shutdown began, and its job is
	// handed back unrun.
	late bool
}

// Causes a running handler's context is cancelled with.
var (
	errLeaseLost = errors.New("lease lost: another worker may hold the job now")
	// errRenewFailed: renewals failed for so long that the lease may be
	// about to lapse; it still holds while the run stops.
	errRenewFailed     = errors.New("lease renewals failed until it may lapse")
	errCancelRequested = errors.New("cancellation requested")
	errShutdown        = errors.New("worker shutting down")
	// errNotStarted ends a run handed back before it started: shutdown
	// reached it (claimed ahead, PoolConfig.ClaimAhead, and not yet due, or
	// its claim answered as shutdown began), or its lease was lost while it
	// waited to be due.
	errNotStarted = errors.New("handed back before it started")
	// errLapsed ends a run that was not started because too little of its
	// lease was certainly left: the claim's answer came late (see
	// startLeft), or the lease lapsed before its command could start.
	errLapsed = errors.New("handed back unrun: too little of its lease was certainly left to start it")
	// errNotStartedShutdown is a run's end until it starts: shutdown
	// reached it first. Made once, not at every run.
	errNotStartedShutdown = fmt.Errorf("%w: %w", errNotStarted, errShutdown)
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
	cfg.ClaimBatch = cmp.Or(cfg.ClaimBatch, DefaultClaimBatch)
	cfg.ClaimAhead = min(max(cmp.Or(cfg.ClaimAhead, DefaultClaimAhead), 0), MaxClaimAhead(cfg.Lease))
	cfg.WorkerID = cmp.Or(cfg.WorkerID, "local")
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	cfg.Logger = orDiscard(cfg.Logger)
	return &Pool{
		cfg:     cfg,
		types:   slices.Sorted(maps.Keys(cfg.Handlers)),
		wake:    make(chan struct{}, 1),
		freed:   make(chan struct{}, 1),
		recheck: make(chan struct{}, 1),
		running: map[string]*claimed{},
		ended:   map[runID]struct{}{},
		sem:     make(chan struct{}, cfg.Slots),

		workerIdle: workerIdle,
		claimLog:   cfg.Logger.With("worker_id", cfg.WorkerID),
	}
}

// CancelRun stops the run of job id under lease generation at once when
// the pool holds it, as its heartbeat does when it finds the cancellation
// requested, and reports whether it held it. Call it once the store has
// recorded the request (db.Store.JobRequestCancelRun), with the generation
// it was recorded on: a run of that generation it misses (claimed
// meanwhile) is still stopped by its heartbeat, and a later firing of the
// job, which nobody asked to stop, is left alone.
func (p *Pool) CancelRun(id string, generation int64) bool {
	p.runsMu.Lock()
	c := p.running[id]
	p.runsMu.Unlock()
	if c == nil || c.Job.LeaseGeneration != generation {
		return false
	}
	c.cancel(errCancelRequested)
	return true
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
	p.workers.Wait()
	if s, ok := p.cfg.Store.(WorkerStopper); ok {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.WorkerStopped(sctx, p.cfg.WorkerID); err != nil {
			p.cfg.Logger.Warn("record this worker stopped", "err", err)
		}
	}
	return nil
}

// runOnce claims as many due jobs as there are free slots (at most
// ClaimBatch), starts them, and sleeps until something may be due: a
// wake-up, a freed slot, the earliest due time or MaxIdle. After a failed
// claim it sleeps MaxIdle whatever is due: a store that refuses writes (full
// disk, locked file) must not be asked again at once for a job that is
// already due.
func (p *Pool) runOnce(ctx, runCtx context.Context) {
	free := cap(p.sem) - len(p.sem)
	if free > 0 && p.mayBeDue() {
		want := min(free, p.cfg.ClaimBatch)
		claims, err := p.claim(ctx, runCtx, db.RunClaimParams{
			WorkerID: p.cfg.WorkerID, Types: p.types, Max: want, Lease: p.cfg.Lease, More: free > want,
			Ahead: p.cfg.ClaimAhead,
		})
		switch {
		case err == nil:
			p.claims.Worked(p.claimLog, "claim works again")
		case ctx.Err() == nil:
			p.claims.Failed(p.claimLog, slog.LevelError, "claim", err)
		}
		for _, c := range claims {
			p.sem <- struct{}{}
			p.start(ctx, runCtx, c)
		}
		if err == nil && len(claims) == want {
			// More may be due right now: claim again once a batch of slots
			// is free, or the runs just started stop freeing slots, so
			// that a small pool of short runs claims whole batches rather
			// than what the last claim left free.
			p.drained = false
			p.settle(ctx, min(cap(p.sem), p.cfg.ClaimBatch), settleQuiet)
			return
		}
		p.drained = err == nil
		p.readNextDue(ctx)
	}
	wait := p.cfg.MaxIdle
	if p.drained && p.hasNext {
		wait = min(wait, max(p.next.Sub(p.cfg.NowFunc())-p.cfg.ClaimAhead, time.Millisecond))
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-p.wake:
		p.drained = false
	case <-p.freed:
		p.settle(ctx, cap(p.sem)/2, settleTime)
	case <-p.recheck:
		p.readNextDue(ctx)
	case <-t.C:
		p.drained = false
	}
}

// Bounds of settle: settleTime the whole wait, settleQuiet (after a full
// claim) the wait for the next slot to come free. Slots still held that
// long after a claim are held by long runs, and waiting for them would
// only keep the free slots idle.
const (
	settleTime  = time.Millisecond
	settleQuiet = 200 * time.Microsecond
)

// settle gives slots that come free together (the runs of a spike ending at
// once, short runs just started) time to do so, so that one claim takes
// jobs for all of them instead of a claim, a transaction, per few slots: it
// waits while fewer than enough slots are free, at most settleTime, and at
// most quiet since a slot last came free.
func (p *Pool) settle(ctx context.Context, enough int, quiet time.Duration) {
	t := time.NewTimer(settleTime)
	defer t.Stop()
	q := time.NewTimer(quiet)
	defer q.Stop()
	for cap(p.sem)-len(p.sem) < enough {
		select {
		case <-p.freed:
			q.Reset(quiet)
		case <-q.C:
			return
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// claim claims jobs and returns them with their leases, measured from
// before the request was sent: a lease is certainly held for its length
// from then (or from as much later as a ClaimWaiter says it waited), on
// any clock that runs at the store's rate. A claim answered after ctx
// ended (shutdown began) is late: its jobs are handed back unrun.
func (p *Pool) claim(ctx, runCtx context.Context, params db.RunClaimParams) ([]*claimed, error) {
	p.leasesMu.RLock()
	defer p.leasesMu.RUnlock()
	sent := clock.Monotonic()
	var (
		claims []db.Claim
		waited time.Duration
		err    error
	)
	leaseOf := func(db.Claim) *lease { return newLease(sent, waited, params.Lease) }
	adopted := false
	if w, ok := p.cfg.Store.(ClaimWaiter); ok {
		claims, waited, err = w.RunClaimWaited(ctx, params)
	} else {
		// Not cut off by shutdown: a commit cut off midway might have
		// taken jobs all the same, which nobody would then run.
		claims, err = p.cfg.Store.RunClaim(context.WithoutCancel(ctx), params)
		if errors.Is(err, db.ErrCommitUnknown) {
			var (
				asked    time.Duration
				storeNow time.Time
			)
			if claims, asked, storeNow, err = p.held(ctx, sent, err); err == nil {
				adopted = true
				leaseOf = func(c db.Claim) *lease { return heldLease(asked, storeNow, c.Job, params.Lease) }
			}
		}
	}
	late := ctx.Err() != nil
	answered := readClock()
	out := make([]*claimed, 0, len(claims))
	p.runsMu.Lock()
	defer p.runsMu.Unlock()
	for i := range claims {
		c := &claims[i]
		// A claim answered again (wire.ClaimResendHeader) names the jobs
		// the store held for this worker as it read them: also runs this
		// pool has, or ended since.
		id := runID{c.Job.ID, c.Job.LeaseGeneration}
		if had := p.running[c.Job.ID]; had != nil && had.Job.LeaseGeneration == id.generation {
			continue
		}
		if _, ok := p.ended[id]; ok {
			continue
		}
		cl := &claimed{Claim: c, lease: leaseOf(*c), answered: answered, late: late}
		cl.ctx, cl.cancel = context.WithCancelCause(runCtx)
		if c.Job.CancelRequested { // asked while the claim's answer was lost (answered again)
			cl.cancel(errCancelRequested)
		}
		p.running[c.Job.ID] = cl
		out = append(out, cl)
	}
	if adopted {
		p.cfg.Logger.Warn("a claim's answer was lost with its commit; running the jobs it leased", "jobs", len(out))
	}
	return out, err
}

// held reads the jobs the store says this worker holds (its worker id is
// its own: a sked serve's has a random part), after a claim sent at sent
// whose commit's answer was lost (claimErr): those claim does not run
// already are the ones that claim leased, or an earlier lost one. It
// returns them, when it asked (asked, on the monotonic clock) and the
// store's time just after it answered, from which heldLease bounds their
// leases. While the store cannot answer it asks again, until a third of
// the lease has passed since sent (a job started later would have too
// little of it) or shutdown begins.
func (p *Pool) held(ctx context.Context, sent time.Duration, claimErr error) (claims []db.Claim, asked time.Duration, storeNow time.Time, err error) {
	h, ok := p.cfg.Store.(HeldReader)
	if !ok {
		return nil, 0, time.Time{}, claimErr
	}
	giveUp := sent + p.cfg.Lease/3
	wait := 50 * time.Millisecond
	for {
		asked = clock.Monotonic()
		rctx, cancel := context.WithTimeout(ctx, giveUp-asked)
		claims, err = h.RunsHeld(rctx, p.cfg.WorkerID)
		cancel()
		if err == nil {
			return claims, asked, p.cfg.NowFunc(), nil
		}
		if ctx.Err() != nil || clock.Monotonic()+wait > giveUp {
			return nil, 0, time.Time{}, fmt.Errorf("%w; reading the jobs it may have leased: %w", claimErr, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		wait = min(2*wait, time.Second)
	}
}

// heldLease is the lease of a job held reads, asked at asked on the
// monotonic clock: renewed by length, and ending no later than the job's
// lease end as the store keeps it (storeNow was read after the store
// answered, so what is left of it by then is less than what was left when
// it was asked).
func heldLease(asked time.Duration, storeNow time.Time, j db.Job, length time.Duration) *lease {
	l := newLease(asked, 0, length)
	if j.LeaseUntil != nil {
		if left := j.LeaseUntil.Sub(storeNow); left < length {
			l.until = asked + max(left, 0)
		}
	}
	return l
}

// release forgets c once its outcome is recorded.
func (p *Pool) release(c *claimed) {
	p.runsMu.Lock()
	defer p.runsMu.Unlock()
	if p.running[c.Job.ID] == c {
		delete(p.running, c.Job.ID)
	}
	if len(p.endedOrder) == maxEnded {
		delete(p.ended, p.endedOrder[0])
		p.endedOrder = p.endedOrder[1:]
	}
	id := runID{c.Job.ID, c.Job.LeaseGeneration}
	p.ended[id] = struct{}{}
	p.endedOrder = append(p.endedOrder, id)
}

// runID names a run: its job and lease generation.
type runID struct {
	job        string
	generation int64
}

// maxEnded bounds the ended runs a pool remembers: far more than end while
// one claim is answered again.
const maxEnded = 1024

// RenewAhead renews the lease of every job the pool holds to last extra
// longer than a lease, and keeps the pool from claiming or renewing until
// resume is called. A virtual clock (sked serve --test-clock) calls it
// before it jumps forward by extra, so that the jump expires no lease of a
// run still going, as renewals all along would have kept them; what the
// pool claims after the jump is leased on the new time. A renewal that
// fails leaves its run to its heartbeat, as any failed renewal does.
func (p *Pool) RenewAhead(ctx context.Context, extra time.Duration) (resume func()) {
	p.leasesMu.Lock()
	p.runsMu.Lock()
	runs := slices.Collect(maps.Values(p.running))
	p.runsMu.Unlock()
	for _, c := range runs {
		if _, err := p.renew(ctx, c, p.cfg.Lease+extra); err != nil && !errors.Is(err, db.ErrStale) {
			p.cfg.Logger.Warn("renew lease ahead of a clock move", "job_id", c.Job.ID, "err", err)
		}
	}
	return p.leasesMu.Unlock
}

// renew renews c's lease for length and records the renewal.
func (p *Pool) renew(ctx context.Context, c *claimed, length time.Duration) (db.Heartbeat, error) {
	sent := clock.Monotonic()
	hb, err := p.cfg.Store.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: c.Job.ID, Generation: c.Job.LeaseGeneration, Lease: length})
	if err == nil {
		c.lease.renew(sent)
	}
	return hb, err
}

// mayBeDue says whether a claim may find a job. It may, unless the last
// claim took every due job and since then only freed slots woke the
// dispatcher: a freed slot makes no job due, so the earliest due time read
// after that claim decides. Without that every finished run would cost a
// claim, a write, that finds nothing.
func (p *Pool) mayBeDue() bool {
	return !p.drained || (p.hasNext && !p.next.After(p.cfg.NowFunc().Add(p.cfg.ClaimAhead)))
}

// readNextDue reads the earliest due time of the pool's types, when the
// last claim took every due job. Without it (no NextDueFunc, or it failed)
// the next freed slot claims again.
func (p *Pool) readNextDue(ctx context.Context) {
	if !p.drained {
		return
	}
	if p.cfg.NextDueFunc == nil {
		p.drained = false
		return
	}
	next, ok, err := p.cfg.NextDueFunc(ctx, p.types)
	p.next, p.hasNext, p.drained = next, ok, err == nil
}

// start runs c on an idle worker goroutine, or on a new one.
func (p *Pool) start(ctx, runCtx context.Context, c *claimed) {
	p.wg.Add(1)
	p.idleMu.Lock()
	if n := len(p.idle); n > 0 {
		next := p.idle[n-1]
		p.idle[n-1] = nil // its worker may yet time out and go
		p.idle = p.idle[:n-1]
		p.idleMu.Unlock()
		next <- c // buffered(1), and emptied before its worker went idle
		return
	}
	p.idleMu.Unlock()
	p.workers.Add(1)
	go p.work(ctx, runCtx, c)
}

// workerIdle is how long a worker goroutine waits for its next run.
const workerIdle = 10 * time.Second

// work runs c, then the runs handed to it, until it has been idle for
// workerIdle or shutdown began. Reused goroutines spare a busy pool a new
// goroutine, and the growth of its stack, for every run. The most recently
// idle worker takes the next run, so that after a spike the workers beyond
// what the pool keeps busy time out rather than share a trickle of runs
// and all stay.
//
// A worker waits for its next run at the bottom of its grown stack
// (waitDeep), or each garbage collection would halve the stack of every
// waiting worker and each next run grow it again: copying stacks was an
// eighth of a busy pool's CPU. An idle worker holds 16 KiB of stack (32
// after a handler that needed more).
func (p *Pool) work(ctx, runCtx context.Context, c *claimed) {
	defer p.workers.Done()
	next := make(chan *claimed, 1)
	idle := time.NewTimer(p.workerIdle)
	defer idle.Stop()
	for {
		p.execute(ctx, runCtx, c)
		idle.Reset(p.workerIdle)
		p.idleMu.Lock()
		p.idle = append(p.idle, next)
		p.idleMu.Unlock()
		handed := false // c is a run handed to this worker
		waitDeep(waitStackKiB, func() {
			select {
			case c = <-next:
				handed = true
			case <-idle.C:
			case <-ctx.Done():
			}
		})
		if !handed && p.leaveIdle(next) {
			return
		}
		if !handed { // start took this worker as it was leaving
			c = <-next
		}
	}
}

// leaveIdle takes next, an idle worker's channel, off the idle list, and
// reports false if start has already taken it to hand it a run.
func (p *Pool) leaveIdle(next chan *claimed) bool {
	p.idleMu.Lock()
	defer p.idleMu.Unlock()
	i := slices.Index(p.idle, next)
	if i < 0 {
		return false
	}
	p.idle = slices.Delete(p.idle, i, i+1)
	return true
}

// execute runs one claimed job and records its outcome. ctx is the
// dispatcher's: once it is done, a job claimed ahead that is not yet due is
// handed back instead of started. A job whose lease may lapse before it has
// run a while (less than half of it certainly left: the claim's answer came
// late) is handed back unrun too.
func (p *Pool) execute(ctx, runCtx context.Context, c *claimed) {
	defer p.wg.Done()
	// The slot is freed when the handler returns: the next job may start
	// while this one's outcome is recorded.
	freed := false
	free := func() {
		if !freed {
			freed = true
			<-p.sem
			signal(p.freed)
		}
	}
	defer free()
	defer p.release(c)

	j := c.Job
	// A job claimed ahead waits until it is due; everything else is made
	// ready before, so that a spike claimed ahead starts at once.
	// A store hands out no job due later than ClaimAhead on its clock: a
	// longer wait would mean NowFunc is behind that clock, and the job due.
	wait := time.Duration(0)
	if j.NextRunAt != nil {
		wait = min(max(j.NextRunAt.Sub(p.cfg.NowFunc()), 0), p.cfg.ClaimAhead)
	}
	job := &Job{
		ID: j.ID, Type: j.Type, Payload: j.Payload, Attempt: j.Attempt, Generation: j.LeaseGeneration,
		IdempotencyKey: j.IdempotencyKey, Output: &Tail{Max: db.OutputTailBytes}, lease: c.lease,
	}
	if j.Slot != nil {
		job.Slot = *j.Slot
	}
	defer c.cancel(nil)
	tctx, cancelTimeout := context.WithDeadline(c.ctx, time.Now().Add(wait).Add(cmp.Or(time.Duration(j.Timeout), db.DefaultTimeout)))
	defer cancelTimeout()

	// The first renewal is due at a third of the lease: a run that ends
	// sooner, as most do, never starts the heartbeat goroutine.
	stopBeat := make(chan struct{})
	beatDone := make(chan struct{})
	left := c.lease.leftAt(c.answered.now())
	beat := time.AfterFunc(max(left-p.cfg.Lease*2/3, 0), func() {
		defer close(beatDone)
		p.heartbeat(c, stopBeat)
	})
	running := !c.late
	if running && wait > 0 {
		// Until it is due, shutdown (not started) or its own end, below.
		waitDeep(waitStackKiB, func() { running = waitFor(ctx, c.ctx, wait) })
		left = c.lease.left()
	}
	start := time.Now()
	// settle stops the renewals and records how the run ended with err.
	settle := func(err error) {
		ended := time.Now()
		// Let runs that are due now start before this one is recorded: when
		// many start at once (a spike), short ones end before the others begin.
		runtime.Gosched()
		close(stopBeat)
		if !beat.Stop() {
			<-beatDone
		}
		free()
		p.record(runCtx, j, outcome(c, j, job, tctx, err), start, ended)
	}
	returned := false
	defer func() {
		if !returned { // the handler ended its goroutine without returning
			settle(errGoexit)
		}
	}()
	err := errNotStartedShutdown
	if running {
		switch cause := context.Cause(c.ctx); {
		case errors.Is(cause, errCancelRequested): // cancel-run while it waited to be due
			err = fmt.Errorf("not started: %w", cause)
		case cause != nil: // its lease lost or about to lapse while it waited
			err = fmt.Errorf("%w: %w", errNotStarted, cause)
		case left < p.cfg.Lease/startLeft:
			err = errLapsed
		default:
			err = safeCall(tctx, p.cfg.Handlers[j.Type], job)
		}
	}
	returned = true
	settle(err)
}

// errGoexit is the end of a handler that ended its goroutine instead of
// returning: runtime.Goexit, as a test's t.FailNow calls.
var errGoexit = errors.New("the handler did not return: it ended its goroutine (runtime.Goexit, as a test's t.FailNow calls)")

// outcome is how the run of c (job j, its handler given job and tctx)
// ended, for a handler that returned err.
func outcome(c *claimed, j db.Job, job *Job, tctx context.Context, err error) db.RunFinishParams {
	fin := db.RunFinishParams{JobID: j.ID, Generation: j.LeaseGeneration, Output: job.Output.String()}
	cause := context.Cause(c.ctx)
	switch {
	case errors.Is(err, errNotStarted), errors.Is(err, errLapsed):
		fin.Outcome, fin.Error = db.OutcomeReleased, err.Error()
	case err == nil:
		fin.Outcome = db.OutcomeSucceeded
	case errors.Is(cause, errLeaseLost), errors.Is(cause, errRenewFailed):
		// Reported all the same, so that the ledger shows the execution;
		// the store refuses it when another generation holds the job.
		fin.Outcome, fin.Retryable, fin.Error = db.OutcomeFailed, true, "stopped: "+cause.Error()+": "+err.Error()
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
	return fin
}

// waitFor waits d, or until run ends; it returns false if ctx ends
// first.
func waitFor(ctx, run context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-run.Done():
		return true
	case <-ctx.Done():
		return false
	}
}

// record records the outcome of j's run, which started at start and ended
// when its handler returned, and logs it. The line says when it ended: a
// command the handler ran was over by then, however long the outcome took
// to record.
func (p *Pool) record(runCtx context.Context, j db.Job, fin db.RunFinishParams, start, ended time.Time) {
	// The outcome is recorded even when shutdown cancelled runCtx, for
	// recordAfterStop more.
	fctx, cancelFinish := context.WithTimeout(context.WithoutCancel(runCtx), max(recordFor, 2*p.cfg.Lease))
	defer cancelFinish()
	stopped := context.AfterFunc(runCtx, func() { time.AfterFunc(recordAfterStop, cancelFinish) })
	defer stopped()
	after, ferr := p.finish(fctx, fin)
	if ferr == nil && after.State == db.StateReady {
		signal(p.recheck)
	}
	level, msg := slog.LevelInfo, "run finished"
	var extra []slog.Attr
	switch {
	case errors.Is(ferr, db.ErrStale):
		level, msg = slog.LevelWarn, "run outcome refused: lease no longer held"
	case ferr != nil:
		level, msg = slog.LevelError, "record run outcome"
		extra = []slog.Attr{slog.Any("err", ferr)}
	case fin.Outcome == db.OutcomeSucceeded:
		extra = []slog.Attr{slog.String("next_state", string(after.State))}
	default:
		level = slog.LevelWarn
		extra = []slog.Attr{slog.String("err", fin.Error), slog.String("next_state", string(after.State))}
	}
	if !p.cfg.Logger.Enabled(runCtx, level) {
		return // a busy pool with a quiet logger builds no line
	}
	if j.Name != "" { // what an operator calls the job
		extra = append(extra, slog.String("name", j.Name))
	}
	p.cfg.Logger.LogAttrs(runCtx, level, msg, append([]slog.Attr{slog.String("job_id", j.ID), slog.String("type", j.Type),
		slog.Int("attempt", j.Attempt), slog.Int64("generation", j.LeaseGeneration), slog.Any("outcome", fin.Outcome),
		slog.Duration("duration", ended.Sub(start).Round(time.Millisecond)), slog.Time("ended", ended)}, extra...)...)
}

// recordFor bounds how long a run's outcome is sent again while the store
// cannot take it (the database is down), or twice the lease when that is
// longer: past the lease, since an outcome the store takes after the lease
// ended (the reaper ended the run meanwhile, and the job may have run
// again) is kept as the run's late outcome, so that the ledger says how
// the execution ended. Shutdown past its grace leaves recordAfterStop of
// it.
const (
	recordFor       = 10 * time.Minute
	recordAfterStop = 10 * time.Second
)

// finish records fin. A failure that sending again cannot mend (a lease
// moved on, a report refused, a job gone) is final; any other (the disk, a
// lock, a server out of reach) is retried with backoff until ctx ends, so
// that an outcome the store did not take is not dropped: within the lease
// it moves the job on, past it it is the run's late outcome. Its failures
// are logged as a failurelog.Log logs them.
func (p *Pool) finish(ctx context.Context, fin db.RunFinishParams) (db.Job, error) {
	wait := 50 * time.Millisecond
	var (
		failures failurelog.Log
		log      *slog.Logger // made at the first failure: most outcomes are recorded at once
	)
	for {
		j, err := p.cfg.Store.RunFinish(ctx, fin)
		if err == nil || errors.Is(err, db.ErrStale) || errors.Is(err, db.ErrInvalid) || errors.Is(err, db.ErrNotFound) {
			return j, err // final: sent again, it would be answered the same
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return db.Job{}, err
		case <-t.C:
		}
		if log == nil {
			log = p.cfg.Logger.With("job_id", fin.JobID, "generation", fin.Generation)
		}
		failures.Failed(log, slog.LevelError, "record run outcome failed; retrying", err)
		wait = min(2*wait, 5*time.Second)
	}
}

// heartbeat renews c's lease at once and then every third of it until stop
// is closed; the pool starts it a third of the lease after the claim. It
// cancels the handler when the lease is lost or cancellation is requested,
// and also when renewals have failed (the store is unreachable) for so long
// that the lease may be about to expire: the pool then gives the run up
// before the reaper can hand the job to another worker. A run's own
// clock.Monotonic bounds its lease from below: a renewal sent at t extends
// it to at least t+Lease on the store's clock.
//
// Margins: renewals fail for half the lease before the run is given up, and
// one renewal may take until five sixths of the lease after the last one
// that succeeded, so the handler always has a sixth of the lease to stop. A
// slow store alone does not lose the lease: renewals taking up to 5/12 of
// it each (back to back, measured from the last success) still succeed.
// A heartbeat that wakes past those five sixths (the process was frozen)
// gives the run up at once; a command's supervisor has killed it by then.
func (p *Pool) heartbeat(c *claimed, stop <-chan struct{}) {
	ctx, cancel := c.ctx, c.cancel
	t := time.NewTicker(p.cfg.Lease / 3)
	defer t.Stop()
	log := p.cfg.Logger.With("job_id", c.Job.ID, "generation", c.Job.LeaseGeneration)
	for {
		stopBy, _ := c.lease.stopBy()
		left := stopBy - clock.Monotonic()
		if left <= 0 {
			log.Warn("lease may lapse before a renewal could land; stopping the run")
			cancel(errLeaseLost)
			return
		}
		bctx, cancelBeat := context.WithTimeout(context.WithoutCancel(ctx), left)
		p.leasesMu.RLock()
		hb, err := p.renew(bctx, c, p.cfg.Lease)
		p.leasesMu.RUnlock()
		cancelBeat()
		switch {
		case errors.Is(err, db.ErrStale):
			log.Warn("lease lost: another worker may hold the job; stopping the run")
			cancel(errLeaseLost)
			return
		case err != nil && c.lease.left() <= p.cfg.Lease/2:
			log.Warn("heartbeat failed until the lease may expire; giving the run up", "err", err)
			cancel(errRenewFailed)
			return
		case err != nil:
			// The lease is still live; try again at the next tick.
			log.Warn("heartbeat", "err", err)
		case hb.CancelRequested:
			cancel(errCancelRequested)
		}
		select {
		case <-stop:
			return
		case <-t.C:
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

// waitStackKiB is how much stack, in KiB, waitDeep holds for a job
// claimed ahead and for a worker waiting for its next run: with the frames
// below it, the goroutine's stack grows to 16 KiB, room for a short handler
// and for recording its outcome.
const waitStackKiB = 7

// waitDeep calls wait about kib KiB deeper in the calling goroutine's stack
// than it is now, so that the stack is grown (and its memory touched)
// before wait and stays grown while wait blocks: a garbage collection
// halves the stack of a goroutine that uses less than a quarter of it. A
// job claimed ahead waits on a goroutine of its own until it is due;
// growing that stack while the job waits, rather than when its handler
// first needs the room, takes the copying and the first touch of fresh
// memory out of the instant it falls due. When thousands fall due
// together, that growth was most of the work of starting them. An idle
// worker waits for its next run so too (see work).
//
//go:noinline
func waitDeep(kib int, wait func()) byte {
	var frame [1 << 10]byte
	frame[kib] = byte(kib) // a store the compiler cannot drop keeps the frame
	if kib <= 1 {
		wait()
		return frame[kib]
	}
	return waitDeep(kib-1, wait) + frame[kib]
}
