package worker

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/sked-dev/sked/db"
)

// Defaults of Pruner.
const (
	DefaultRetention      = 30 * 24 * time.Hour
	DefaultPruneInterval  = time.Hour
	DefaultPruneBatch     = 500
	DefaultPruneBatchWait = 100 * time.Millisecond
)

// Pruner deletes history older than Retention (see db.Pruner for what goes
// and what stays) every Interval, in batches of BatchSize rows per
// transaction with a pause between batches, so that the writer is never held
// for long and claims go on meanwhile.
type Pruner struct {
	Store     db.Pruner        // never nil
	Retention time.Duration    // age past which finished history goes; must be positive
	Interval  time.Duration    // zero: DefaultPruneInterval
	BatchSize int              // zero: DefaultPruneBatch
	BatchWait time.Duration    // pause between batches; zero: DefaultPruneBatchWait
	NowFunc   func() time.Time // the store's clock; nil: time.Now
	Logger    *slog.Logger     // nil: discard
}

// Run prunes at once and then every Interval until ctx is done.
func (p *Pruner) Run(ctx context.Context) error {
	return every(ctx, cmp.Or(p.Interval, DefaultPruneInterval), func(ctx context.Context) { p.runOnce(ctx) })
}

// runOnce deletes batches until one deletes less than a full batch of both
// jobs and runs, and returns the total.
func (p *Pruner) runOnce(ctx context.Context) db.Pruned {
	log := orDiscard(p.Logger)
	now := time.Now
	if p.NowFunc != nil {
		now = p.NowFunc
	}
	limit := cmp.Or(p.BatchSize, DefaultPruneBatch)
	before := now().Add(-p.Retention)
	var total db.Pruned
	for {
		n, err := p.Store.Prune(ctx, db.PruneParams{Before: before, Limit: limit})
		total.Jobs += n.Jobs
		total.Runs += n.Runs
		total.Events += n.Events
		if err != nil {
			if ctx.Err() == nil {
				log.Error("prune history", "err", err)
			}
			break
		}
		if n.Jobs < limit && n.Runs < limit && n.Events < limit {
			break
		}
		select {
		case <-ctx.Done():
			return total
		case <-time.After(cmp.Or(p.BatchWait, DefaultPruneBatchWait)):
		}
	}
	if total.Jobs > 0 || total.Runs > 0 || total.Events > 0 {
		log.Info("pruned history", "jobs", total.Jobs, "runs", total.Runs, "events", total.Events, "before", before)
	} else {
		log.Debug("no history to prune", "before", before)
	}
	return total
}
