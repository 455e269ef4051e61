package server

import (
	"context"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sked-dev/sked/worker"
)

// DefaultNotifyWorkers is Config.NotifyWorkers's default: the slots of the
// jobs that deliver notifications and pings.
const DefaultNotifyWorkers = 4

// pools are the worker pools of this process: the user jobs' and the
// deliveries' (notify.Types), each with slots of its own, so that a
// notification receiver that hangs holds only the deliveries' slots and a
// flood of user jobs does not hold back an alert. They are woken, cancel
// runs, renew leases and run together.
type pools []*worker.Pool

// Wake wakes every pool's dispatcher (see worker.Pool.Wake).
func (ps pools) Wake() {
	for _, p := range ps {
		p.Wake()
	}
}

// CancelRun stops the run of job id under generation in whichever pool
// holds it (see worker.Pool.CancelRun).
func (ps pools) CancelRun(id string, generation int64) bool {
	return slices.ContainsFunc(ps, func(p *worker.Pool) bool { return p.CancelRun(id, generation) })
}

// RenewAhead renews every pool's leases ahead of a clock jump of extra
// (see worker.Pool.RenewAhead); resume lets them all change leases again.
func (ps pools) RenewAhead(ctx context.Context, extra time.Duration) (resume func()) {
	resumes := make([]func(), len(ps))
	for i, p := range ps {
		resumes[i] = p.RenewAhead(ctx, extra)
	}
	return func() {
		for _, r := range slices.Backward(resumes) {
			r()
		}
	}
}

// Types are the job types the pools serve, sorted.
func (ps pools) Types() []string {
	var types []string
	for _, p := range ps {
		types = append(types, p.Types()...)
	}
	slices.Sort(types)
	return types
}

// Run runs every pool until ctx is done and each has shut down (see
// worker.Pool.Run).
func (ps pools) Run(ctx context.Context) error {
	var g errgroup.Group
	for _, p := range ps {
		g.Go(func() error { return p.Run(ctx) })
	}
	return g.Wait()
}
