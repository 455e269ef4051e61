package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/worker"
)

// readyFunc is the store's readiness check for GET /readyz, or nil (always
// ready) for a store without one.
func readyFunc(store any) func(context.Context) error {
	if r, ok := store.(db.ReadyChecker); ok {
		return r.Ready
	}
	return nil
}

// newPruner returns the retention service for store, or nil when retention
// is off (negative) or the store cannot prune, which is logged.
func newPruner(store any, retention time.Duration, now func() time.Time, log *slog.Logger) *worker.Pruner {
	if retention < 0 {
		return nil
	}
	p, ok := store.(db.Pruner)
	if !ok {
		log.Warn("this store cannot prune history; retention is off")
		return nil
	}
	return &worker.Pruner{Store: p, Retention: retention, NowFunc: now, Logger: log}
}
