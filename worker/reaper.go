package worker

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/sked-dev/sked/internal/failurelog"
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

	failures failurelog.Log
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
			r.failures.Failed(log, slog.LevelError, "reap expired leases", err)
		}
		return
	case n > 0:
		log.Warn("reaped expired leases", "jobs", n)
	}
	r.failures.Worked(log, "reap expired leases works again")
}
