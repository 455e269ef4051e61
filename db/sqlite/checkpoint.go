package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// checkpointBusyTimeout is how long a checkpoint waits for readers to move
// to the latest snapshot: not at all. It runs on the writer connection, so
// writes would queue behind every wait; while an old reader stays, a waiting
// checkpoint every Interval stalled writes (measured: a sixth of the batches
// with 100 ms at a 50 ms interval). A short reader that makes one attempt
// busy is gone by the next.
const checkpointBusyTimeout = 0

// WALSize is the size of the database's -wal file in bytes; 0 when there is
// none (the database is closed cleanly, or not in WAL mode).
func (s *Store) WALSize() (int64, error) {
	fi, err := os.Stat(s.d.path + "-wal")
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
	conn, err := s.d.write.Conn(ctx)
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
