package worker_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/worker"
)

// walBound is what the test holds the WAL to: the checkpointer's threshold
// plus SQLite's auto-checkpoint size (1000 pages of 4 KiB) of slack for the
// writes between two of its looks.
const (
	walThreshold = 4 << 20
	walBound     = walThreshold + 4<<20
)

// TestCheckpointer_LongReader writes steadily through three phases and
// checks the WAL's size: without a reader it stays under walBound; a reader
// holding an old snapshot makes it grow past twice the bound (the load runs
// until it does, so the phase is bounded by size, not time); once the reader
// ends, the checkpointer truncates it back under the bound.
func TestCheckpointer_LongReader(t *testing.T) {
	phase := 2 * time.Second
	if d, err := time.ParseDuration(os.Getenv("SKED_WAL_PHASE")); err == nil {
		phase = d // measurement runs: SKED_WAL_PHASE=20s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "sked.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var results sync.Map // result -> *atomic.Int64
	count := func(r string) int64 {
		v, _ := results.LoadOrStore(r, new(atomic.Int64))
		return v.(*atomic.Int64).Load()
	}
	cp := &worker.Checkpointer{Store: s, Interval: 50 * time.Millisecond, MaxWALBytes: walThreshold,
		ResultFunc: func(r string) {
			v, _ := results.LoadOrStore(r, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		}}
	cpCtx, stopCP := context.WithCancel(ctx)
	cpDone := make(chan error, 1)
	go func() { cpDone <- cp.Run(cpCtx) }()
	defer func() { stopCP(); <-cpDone }()

	// load writes batches until stop says so, and returns the largest WAL
	// size seen after a batch.
	payload, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 1024)})
	batch := make([]db.JobCreateParams, 100)
	for i := range batch {
		batch[i] = db.JobCreateParams{Type: "noop", Payload: payload, RunAt: time.Now().Add(time.Hour)}
	}
	load := func(stop func(wal int64) bool) (maxWAL int64, batches int) {
		t.Helper()
		for batches = 0; batches < 100000; batches++ {
			if _, err := s.JobCreateBatch(ctx, batch); err != nil {
				t.Fatalf("batch %d: %v", batches, err)
			}
			wal, err := s.WALSize()
			if err != nil {
				t.Fatal(err)
			}
			maxWAL = max(maxWAL, wal)
			if stop(wal) {
				return maxWAL, batches + 1
			}
		}
		t.Fatalf("load: no stop after %d batches", batches)
		return 0, 0
	}
	forAbout := func(d time.Duration) func(int64) bool {
		end := time.Now().Add(d)
		return func(int64) bool { return !time.Now().Before(end) }
	}

	// 1. No reader.
	maxWAL, n := load(forAbout(phase))
	t.Logf("no reader: %d batches of %d jobs, max wal %d bytes", n, len(batch), maxWAL)
	if maxWAL > walBound {
		t.Errorf("without a reader the wal reached %d bytes, want <= %d", maxWAL, walBound)
	}

	// 2. A reader on another connection holds a snapshot open.
	reader, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	tx, err := reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var jobs int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM jobs`).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	maxWAL, n = load(func(wal int64) bool { return wal > 2*walBound && time.Since(start) >= phase })
	t.Logf("long reader: %d batches, max wal %d bytes, busy checkpoints %d", n, maxWAL, count(worker.CheckpointBusy))
	if count(worker.CheckpointBusy) == 0 {
		t.Errorf("no checkpoint reported busy while the reader was open")
	}

	// 3. The reader ends; the load goes on until the WAL is back under the
	// bound, which the checkpointer must bring about.
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	truncatedBefore := count(worker.CheckpointTruncated)
	var last int64
	_, n = load(func(wal int64) bool { last = wal; return wal <= walBound })
	t.Logf("reader gone: wal back to %d bytes after %d batches", last, n)
	start = time.Now()
	maxWAL, n = load(forAbout(phase))
	t.Logf("after: %d batches, max wal %d bytes, truncated %d, busy %d, errors %d", n, maxWAL,
		count(worker.CheckpointTruncated), count(worker.CheckpointBusy), count(worker.CheckpointError))
	if maxWAL > walBound {
		t.Errorf("after the reader ended the wal reached %d bytes, want <= %d", maxWAL, walBound)
	}
	if count(worker.CheckpointTruncated) == truncatedBefore {
		t.Errorf("no truncating checkpoint after the reader ended")
	}
	if c := count(worker.CheckpointError); c > 0 {
		t.Errorf("%d checkpoints failed", c)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatal(fmt.Errorf("store after checkpoints: %w", err))
	}
}
