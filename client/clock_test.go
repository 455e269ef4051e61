package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/worker"
)

// TestPool_RemoteClockBehind runs a remote worker, with the pool's
// defaults, on a machine whose wall clock is an hour behind the
// server's (an edge box that booted with a stale clock). A job that is due
// on the server's clock must run when claimed, not an hour later.
func TestPool_RemoteClockBehind(t *testing.T) {
	t.Parallel()
	s, url := serve(t)
	s.NowFunc = func() time.Time { return time.Now().Add(time.Hour) }
	ctx := context.Background()
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "thumb"})
	if err != nil {
		t.Fatal(err)
	}
	c := &client.Client{BaseURL: url, ClaimWait: 100 * time.Millisecond}
	started := make(chan struct{}, 1)
	pool := worker.NewPool(worker.PoolConfig{
		Store: c, WorkerID: "edge", NextDueFunc: c.NextDue, Lease: 3 * time.Second,
		Handlers: map[string]worker.HandlerFunc{"thumb": func(context.Context, *worker.Job) error {
			started <- struct{}{}
			return nil
		}},
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { pool.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		got, _ := s.JobGet(ctx, j.ID)
		t.Fatalf("the handler did not start within 10 s of the claim: job %s, lease owner %q, held until %v, due %v on the server's clock",
			got.State, got.LeaseOwner, got.LeaseUntil, got.NextRunAt)
	}
}
