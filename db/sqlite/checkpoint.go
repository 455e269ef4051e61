package sqlite

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"
)

// Defaults of Checkpointer.
const (
	DefaultCheckpointInterval = time.Second
	DefaultMaxWALBytes        = 16 << 20
)

// Results of one checkpoint, as passed to Checkpointer.ResultFunc.
const (
	CheckpointTruncated = "truncated" // every frame copied back and the WAL file cut to zero
	CheckpointBusy      = "busy"      // a reader (or writer) kept part of the WAL in use
	CheckpointError     = "error"
)

// checkpointBusyTimeout is how long a checkpoint waits for readers to move
// to the latest snapshot: not at all. It runs on the writer connection, so
// writes would queue behind every wait; while an old reader stays, a waiting
// checkpoint every Interval stalled writes (measured: a sixth of the batches
// with 100 ms at a 50 ms interval). A short reader that makes one attempt
// busy is gone by the next.
const checkpointBusyTimeout = 0

// Checkpointer keeps the WAL file bounded. SQLite's automatic checkpoint
// (PASSIVE, every 1000 pages) copies frames back into the database but never
// shrinks the file, and it cannot reach past the snapshot of a reader that
// stays open, so a long-lived reader (another process's open transaction, a
// backup) lets the WAL grow without bound for as long as it lives. The
// checkpointer looks at the WAL's size every Interval and, when it is past
// MaxWALBytes, runs wal_checkpoint(TRUNCATE): with no old reader left this
// copies everything back and cuts the file to zero; with one, it copies what
// it can and reports busy, logged once per blocked stretch.
type Checkpointer struct {
	Store       *Store        // never nil
	Interval    time.Duration // zero: DefaultCheckpointInterval
	MaxWALBytes int64         // zero: DefaultMaxWALBytes
	Logger      *slog.Logger  // nil: discard
	// ResultFunc, when set, is called with the result of every checkpoint
	// the checkpointer ran (CheckpointTruncated, CheckpointBusy or
	// CheckpointError).
	ResultFunc func(result string)

	blocked bool // the last checkpoint was busy; owned by Run's goroutine
}

// Run checks the WAL every Interval until ctx is done.
func (c *Checkpointer) Run(ctx context.Context) error {
	t := time.NewTicker(cmp.Or(c.Interval, DefaultCheckpointInterval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := c.runOnce(ctx); err != nil && ctx.Err() == nil {
			c.logger().Error("wal checkpoint", "err", err)
		}
	}
}

// runOnce checkpoints when the WAL is past MaxWALBytes and returns the
// result, or "" when the WAL was small enough to leave alone.
func (c *Checkpointer) runOnce(ctx context.Context) (string, error) {
	size, err := c.Store.WALSize()
	if err != nil {
		return "", err
	}
	if size <= cmp.Or(c.MaxWALBytes, DefaultMaxWALBytes) {
		return "", nil
	}
	busy, err := c.Store.Checkpoint(ctx)
	result := CheckpointTruncated
	switch {
	case err != nil:
		result = CheckpointError
	case busy:
		result = CheckpointBusy
	}
	if c.ResultFunc != nil {
		c.ResultFunc(result)
	}
	switch {
	case result == CheckpointBusy && !c.blocked:
		c.logger().Warn("wal checkpoint blocked by a reader: the wal grows until it ends", "wal_bytes", size)
	case result == CheckpointTruncated && c.blocked:
		c.logger().Info("wal checkpoint unblocked: wal truncated", "wal_bytes_before", size)
	}
	c.blocked = result == CheckpointBusy
	return result, err
}

func (c *Checkpointer) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// WALSize is the size of the database's -wal file in bytes; 0 when there is
// none (the database is closed cleanly, or not in WAL mode).
func (s *Store) WALSize() (int64, error) {
	fi, err := os.Stat(s.path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stat wal: %w", err)
	}
	return fi.Size(), nil
}

// Checkpoint runs wal_checkpoint(TRUNCATE) on the writer connection and
// reports busy when a reader on an older snapshot (or a writer of another
// process) kept it from copying and cutting the whole WAL. It does not wait
// for readers (checkpointBusyTimeout), so it holds up the writes queued
// behind it only as long as copying takes.
func (s *Store) Checkpoint(ctx context.Context) (busy bool, err error) {
	conn, err := s.write.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("checkpoint: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", checkpointBusyTimeout)); err != nil {
		return false, fmt.Errorf("checkpoint: set busy timeout: %w", err)
	}
	// Restore the writer's timeout even when ctx is done: the connection
	// outlives this call.
	defer conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout.Milliseconds()))
	var blocked, logFrames, copied int64
	if err := conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&blocked, &logFrames, &copied); err != nil {
		return false, fmt.Errorf("checkpoint: %w", err)
	}
	return blocked != 0, nil
}
