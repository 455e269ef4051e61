package server

import (
	"log/slog"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/metrics"
	"github.com/sked-dev/sked/worker"
)

// newCheckpointer returns the WAL checkpointer of a SQLite store, reporting
// to mtr (sked_wal_bytes, sked_wal_checkpoints_total), or nil for a store
// without a WAL file of its own (PostgreSQL).
func newCheckpointer(store db.Store, mtr *metrics.Metrics, log *slog.Logger) *worker.Checkpointer {
	s, ok := store.(*sqlite.Store)
	if !ok {
		return nil
	}
	return &worker.Checkpointer{Store: s, Logger: log,
		ResultFunc: mtr.WatchWAL(s.WALSize, worker.CheckpointTruncated, worker.CheckpointBusy, worker.CheckpointError)}
}
