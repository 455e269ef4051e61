package server_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/worker"
)

// TestServer_CancelRunAtOnce: POST /jobs/{id}/cancel-run stops a run of
// the server's own pool at once. The lease is an hour, so the run's
// heartbeat, which also delivers the request, would come after twenty
// minutes.
func TestServer_CancelRunAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := server.New(server.Config{DB: filepath.Join(t.TempDir(), "sked.db"), Listener: ln, Lease: time.Hour})
	started := make(chan struct{})
	s.Handle("block", func(ctx context.Context, _ *worker.Job) error { close(started); <-ctx.Done(); return ctx.Err() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	base := "http://" + ln.Addr().String()
	waitUp(t, base)

	c := &client.Client{BaseURL: base}
	j, _, err := c.JobCreate(ctx, client.JobCreateRequest{Type: "block"})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if _, err := c.JobCancelRun(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if j, err = c.JobGet(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if j.State == db.StateCancelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job is %s 20 s after cancel-run, want cancelled", j.State)
		}
	}
}
