package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestStore_OutboxMissesNoLateCommit reads the events outbox as the
// sweeper does (EventsAfter, its cursor the last event seen) while two
// nodes record runs that gave up. Node B's completion takes its event's id
// first but commits last (its transaction waits for a row another
// transaction holds, as any can under load); node A's commits in between
// and the outbox is read. Read by id, the cursor would then stand past B's
// event, and its gave_up notification would be lost.
func TestStore_OutboxMissesNoLateCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	a, b := postgrestest.OpenURL(t, url), postgrestest.OpenURL(t, url)
	mk := func(s *postgres.Store, typ string) db.Claim {
		if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: typ, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		c, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: typ, Types: []string{typ}, Max: 1})
		if err != nil || len(c) != 1 {
			t.Fatalf("claim %s: %d, %v", typ, len(c), err)
		}
		return c[0]
	}
	slow, quick := mk(b, "slow"), mk(a, "quick")
	fail := func(s *postgres.Store, c db.Claim) error {
		_, err := s.RunFinish(ctx, db.RunFinishParams{JobID: c.Job.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeFailed, Error: "boom"})
		return err
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	hold, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `SELECT 1 FROM runs WHERE job_id = $1 FOR UPDATE`, slow.Job.ID); err != nil {
		t.Fatal(err)
	}
	slowDone := make(chan error, 1)
	go func() { slowDone <- fail(b, slow) }()
	// B's transaction has taken its event's id (events are written first)
	// and waits to close the run.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("node B's completion never waited for the run's row")
		}
		var waiting bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid)))`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := fail(a, quick); err != nil {
		t.Fatal(err)
	}
	kinds := []string{db.EventGaveUp}
	seen := map[string]bool{}
	first, err := a.EventsAfter(ctx, 0, kinds, 100)
	if err != nil {
		t.Fatal(err)
	}
	var cursor int64
	for _, e := range first {
		seen[e.JobID], cursor = true, e.ID
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-slowDone; err != nil {
		t.Fatal(err)
	}
	// The outbox holds an event back while an older transaction of the
	// server runs (other tests' too): read until B's shows or time is up.
	for deadline := time.Now().Add(10 * time.Second); !seen[slow.Job.ID] && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		rest, err := a.EventsAfter(ctx, cursor, kinds, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range rest {
			seen[e.JobID], cursor = true, e.ID
		}
	}
	all, err := a.EventsAfter(ctx, 0, kinds, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !seen[slow.Job.ID] {
		t.Fatalf("the outbox read %d events, then up to event %d; the gave_up of job %s (%d such events now in the table) was never read",
			len(first), cursor, slow.Job.ID, len(all))
	}
}
