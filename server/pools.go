package server

import (
	"context"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/worker"
)

// DefaultNotifyWorkers is Config.NotifyWorkers's default: the slots of the
// jobs that deliver notifications and pings.
const DefaultNotifyWorkers = 4

// pools are the worker pools of this process, each with slots of its own,
// so that a notification receiver that hangs holds only the deliveries'
// slots and a flood of jobs does not hold back an alert. They are woken,
// cancel runs, renew leases and run together.
type pools struct {
	jobs       *worker.Pool // every type but the deliveries'
	deliveries *worker.Pool // notify.Types
}

// all is both pools.
func (ps pools) all() []*worker.Pool { return []*worker.Pool{ps.jobs, ps.deliveries} }

// Wake wakes both dispatchers (see worker.Pool.Wake).
func (ps pools) Wake() {
	for _, p := range ps.all() {
		p.Wake()
	}
}

// WakeFor wakes the dispatchers for due, the jobs of each type that became
// due (postgres.Store.TakeWakeups): the jobs' pool at every signal, as
// before there were two, and the deliveries' when due names one of their
// types or is nil (jobs of any type may be due), so that each job created
// does not cost it a claim that finds nothing.
func (ps pools) WakeFor(due map[string]int) {
	ps.jobs.Wake()
	if due == nil || slices.ContainsFunc(notify.Types(), func(t string) bool { return due[t] > 0 }) {
		ps.deliveries.Wake()
	}
}

// CancelRun stops the run of job id under generation in whichever pool
// holds it (see worker.Pool.CancelRun).
func (ps pools) CancelRun(id string, generation int64) bool {
	return slices.ContainsFunc(ps.all(), func(p *worker.Pool) bool { return p.CancelRun(id, generation) })
}

// RenewAhead renews both pools' leases ahead of a clock jump of extra
// (see worker.Pool.RenewAhead); resume lets them change leases again.
func (ps pools) RenewAhead(ctx context.Context, extra time.Duration) (resume func()) {
	resumeJobs := ps.jobs.RenewAhead(ctx, extra)
	resumeDeliveries := ps.deliveries.RenewAhead(ctx, extra)
	return func() {
		resumeDeliveries()
		resumeJobs()
	}
}

// Types are the job types the pools serve, sorted.
func (ps pools) Types() []string {
	return slices.Sorted(slices.Values(slices.Concat(ps.jobs.Types(), ps.deliveries.Types())))
}

// Run runs both pools until ctx is done and each has shut down (see
// worker.Pool.Run).
func (ps pools) Run(ctx context.Context) error {
	var g errgroup.Group
	for _, p := range ps.all() {
		g.Go(func() error { return p.Run(ctx) })
	}
	return g.Wait()
}
