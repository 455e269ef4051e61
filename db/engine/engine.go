// Package engine is sked's job lifecycle, written once for every database.
// It implements db.Store over a Dialect: create, claim, heartbeat, finish,
// reap, the operator's controls and the sweeps are decided here (with the
// pure decisions of package lifecycle) and orchestrated here, inside one
// transaction each; a Dialect supplies only the transactions and the
// statements, as its own SQL text and scanning.
//
// Every transition follows one pattern: read the rows it changes inside the
// transaction (a Dialect holds them against other writers until it ends),
// decide in Go, and write the rows back with statements fenced by the state
// and lease generation that were read, so that a write can never land on a
// lease that moved on. The rows the engine returns are built in Go, as the
// database now holds them, rather than read back.
//
// Completions are committed in groups (commit.go): concurrent RunFinish
// calls are queued to one committer, which finishes every queued call in one
// transaction and answers each with its own result once it is durable.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sked-dev/sked/clock"
	"github.com/sked-dev/sked/db"
)

// Dialect is one database's side of the engine: its transactions and, in
// Reader and Tx, its statements.
type Dialect interface {
	Reader
	// InTx runs fn in a write transaction, once, and commits it when fn
	// returns nil, else rolls it back. now is the clock of the transaction's
	// times; nil means the database's own, read once as the transaction
	// starts. A write that cannot take the database's lock in time fails
	// with db.ErrBusy, one that finds no space with db.ErrStorageFull.
	InTx(ctx context.Context, now func() time.Time, fn func(Tx) error) error
	// Now reads the database's clock (used when the engine has none).
	Now(ctx context.Context) (time.Time, error)
	// Precision is the resolution at which the database keeps times; the
	// engine rounds the times of the rows it builds to it.
	Precision() time.Duration
	// Close releases the database's connections.
	Close() error
}

// QuickClaimer is a Dialect that can claim in a transaction whose COMMIT
// it sends with the claim, one round trip where RunClaim's transaction
// takes two. Of the jobs Tx.JobsClaim would claim (the earliest due a.Max)
// it claims those that need no writes after their claims
// (quickClaimable), and none when the transaction's clock lies outside q
// (the claim's worker is then to be recorded). rest says it left some to
// the ordinary claim: a job that needs writes after its claim (the
// misfire policy, a ping) was among them, or the clock lay outside q.
// The ordinary claim of the rest, a.Max less the claims, then takes
// those: the earliest due that are left. now is as InTx's.
type QuickClaimer interface {
	ClaimQuick(ctx context.Context, now func() time.Time, a ClaimArgs, q Quiet) (claims []db.Claim, rest bool, err error)
}

// Quiet is a span of the store's clock, From (inclusive) to Until
// (exclusive); a zero bound is open.
type Quiet struct{ From, Until time.Time }

// holds reports whether t lies in q.
func (q Quiet) holds(t time.Time) bool {
	return (q.From.IsZero() || !t.Before(q.From)) && (q.Until.IsZero() || t.Before(q.Until))
}

// Reader is what a Dialect reads outside a transaction.
type Reader interface {
	// JobGet returns db.ErrNotFound if the job does not exist.
	JobGet(ctx context.Context, id string) (db.Job, error)
	// JobNextDue, Stats and Ready: see db.Store. Ready checks the
	// database itself; the Store adds what its writes saw (see health).
	JobNextDue(ctx context.Context, types []string) (time.Time, bool, error)
	Stats(ctx context.Context, now time.Time) (db.Stats, error)
	Ready(ctx context.Context) error

	// JobByName returns the job of that name that is not cancelled, else
	// the newest cancelled one; db.ErrNotFound if there is none.
	JobByName(ctx context.Context, name string) (db.Job, error)
	// EventsPage returns up to limit events of job with an id below
	// before, newest first.
	EventsPage(ctx context.Context, job string, before int64, limit int) ([]db.Event, error)
	// EventsAfter returns up to limit events of kinds (any, if none)
	// after the event of id after; see db.Store.
	EventsAfter(ctx context.Context, after int64, kinds []string, limit int) ([]db.Event, error)

	// JobsPage returns up to limit jobs matching p's State and Type with
	// an id below p.Cursor (any id when empty), newest first.
	JobsPage(ctx context.Context, p db.JobListParams, limit int) ([]db.Job, error)
	// RunsPage returns up to limit runs of job with an id below before,
	// newest first.
	RunsPage(ctx context.Context, job string, before int64, limit int) ([]db.Run, error)
	// RunsLive returns the running runs of the leases' jobs, in any order.
	// It may also return those of other generations of the jobs: the
	// engine keeps the leases' own.
	RunsLive(ctx context.Context, leases []Lease) ([]db.Run, error)
	// RunStarts reads what RunActivity summarises: how many runs (not
	// missed slots) finished in (p.From, p.To], and the first attempts
	// (not of backfills) that started in it, newest first, at most p.MaxLateness; both among
	// the newest p.Scan runs.
	RunStarts(ctx context.Context, p db.RunActivityParams) (finished int64, starts []Start, err error)
	// Workers: see db.Store.
	Workers(ctx context.Context, since time.Time) ([]db.Worker, error)
}

// Start is a first attempt's start, for the lateness of RunActivity.
type Start struct {
	JobID   string
	Slot    time.Time
	Started time.Time
	Jitter  time.Duration // the job's
}

// Tx is a write transaction's statements. Its reads hold the rows they
// return against other writers until the transaction ends (SQLite's one
// writer holds the whole database; PostgreSQL locks the rows).
type Tx interface {
	// Now is the transaction's clock: every time it writes comes from it.
	Now() time.Time

	// JobsInsert inserts jobs, except those whose idempotency key a job
	// that is not cancelled holds, and reports which it inserted. A name
	// such a job holds fails the call.
	JobsInsert(ctx context.Context, jobs []db.Job) (inserted []bool, err error)
	// JobsByKey returns the jobs that are not cancelled and hold keys, in
	// any order.
	JobsByKey(ctx context.Context, keys []string) ([]db.Job, error)
	// JobsByName returns the jobs that are not cancelled and hold names,
	// in any order.
	JobsByName(ctx context.Context, names []string) ([]db.Job, error)
	// JobLock reads job id; db.ErrNotFound if it does not exist.
	JobLock(ctx context.Context, id string) (db.Job, error)
	// JobLockName reads the job of that name that is not cancelled;
	// db.ErrNotFound if there is none.
	JobLockName(ctx context.Context, name string) (db.Job, error)
	// JobsLeased reads, for update, the jobs that leases name, in any
	// order. It may also return them in another state or generation, or
	// with their lease ended: the engine judges which leases are live.
	JobsLeased(ctx context.Context, leases []Lease) ([]db.Job, error)
	// JobsExpired reads up to limit running jobs whose lease ended before
	// Now, the longest expired first, passing over rows another
	// transaction holds.
	JobsExpired(ctx context.Context, limit int) ([]db.Job, error)
	// JobsPauseOver reads up to limit paused jobs whose pause ends at or
	// before Now, passing over rows another transaction holds.
	JobsPauseOver(ctx context.Context, limit int) ([]db.Job, error)
	// JobsWatched reads the ready and running recurring jobs with a
	// dead-man's switch that may go quiet at Now: those not quiet whose
	// window (db.Job.WatchedFrom) ran out at or before Now, and on SQLite
	// those within a second of it (lifecycle.GoesQuiet decides), passing
	// over rows another transaction holds. With all it reads every one,
	// quiet or not, and waits for the rows others hold (JobWatchStart
	// must start every window again, also that of a schedule being claimed
	// as it runs).
	JobsWatched(ctx context.Context, all bool) ([]db.Job, error)
	// SweptAt reads when a quiet sweep last recorded that it watched
	// (SetSweptAt); the zero time if none ever did.
	SweptAt(ctx context.Context) (time.Time, error)
	// SetSweptAt records that a quiet sweep watched at at.
	SetSweptAt(ctx context.Context, at time.Time) error
	// JobsClaim leases up to a.Max ready jobs of a.Types (any, if none)
	// due by now+a.Ahead, earliest due first, passing over rows another
	// transaction holds: state running, lease owner a.Worker until
	// now+a.Lease, generation and attempt one up, cancel request cleared,
	// updated at the claim's time: the later of Now and the job's
	// updated_at (a statement that runs after Now was read can see a
	// change committed after it, such as the reaper ending the previous
	// run; the new run must not start before that). In the same statement
	// or transaction it writes the running run of each: the job's slot,
	// attempt and generation, worker a.Worker, started at the later of the
	// claim's time and the job's due time; for a triggered job (an
	// operator's extra run) the slot is the claim's time and the reason
	// db.ReasonManual. It returns the jobs as leased, with their run ids,
	// in any order. It may read, and hold, up to a.Max of each type's
	// earliest due jobs to pick the earliest a.Max of all.
	JobsClaim(ctx context.Context, a ClaimArgs) ([]db.Claim, error)
	// JobsUpdate writes the lifecycle columns of each job (state, times,
	// attempt, lease, marks and counters; not its definition), each only
	// if the row is still in state From with the job's lease generation.
	// A row that is not fails the call.
	JobsUpdate(ctx context.Context, us []JobUpdate) error
	// JobRedefine writes a job's definition (name, payload, schedule,
	// timezone, attempts, timeout, backoff, jitter, policies, switch,
	// notify; not its request hash, which stays the creating request's)
	// and its slot, due time, attempt, missed slots and updated_at, fenced
	// as JobsUpdate.
	JobRedefine(ctx context.Context, u JobUpdate) error
	// EventsInsert inserts events.
	EventsInsert(ctx context.Context, events []db.Event) error

	// RunsInsert inserts runs and returns their ids, in order.
	RunsInsert(ctx context.Context, runs []db.Run) ([]int64, error)
	// RunsDelete deletes runs by id.
	RunsDelete(ctx context.Context, ids []int64) error
	// RunsEnd closes the running run of each lease: outcome, error,
	// output, gave-up, finished at Now, and started no later than that (a
	// run claimed ahead and handed back before it was due never started).
	RunsEnd(ctx context.Context, ends []RunEnd) error
	// RunsLate records on the run of each lease, unless it has one, the
	// outcome its worker reported after the lease had moved on: late
	// outcome, late error, late finished at Now. Which runs take one the
	// engine decides (takesLate); the first one recorded stays.
	RunsLate(ctx context.Context, ends []RunEnd) error
	// RunLive reads the running run of a job's lease generation;
	// db.ErrNotFound if there is none.
	RunLive(ctx context.Context, job string, generation int64) (db.Run, error)
	// RunsOf reads the run of each lease, whatever its outcome, in any
	// order; a lease without a run has none in the result.
	RunsOf(ctx context.Context, leases []Lease) ([]db.Run, error)
	// RunsSkippedAhead reads the ids of a job's missed runs of slots after
	// a time (skipped ahead: JobSkipNext), among its newest LedgerLookback
	// runs.
	RunsSkippedAhead(ctx context.Context, job string, after time.Time) ([]int64, error)
	// RunsSucceeded returns which of slots have a succeeded run of job.
	RunsSucceeded(ctx context.Context, job string, slots []time.Time) ([]time.Time, error)

	// Heartbeat extends the live lease of a job to until, never shortening
	// it (a renewal whose transaction began before another's may commit
	// after it), and reports whether cancellation was requested and the
	// lease's end as it now is; db.ErrNotFound when generation does not
	// hold a live lease at Now.
	Heartbeat(ctx context.Context, job string, generation int64, until time.Time) (cancelRequested bool, leaseUntil time.Time, err error)
	// Prune deletes history as db.Store.Prune says. It looks at the runs
	// with an id below runsBelow only (see runsCeiling): none of the rest
	// can have finished before p.Before.
	Prune(ctx context.Context, p db.PruneParams, runsBelow int64) (db.Pruned, error)
	// RunStartedFrom reads the id and start of the first run with an id of
	// at least id that has a start (a missed slot has none); ok is false
	// when there is none.
	RunStartedFrom(ctx context.Context, id int64) (run int64, started time.Time, ok bool, err error)
	// WorkerSeen forgets the workers last seen before forget, passing over
	// rows another transaction holds and w.ID's, then records that worker
	// w.ID claimed at Now with w.Types: a new worker is first seen then; a
	// known one takes the types and is last seen then.
	WorkerSeen(ctx context.Context, w db.Worker, forget time.Time) error
	// WorkerStopped records that worker id stopped at Now, if it has a
	// record; WorkerSeen clears it.
	WorkerStopped(ctx context.Context, id string) error
	// Notify wakes, when the transaction commits, the dispatchers of every
	// process sharing the database (PostgreSQL's NOTIFY), telling them how
	// many jobs of each type became due; a no-op where one process owns the
	// database.
	Notify(ctx context.Context, due map[string]int) error
}

// Lease names a job's lease.
type Lease struct {
	JobID      string
	Generation int64
}

// ClaimArgs is what Tx.JobsClaim leases.
type ClaimArgs struct {
	Worker string
	Types  []string
	Max    int
	// The lease's length and how far ahead of the transaction's clock
	// jobs may be due, both from that clock: the dialect reads it with the
	// claim, which then needs no reading of its own before.
	Lease time.Duration
	Ahead time.Duration
}

// JobUpdate is a job row to write, fenced by the state it was read in (From)
// and its lease generation.
type JobUpdate struct {
	Job  db.Job
	From db.JobState
}

// RunEnd is how the run of a lease ended. Its Error and Output are valid
// UTF-8 without NUL bytes, as every store keeps them.
type RunEnd struct {
	Lease
	Outcome db.Outcome
	Error   string
	Output  string
	GaveUp  bool
}

// Config configures a Store. Zero values mean the defaults.
type Config struct {
	Dialect Dialect // never nil
	// NowFunc is the store's clock; nil means the database's own.
	NowFunc func() time.Time
	// YieldToClaims makes completions wait for claims in flight (see
	// committer.yieldToClaims): right where one connection takes every
	// write, as on SQLite.
	YieldToClaims bool
}

// Defaults of the misfire settings.
const (
	DefaultMisfireGrace  = time.Minute
	DefaultCatchUpWindow = 24 * time.Hour
)

// LedgerLookback is how many of a job's newest runs Tx.RunsSkippedAhead
// reads: a slot ahead of now is written as it is settled (a skip writes
// its slot as it skips it), so such slots are among the newest, and the
// read stays small for a job with a long history.
const LedgerLookback = 1000

var _ db.Store = (*Store)(nil)

// Store is db.Store over a Dialect.
type Store struct {
	// NowFunc is the store's clock; nil means the database's own. Tests
	// replace it before use.
	NowFunc func() time.Time
	// ClockGuard, when set, is the clock NowFunc reads through: while it
	// holds after a backward step RunClaim claims nothing, and slots that a
	// forward step jumped over are recorded missed as clock_step.
	ClockGuard *clock.Guard
	// RandFunc draws the backoff jitter in [0,1); tests replace it. Never
	// nil.
	RandFunc func() float64
	// MisfireGrace is how late a recurring slot may start before it counts
	// as misfired (see db.MisfireSkip).
	MisfireGrace time.Duration
	// CatchUpWindow bounds db.MisfireRunAll: slots older than this are
	// recorded missed instead of replayed.
	CatchUpWindow time.Duration
	// DefaultsFunc gives the attempts and backoff of a job of a type that
	// does not say; nil means db.DefaultsFor.
	DefaultsFunc func(typ string) db.Defaults
	// Logger receives a warning for each job set aside because its stored
	// schedule no longer parses; nil discards them.
	Logger *slog.Logger
	// EventsFunc, when set, is called after a transaction that wrote
	// events the notifier tells (db.OutboxKinds: its outbox) commits, so
	// that they are told at once rather than at the next sweep. Set it
	// before use.
	EventsFunc func()

	d     Dialect
	yield bool

	// reading is the database's clock as last read (nil: never), reads
	// is held by the one call of Now that reads it again, and tries
	// counts the readings tried, done or failed. See Now.
	reading atomic.Pointer[clockReading]
	reads   sync.Mutex
	tries   atomic.Uint64

	health health

	finishes chan *finishReq // RunFinish calls waiting for the committer
	// claiming counts the RunClaim calls in flight, and moreUntil is until
	// when (on the monotonic clock, since epoch) another claim is expected
	// because the last one came back full and said More; the committer lets
	// claims go first.
	claiming   atomic.Int32
	epoch      time.Time
	moreUntil  atomic.Int64
	claimsDone chan struct{} // buffered(1): a claim returned
	quit       chan struct{} // closed by Close: the committer stops
	quitOnce   sync.Once
	stopped    chan struct{} // closed when the committer has returned

	seen seenWorkers
	// unquick is set while some due jobs need writes after their claims,
	// so that RunClaim does not try ClaimQuick first; see claimQuick.
	unquick atomic.Bool
}

// New returns a Store over cfg.Dialect and starts its committer; Close stops
// it. It panics without a dialect: that is a wiring mistake.
func New(cfg Config) *Store {
	if cfg.Dialect == nil {
		panic("engine: New needs a dialect")
	}
	s := &Store{
		NowFunc:       cfg.NowFunc,
		RandFunc:      rand.Float64,
		MisfireGrace:  DefaultMisfireGrace,
		CatchUpWindow: DefaultCatchUpWindow,
		d:             cfg.Dialect,
		yield:         cfg.YieldToClaims,
		finishes:      make(chan *finishReq, maxGroup),
		claimsDone:    make(chan struct{}, 1),
		quit:          make(chan struct{}),
		stopped:       make(chan struct{}),
		epoch:         time.Now(),
	}
	s.health.now = s.Now
	go s.commitLoop()
	return s
}

// Close stops the committer, after it has answered the queued completions,
// and closes the dialect. Closing again does nothing more.
func (s *Store) Close() error {
	var err error
	s.quitOnce.Do(func() {
		close(s.quit)
		<-s.stopped
		err = s.d.Close()
	})
	return err
}

// Now is the store's clock, in UTC: NowFunc, else the database's. The
// database's is read at most every clockRefresh, and this machine's
// monotonic clock carries the last reading in between, so that a step of
// this machine's wall clock moves neither Now nor when it is read again. Now
// is advice (the dispatcher sleeps by it, a worker waits for a job claimed
// ahead by it); what is written always takes the transaction's clock.
func (s *Store) Now() time.Time {
	if s.NowFunc != nil {
		return s.NowFunc().UTC()
	}
	r := s.reading.Load()
	if r == nil || time.Since(r.local) > clockRefresh {
		r = s.readClock(r)
	}
	if r == nil {
		return time.Now().UTC() // the database has not answered yet
	}
	return r.db.Add(time.Since(r.local)).UTC()
}

// readClock reads the database's clock again for a caller of Now that
// found last, the reading it loaded, out of date, unless another caller is
// reading it: then last, carried a little longer, serves (a busy pool's
// workers all ask at once, and each asking took a connection from the
// claims and completions). Only without any reading does a caller wait
// for another's, and takes its outcome: one that failed (the database out
// of reach) is not tried again by each waiter in turn, a timeout each. It
// returns the newest reading, nil if there is none.
func (s *Store) readClock(last *clockReading) *clockReading {
	tried := s.tries.Load()
	if last == nil {
		s.reads.Lock()
	} else if !s.reads.TryLock() {
		return last
	}
	defer s.reads.Unlock()
	if r := s.reading.Load(); r != last || s.tries.Load() != tried {
		return r // read, or tried, by another caller meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t, err := s.d.Now(ctx)
	cancel()
	s.tries.Add(1)
	if err != nil {
		return last
	}
	// The reading stands for the end of the call: the database read its
	// clock at some moment of it (after a wait for a pooled connection,
	// perhaps), so carried from the end it is never ahead of that clock,
	// and a job claimed ahead starts late by at most the call, never
	// early.
	r := &clockReading{db: t, local: time.Now()}
	s.reading.Store(r)
	return r
}

// clockReading is a reading of the database's clock.
type clockReading struct {
	db    time.Time // the database's clock
	local time.Time // this machine's at the same instant, with its monotonic reading
}

// clockRefresh is how often Now reads the database's clock.
const clockRefresh = time.Second

// UseClock makes g the store's clock: NowFunc reads through it, claims hold
// while it holds, and slots it jumped over are recorded as clock_step.
func (s *Store) UseClock(g *clock.Guard) {
	s.NowFunc, s.ClockGuard = g.Now, g
}

// inTx runs fn in a write transaction on the store's clock. Its outcome
// tells the store's health: a committed transaction that wrote shows the
// disk has room again (a claim that found nothing, and did not record its
// worker, wrote nothing).
func (s *Store) inTx(ctx context.Context, fn func(Tx) error) error {
	wrote := true
	var news *newsTx
	err := s.d.InTx(ctx, s.txClock(), func(tx Tx) error {
		news = &newsTx{Tx: tx}
		err := fn(news)
		if errors.Is(err, errNothingWritten) {
			wrote, err = false, nil
		}
		return err
	})
	s.health.saw(err, wrote)
	if err == nil && news.events && s.EventsFunc != nil {
		s.EventsFunc()
	}
	return err
}

// txClock is the clock of a transaction's times (see Dialect.InTx): the
// store's when one is injected, else nil, the database's own.
func (s *Store) txClock() func() time.Time {
	if s.NowFunc != nil {
		return s.Now
	}
	return nil
}

// newsTx is a transaction of inTx that notes whether it wrote news to tell
// once it commits (see Store.EventsFunc).
type newsTx struct {
	Tx
	events bool // it wrote events of the outbox
}

// EventsInsert inserts events, noting those of the outbox.
func (t *newsTx) EventsInsert(ctx context.Context, events []db.Event) error {
	for _, e := range events {
		t.events = t.events || slices.Contains(db.OutboxKinds, e.Kind)
	}
	return t.Tx.EventsInsert(ctx, events)
}

// errNothingWritten is what a transaction's fn returns to commit having
// written nothing (see inTx).
var errNothingWritten = errors.New("nothing written")

// JobNextDue returns when the earliest ready job of types is due; see
// db.Store.
func (s *Store) JobNextDue(ctx context.Context, types []string) (time.Time, bool, error) {
	t, ok, err := s.d.JobNextDue(ctx, types)
	s.health.saw(err, false)
	return t, ok, err
}

// Stats reads the queue statistics; see db.Store.
func (s *Store) Stats(ctx context.Context, now time.Time) (db.Stats, error) {
	st, err := s.d.Stats(ctx, now)
	s.health.saw(err, false)
	return st, err
}

// Ready reports the database not ready while its disk is full (the last
// writes failed for space) or after it was found corrupt, and otherwise
// asks the database itself; see db.Store.
func (s *Store) Ready(ctx context.Context) error {
	if err := s.health.err(); err != nil {
		return err
	}
	err := s.d.Ready(ctx)
	s.health.saw(err, false)
	return err
}

// health is what the store's own reads and writes saw of the database:
// since when writes fail for space, and the first sign of corruption.
type health struct {
	fullSince atomic.Int64          // UnixNano of the first write refused for space since one succeeded; 0: none
	corrupt   atomic.Pointer[error] // the first corruption seen; never cleared
	now       func() time.Time      // the store's clock
}

// saw records err, the outcome of a read or (wrote) a write that wrote.
func (h *health) saw(err error, wrote bool) {
	switch {
	case errors.Is(err, db.ErrCorrupt):
		h.corrupt.CompareAndSwap(nil, &err)
	case errors.Is(err, db.ErrStorageFull):
		if !h.full() {
			h.fullSince.CompareAndSwap(0, h.now().UnixNano())
		}
	case err == nil && wrote:
		h.fullSince.Store(0)
	}
}

// full says whether writes fail for lack of space.
func (h *health) full() bool { return h.fullSince.Load() != 0 }

// err is why the database is not ready, or nil.
func (h *health) err() error {
	if c := h.corrupt.Load(); c != nil {
		return fmt.Errorf("the database was found damaged (%w); stop sked and run `sked check --db FILE`, then restore a backup", *c)
	}
	if at := h.fullSince.Load(); at != 0 {
		return fmt.Errorf("%w: writes have failed for lack of space since %s; free space on the disk that holds it",
			db.ErrStorageFull, time.Unix(0, at).UTC().Format(time.RFC3339))
	}
	return nil
}

// stored is t as the database keeps it: UTC at its precision.
func (s *Store) stored(t time.Time) time.Time {
	return t.UTC().Truncate(s.d.Precision())
}

// storedPtr is stored(t), or nil for the zero time.
func (s *Store) storedPtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = s.stored(t)
	return &t
}

// wrap adds what was attempted to err, leaving the errors callers branch on
// (not found, a conflict, bad input, a stale lease) as they are.
func wrap(err error, format string, args ...any) error {
	var conflict *db.ConflictError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, db.ErrNotFound), errors.Is(err, db.ErrStale), errors.Is(err, db.ErrInvalid), errors.As(err, &conflict):
		return err
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
