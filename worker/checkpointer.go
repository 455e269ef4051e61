package worker

import (
	"cmp"
	"context"
	"log/slog"
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

// WAL is a database with a write-ahead log to keep bounded (SQLite's).
type WAL interface {
	// WALSize is the size of the log in bytes.
	WALSize() (int64, error)
	// Checkpoint copies the log back into the database and truncates it,
	// and reports busy when a reader kept it from doing all of it.
	Checkpoint(ctx context.Context) (busy bool, err error)
}

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
	Store       WAL           // never nil
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

func (c *Checkpointer) logger() *slog.Logger { return orDiscard(c.Logger) }
