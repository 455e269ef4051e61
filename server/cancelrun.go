package server

import (
	"context"

	"github.com/sked-dev/sked/db"
)

// cancelsAtOnce is the store of the API: a cancel-run of a job this
// process's pools run stops the run at once, where other workers (remote
// ones, other nodes) see the request at their run's next heartbeat.
type cancelsAtOnce struct {
	db.Store
	pool pools
}

// JobRequestCancelRun records the request and stops the local run of the
// lease it was recorded on.
func (s cancelsAtOnce) JobRequestCancelRun(ctx context.Context, id string) (db.Job, error) {
	j, err := s.Store.JobRequestCancelRun(ctx, id)
	if err == nil {
		s.pool.CancelRun(j.ID, j.LeaseGeneration)
	}
	return j, err
}
