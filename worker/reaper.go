package worker

import (
	"cmp"
	"context"
	"log/slog"
	"time"
)

// DefaultReapInterval is how often the reaper looks for expired leases.
const DefaultReapInterval = 2 * time.Second

// Reaper returns jobs whose worker stopped renewing its lease (it died, was
// paused or lost the network) to ready, or to dead when their attempts are
// spent.
type Reaper struct {
	Store interface {
		RunReapExpired(ctx context.Context) (int, error)
	}
	Interval time.Duration // zero: DefaultReapInterval
	Logger   *slog.Logger  // nil: discard

	failures failureLog
}

// Run reaps at once and then every Interval until ctx is done.
func (r *Reaper) Run(ctx context.Context) error {
	return every(ctx, cmp.Or(r.Interval, DefaultReapInterval), r.runOnce)
}

func (r *Reaper) runOnce(ctx context.Context) {
	log := orDiscard(r.Logger)
	n, err := r.Store.RunReapExpired(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			r.failures.failed(log, "reap expired leases", err)
		}
		return
	case n > 0:
		log.Warn("reaped expired leases", "jobs", n)
	}
	r.failures.worked(log, "reap expired leases")
}
