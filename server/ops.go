package server

import (
	"log/slog"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/worker"
)

// newPruner returns the retention service for store, or nil when retention
// is off (negative).
func newPruner(store db.Store, retention time.Duration, log *slog.Logger) *worker.Pruner {
	if retention < 0 {
		return nil
	}
	return &worker.Pruner{Store: store, Retention: retention, NowFunc: store.Now, Logger: log}
}
