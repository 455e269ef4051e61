// Package bench measures sked through its real parts (the store,
// worker.Pool, the HTTP API) on temporary databases, SQLite files or fresh
// schemas on a PostgreSQL server with one or more nodes: throughput of the whole
// path, start lateness of a spike of jobs due at one instant, the same spike
// with a large backlog of future jobs, memory, and the HTTP paths. `sked
// bench` prints its Report; the Go benchmarks in bench_test.go call the same
// functions.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/worker"
)

// Config sizes the runs. Zero values mean the defaults.
type Config struct {
	Jobs    int    // throughput: jobs enqueued, claimed and completed; default 50,000
	Spike   int    // jobs due at the same instant; default 2,000
	Backlog int    // future jobs waiting during the backlog spike; default 1,000,000
	Workers int    // pool slots of the throughput runs; default 256 (a spike gets at least Spike)
	Batch   int    // jobs per enqueue batch; default db.MaxBatch
	Dir     string // where the temporary databases go; default os.TempDir()
	Sync    string // SQLite synchronous: FULL (default) or NORMAL
	DB      string // a postgres:// URL to measure PostgreSQL instead of SQLite; each run gets a schema of its own
	Nodes   int    // PostgreSQL only: stores, each with its own connection pool and worker.Pool; default 1
}

func (c Config) withDefaults() Config {
	c.Jobs = cmp.Or(c.Jobs, 50_000)
	c.Spike = cmp.Or(c.Spike, 2_000)
	c.Backlog = cmp.Or(c.Backlog, 1_000_000)
	c.Workers = cmp.Or(c.Workers, 256)
	c.Batch = min(cmp.Or(c.Batch, db.MaxBatch), db.MaxBatch)
	c.Dir = cmp.Or(c.Dir, os.TempDir())
	c.Sync = strings.ToUpper(cmp.Or(c.Sync, "FULL"))
	c.Nodes = cmp.Or(c.Nodes, 1)
	return c
}

// noopType is the job type every benchmark job has.
const noopType = "noop"

// env is one temporary database and its stores: one on SQLite, one per
// node on PostgreSQL. stores[0] enqueues and serves HTTP.
type env struct {
	stores []db.Store
	dir    string // SQLite: the temporary directory
	path   string // SQLite: the database file
	pg     *pgEnv // PostgreSQL: the schema; nil on SQLite
}

func openEnv(ctx context.Context, cfg Config) (*env, error) {
	if cfg.DB != "" {
		return openPostgres(ctx, cfg)
	}
	dir, err := os.MkdirTemp(cfg.Dir, "sked-bench-")
	if err != nil {
		return nil, fmt.Errorf("make temporary directory: %w", err)
	}
	path := filepath.Join(dir, "sked.db")
	s, err := sqlite.OpenWith(ctx, path, sqlite.Options{Synchronous: cfg.Sync})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &env{stores: []db.Store{s}, dir: dir, path: path}, nil
}

// size is the bytes of the database file and its WAL, or of the schema's
// tables and indexes.
func (e *env) size(ctx context.Context) int64 {
	if e.pg != nil {
		return e.pg.size(ctx)
	}
	var n int64
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(e.path + suffix); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func (e *env) close() error {
	var errs []error
	for _, s := range e.stores {
		errs = append(errs, s.Close())
	}
	if e.pg != nil {
		errs = append(errs, e.pg.drop(context.Background()))
	} else {
		errs = append(errs, os.RemoveAll(e.dir))
	}
	return errors.Join(errs...)
}

// node is what one worker.Pool runs over: its store and the dispatcher's
// next due time and clock.
type node struct {
	store   worker.Store
	nextDue func(context.Context, []string) (time.Time, bool, error)
	now     func() time.Time
}

// nodes is one node per store of e.
func (e *env) nodes() []node {
	ns := make([]node, len(e.stores))
	for i, s := range e.stores {
		ns[i] = node{store: s, nextDue: s.JobNextDue, now: s.Now}
	}
	return ns
}

// enqueue creates n no-op jobs due at runAt (zero: now) in batches of
// batch, one transaction each, and returns how long it took. afterBatch, if
// not nil, is called after each batch.
func enqueue(ctx context.Context, s db.BatchCreator, n, batch int, runAt time.Time, afterBatch func()) (time.Duration, error) {
	start := time.Now()
	ps := make([]db.JobCreateParams, 0, batch)
	for done := 0; done < n; done += len(ps) {
		ps = ps[:0]
		for range min(batch, n-done) {
			ps = append(ps, db.JobCreateParams{Type: noopType, RunAt: runAt})
		}
		if _, err := s.JobCreateBatch(ctx, ps); err != nil {
			return 0, fmt.Errorf("enqueue: %w", err)
		}
		if afterBatch != nil {
			afterBatch()
		}
	}
	return time.Since(start), nil
}

// counter counts the completions recorded through the stores it wraps:
// done closes when want runs have been recorded.
type counter struct {
	want int64
	n    atomic.Int64
	last atomic.Int64 // time.Now().UnixNano() of the latest recorded completion
	done chan struct{}
}

func newCounter(want int) *counter {
	return &counter{want: int64(want), done: make(chan struct{})}
}

// counted is a pool's store with its completions counted by c.
type counted struct {
	worker.Store
	c *counter
}

// RunFinish records the completion in the store and counts it.
func (s counted) RunFinish(ctx context.Context, p db.RunFinishParams) (db.Job, error) {
	j, err := s.Store.RunFinish(ctx, p)
	if err == nil {
		s.c.last.Store(time.Now().UnixNano())
		if s.c.n.Add(1) == s.c.want {
			close(s.c.done)
		}
	}
	return j, err
}

// wait blocks until every run is recorded, or fails after timeout.
func (c *counter) wait(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("%d of %d runs recorded after %s", c.n.Load(), c.want, timeout)
	}
}

// runPools runs one pool per node, slots shared between them, with handler
// h and completions counted by c, until stop is called; stop returns when
// every pool has shut down. A node whose store has wake-ups wakes its pool
// with them, as sked serve does.
func runPools(c *counter, nodes []node, slots int, h worker.HandlerFunc) (pools []*worker.Pool, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, n := range nodes {
		pool := worker.NewPool(worker.PoolConfig{
			Store: counted{Store: n.store, c: c}, Handlers: map[string]worker.HandlerFunc{noopType: h},
			WorkerID: fmt.Sprintf("bench-%d", i), Slots: slots/len(nodes) + min(1, max(0, slots%len(nodes)-i)),
			NextDueFunc: n.nextDue, NowFunc: n.now,
		})
		pools = append(pools, pool)
		wg.Go(func() { pool.Run(ctx) })
		if w, ok := n.store.(*postgres.Store); ok {
			wg.Go(func() {
				for range w.Wakeups(ctx) {
					pool.Wake()
				}
			})
		}
	}
	return pools, func() { cancel(); wg.Wait() }
}

// noop is the handler of the throughput runs.
func noop(context.Context, *worker.Job) error { return nil }

// Throughput is the result of the throughput run.
type Throughput struct {
	Jobs     int
	Enqueue  time.Duration // creating the jobs in batches
	Run      time.Duration // claiming and completing them all with the pool
	PeakRSS  int64         // bytes
	Workers  int
	BatchLen int
}

// RunThroughput enqueues cfg.Jobs no-op jobs in batches, then claims and
// completes them all with a worker.Pool of cfg.Workers slots.
func RunThroughput(ctx context.Context, cfg Config) (Throughput, error) {
	cfg = cfg.withDefaults()
	resetPeakRSS()
	e, err := openEnv(ctx, cfg)
	if err != nil {
		return Throughput{}, err
	}
	defer e.close()
	r := Throughput{Jobs: cfg.Jobs, Workers: cfg.Workers, BatchLen: cfg.Batch}
	if r.Enqueue, err = enqueue(ctx, e.stores[0], cfg.Jobs, cfg.Batch, time.Time{}, nil); err != nil {
		return r, err
	}
	c := newCounter(cfg.Jobs)
	start := time.Now()
	_, stop := runPools(c, e.nodes(), cfg.Workers, noop)
	err = c.wait(ctx, 10*time.Minute)
	r.Run = time.Since(start)
	stop()
	r.PeakRSS = peakRSS()
	return r, err
}

// Spike is the result of a spike run.
type Spike struct {
	Jobs       int
	Backlog    int
	Lateness   []time.Duration // start minus due of every run, sorted
	LastFinish time.Duration   // the last recorded completion minus due
	PeakRSS    int64
	DBSize     int64 // bytes of the database file and WAL at the end
}

// Percentile returns the p-th percentile (0–100) of the start lateness.
func (s Spike) Percentile(p float64) time.Duration {
	if len(s.Lateness) == 0 {
		return 0
	}
	i := min(len(s.Lateness)-1, int(float64(len(s.Lateness))*p/100))
	return s.Lateness[i]
}

// Spikes are the two spikes of RunSpikes, run on one database.
type Spikes struct {
	Ahead Spike // due a moment after they are created
	Now   Spike // due as they are created
}

// RunSpikes starts a pool with at least cfg.Spike free slots, with backlog
// jobs waiting a day or more in the future, then measures when each of
// cfg.Spike jobs due at the same instant starts and when the last is
// recorded, twice: first with the jobs created a moment before they are
// due, then with them due as they are created, in batches of cfg.Batch
// (their lateness counts from their creation, and the pool hears of each
// batch as sked serve's does from POST /jobs/batch, so that nothing of them
// is known ahead).
func RunSpikes(ctx context.Context, cfg Config, backlog int) (Spikes, error) {
	cfg = cfg.withDefaults()
	resetPeakRSS()
	e, err := openEnv(ctx, cfg)
	if err != nil {
		return Spikes{}, err
	}
	defer e.close()
	if err := e.insertBacklog(ctx, backlog); err != nil {
		return Spikes{}, err
	}
	var r Spikes
	// The jobs are due far enough ahead that every batch is in before they
	// are due; should enqueueing overrun the lead, the spike is run again
	// on the same database with a longer one.
	for lead := 500 * time.Millisecond; ; lead *= 4 {
		late, last, ok, err := spikeOnce(ctx, e, cfg, lead)
		if err != nil {
			return r, err
		}
		if ok {
			r.Ahead = Spike{Jobs: cfg.Spike, Backlog: backlog, Lateness: late, LastFinish: last}
			break
		}
	}
	late, last, _, err := spikeOnce(ctx, e, cfg, 0)
	if err != nil {
		return r, err
	}
	r.Now = Spike{Jobs: cfg.Spike, Backlog: backlog, Lateness: late, LastFinish: last}
	r.Ahead.PeakRSS, r.Ahead.DBSize = peakRSS(), e.size(ctx)
	r.Now.PeakRSS, r.Now.DBSize = r.Ahead.PeakRSS, r.Ahead.DBSize
	return r, nil
}

// spikeOnce creates cfg.Spike jobs due lead from now (zero: as each is
// created) with a running pool of enough slots and waits for them all. It
// returns every start lateness, sorted, and when the last run was recorded,
// relative to the due time (zero lead: the start of the enqueue); ok is
// false when enqueueing took longer than a lead above zero.
func spikeOnce(ctx context.Context, e *env, cfg Config, lead time.Duration) (late []time.Duration, last time.Duration, ok bool, err error) {
	var mu sync.Mutex
	c := newCounter(cfg.Spike)
	pools, stop := runPools(c, e.nodes(), max(cfg.Workers, cfg.Spike), func(_ context.Context, j *worker.Job) error {
		d := time.Since(j.Slot)
		mu.Lock()
		late = append(late, d)
		mu.Unlock()
		return nil
	})
	defer stop()
	due := time.Now().Add(lead).Truncate(time.Millisecond) // times are stored to the millisecond
	runAt, wake := due, func() {}
	if lead == 0 {
		// As POST /jobs/batch does on the node that took it; the others
		// hear the store's wake-ups.
		runAt, wake = time.Time{}, pools[0].Wake
	}
	if _, err := enqueue(ctx, e.stores[0], cfg.Spike, cfg.Batch, runAt, wake); err != nil {
		return nil, 0, false, err
	}
	ok = lead == 0 || time.Now().Before(due)
	pools[0].Wake()
	if err := c.wait(ctx, 5*time.Minute); err != nil {
		return nil, 0, false, err
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Sorted(slices.Values(late)), time.Unix(0, c.last.Load()).Sub(due), ok, nil
}

// resetPeakRSS returns freed memory to the OS and resets the kernel's
// high-water mark of the process's resident set, so that peakRSS measures
// what follows. Where /proc/self/clear_refs is not writable the mark keeps
// the whole process's peak.
func resetPeakRSS() {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS is VmHWM of /proc/self/status in bytes, or 0 where there is none.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
