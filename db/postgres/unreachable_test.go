package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestStore_Unreachable cuts a store off its server, as a PostgreSQL that
// is stopped or restarting does: every call fails with ErrUnreachable
// (the API's 503 with Retry-After), not an error of no known kind (500).
func TestStore_Unreachable(t *testing.T) {
	s, p := openProxied(t)
	ctx := context.Background()
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t"})
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	for name, call := range map[string]func() error{
		"create": func() error { _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t"}); return err },
		"get":    func() error { _, err := s.JobGet(ctx, j.ID); return err },
		"list":   func() error { _, _, err := s.JobList(ctx, db.JobListParams{}); return err },
		"claim":  func() error { _, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Max: 1}); return err },
		"pause":  func() error { _, err := s.JobPause(ctx, j.ID); return err },
		"stats":  func() error { _, err := s.Stats(ctx, s.Now()); return err },
		"runs":   func() error { _, _, err := s.RunList(ctx, db.RunListParams{JobID: j.ID}); return err },
		"next":   func() error { _, _, err := s.JobNextDue(ctx, nil); return err },
	} {
		if err := call(); !errors.Is(err, db.ErrUnreachable) {
			t.Errorf("%s with the server out of reach: %v; want ErrUnreachable", name, err)
		}
	}
}

// TestStore_SilentServerUnreachable: a server that stops answering (its
// host gone, its packets dropped) is out of reach too: a connection not
// made within the URL's connect_timeout is ErrUnreachable (503 with
// Retry-After), not an error of no known kind (500).
func TestStore_SilentServerUnreachable(t *testing.T) {
	u := postgrestest.URL(t)
	p := postgrestest.NewProxy(t, u)
	s := postgrestest.OpenURL(t, p.URL(u)+"&connect_timeout=1")
	ctx := context.Background()
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t"})
	if err != nil {
		t.Fatal(err)
	}
	p.Silence()
	timedOut := false
	for i := 0; i < 3 && !timedOut; i++ { // the first may meet a connection that ended; then none can be made
		_, err := s.JobGet(ctx, j.ID)
		if !errors.Is(err, db.ErrUnreachable) {
			t.Fatalf("get with the server silent: %v; want ErrUnreachable", err)
		}
		timedOut = timedOut || postgres.TimedOut(err)
	}
	if !timedOut {
		t.Fatal("no get waited out connect_timeout: the test did not reach what it tests")
	}
	p.Restore()
	if _, err := s.JobGet(ctx, j.ID); err != nil {
		t.Fatalf("get with the server answering again: %v", err)
	}
}

// openProxied opens a store on a new schema of the test server through a
// proxy, which cuts it off its server when told.
func openProxied(t *testing.T) (*postgres.Store, *postgrestest.Proxy) {
	t.Helper()
	u := postgrestest.URL(t)
	p := postgrestest.NewProxy(t, u)
	return postgrestest.OpenURL(t, p.URL(u)), p
}

// TestStore_DeadlineIsNotUnreachable: a call whose context runs out is
// not taken for a server out of reach.
func TestStore_DeadlineIsNotUnreachable(t *testing.T) {
	s := postgrestest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t"}); err == nil || errors.Is(err, db.ErrUnreachable) {
		t.Fatalf("create with its time out: %v; want an error that is not ErrUnreachable", err)
	}
}
