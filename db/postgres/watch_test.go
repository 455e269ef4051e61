package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestStore_WatchStartWaitsForLockedSchedules: a server back from
// downtime starts the window of every watched schedule again
// (JobWatchStart), also of one whose row another transaction holds at
// that moment, as a claim of the schedule's overdue slot does then. Passed
// over, its window would stay the one from before the downtime, and the
// next quiet sweep would call it quiet at once.
func TestStore_WatchStartWaitsForLockedSchedules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	s := postgrestest.OpenURL(t, url)
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "nightly", Schedule: "0 * * * *", ExpectSuccessWithin: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Created a day ago, never swept since: sked was down.
	if _, err := conn.Exec(ctx, `UPDATE jobs SET created_at = now() - interval '1 day' WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	hold, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	if _, err := hold.Exec(ctx, `SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE`, j.ID); err != nil {
		t.Fatal(err)
	}
	type started struct {
		n   int
		err error
	}
	done := make(chan started, 1)
	go func() {
		n, err := s.JobWatchStart(ctx)
		done <- started{n, err}
	}()
	// Release the row once JobWatchStart waits for it (or has returned).
	var got *started
	for deadline := time.Now().Add(10 * time.Second); got == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("JobWatchStart neither returned nor waited for the schedule's row")
		}
		select {
		case r := <-done:
			got = &r
			continue
		default:
		}
		var waiting bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid)))`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got == nil {
		r := <-done
		got = &r
	}
	if got.err != nil || got.n != 1 {
		t.Errorf("JobWatchStart = %d, %v; want 1 window started again", got.n, got.err)
	}
	quiet, err := s.JobQuietSweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(quiet) != 0 {
		t.Errorf("the schedule whose row was held at the restart is quiet at once: %v", quiet[0].QuietSince)
	}
}
