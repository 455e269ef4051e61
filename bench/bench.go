// Package bench measures sked on SQLite through its real parts (the store,
// worker.Pool, the HTTP API) on temporary databases: throughput of the whole
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
}

func (c Config) withDefaults() Config {
	c.Jobs = cmp.Or(c.Jobs, 50_000)
	c.Spike = cmp.Or(c.Spike, 2_000)
	c.Backlog = cmp.Or(c.Backlog, 1_000_000)
	c.Workers = cmp.Or(c.Workers, 256)
	c.Batch = min(cmp.Or(c.Batch, db.MaxBatch), db.MaxBatch)
	c.Dir = cmp.Or(c.Dir, os.TempDir())
	c.Sync = strings.ToUpper(cmp.Or(c.Sync, "FULL"))
	return c
}

// noopType is the job type every benchmark job has.
const noopType = "noop"

// env is one temporary database and its store.
type env struct {
	dir   string
	path  string
	store *sqlite.Store
}

func openEnv(ctx context.Context, cfg Config) (*env, error) {
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
	return &env{dir: dir, path: path, store: s}, nil
}

// size is the bytes of the database file and its WAL.
func (e *env) size() int64 {
	var n int64
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(e.path + suffix); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func (e *env) close() error {
	return errors.Join(e.store.Close(), os.RemoveAll(e.dir))
}

// enqueue creates n no-op jobs due at runAt (zero: now) in batches of
// batch, one transaction each, and returns how long it took.
func enqueue(ctx context.Context, s db.BatchCreator, n, batch int, runAt time.Time) (time.Duration, error) {
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
	}
	return time.Since(start), nil
}

// counter is the pool's store with its completions counted: done closes
// when want runs have been recorded.
type counter struct {
	worker.Store
	want int64
	n    atomic.Int64
	last atomic.Int64 // time.Now().UnixNano() of the latest recorded completion
	done chan struct{}
}

func newCounter(s worker.Store, want int) *counter {
	return &counter{Store: s, want: int64(want), done: make(chan struct{})}
}

// RunFinish records the completion in the store and counts it.
func (c *counter) RunFinish(ctx context.Context, p db.RunFinishParams) (db.Job, error) {
	j, err := c.Store.RunFinish(ctx, p)
	if err == nil {
		c.last.Store(time.Now().UnixNano())
		if c.n.Add(1) == c.want {
			close(c.done)
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

// runPool runs a pool of slots over st with handler h until stop is called;
// stop returns when the pool has shut down. nextDue and now are the
// pool's NextDueFunc and NowFunc.
func runPool(st worker.Store, nextDue func(context.Context, []string) (time.Time, bool, error), now func() time.Time,
	slots int, h worker.HandlerFunc) (pool *worker.Pool, stop func()) {
	pool = worker.NewPool(worker.PoolConfig{
		Store: st, Handlers: map[string]worker.HandlerFunc{noopType: h}, WorkerID: "bench",
		Slots: slots, NextDueFunc: nextDue, NowFunc: now,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { pool.Run(ctx); close(done) }()
	return pool, func() { cancel(); <-done }
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
	if r.Enqueue, err = enqueue(ctx, e.store, cfg.Jobs, cfg.Batch, time.Time{}); err != nil {
		return r, err
	}
	c := newCounter(e.store, cfg.Jobs)
	start := time.Now()
	_, stop := runPool(c, e.store.JobNextDue, e.store.Now, cfg.Workers, noop)
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

// RunSpike starts a pool with at least cfg.Spike free slots, with backlog
// jobs waiting a day or more in the future, then creates cfg.Spike jobs due
// at the same instant and measures when each starts and when the last is
// recorded.
func RunSpike(ctx context.Context, cfg Config, backlog int) (Spike, error) {
	cfg = cfg.withDefaults()
	resetPeakRSS()
	e, err := openEnv(ctx, cfg)
	if err != nil {
		return Spike{}, err
	}
	defer e.close()
	r := Spike{Jobs: cfg.Spike, Backlog: backlog}
	if err := insertBacklog(ctx, e.path, backlog); err != nil {
		return r, err
	}
	// The jobs are due far enough ahead that every batch is in before they
	// are due; should enqueueing overrun the lead, the spike is run again
	// on the same database with a longer one.
	for lead := 500 * time.Millisecond; ; lead *= 4 {
		late, last, ok, err := spikeOnce(ctx, e, cfg, lead)
		if err != nil {
			return r, err
		}
		if ok {
			r.Lateness, r.LastFinish = late, last
			break
		}
	}
	r.PeakRSS = peakRSS()
	r.DBSize = e.size()
	return r, nil
}

// spikeOnce creates cfg.Spike jobs due lead from now with a running pool
// of enough slots and waits for them all. It returns every start lateness,
// sorted, and when the last run was recorded, relative to the due time; ok
// is false when enqueueing took longer than lead.
func spikeOnce(ctx context.Context, e *env, cfg Config, lead time.Duration) (late []time.Duration, last time.Duration, ok bool, err error) {
	var mu sync.Mutex
	c := newCounter(e.store, cfg.Spike)
	pool, stop := runPool(c, e.store.JobNextDue, e.store.Now, max(cfg.Workers, cfg.Spike), func(_ context.Context, j *worker.Job) error {
		d := time.Since(j.Slot)
		mu.Lock()
		late = append(late, d)
		mu.Unlock()
		return nil
	})
	defer stop()
	due := time.Now().Add(lead).Truncate(time.Millisecond) // times are stored to the millisecond
	if _, err := enqueue(ctx, e.store, cfg.Spike, cfg.Batch, due); err != nil {
		return nil, 0, false, err
	}
	ok = time.Now().Before(due)
	pool.Wake() // as POST /jobs does
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
