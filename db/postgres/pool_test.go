package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestStore_RepeatNeedsNoSecondConnection: a completion repeated after its
// job was claimed again is answered with the job as it is now. That read
// must not take a second connection of the pool while the group's
// transaction holds one: on a pool of two (pool_max_conns=2), with a
// control by a cancelled job's name in its own transaction waiting for a
// connection too, each would wait for the other's for ever, and every later
// completion behind the committer. The transactions are put there with a
// table lock held from outside the store; the deadline of the repeated
// report only bounds the hang, and the control's longer one ends it.
func TestStore_RepeatNeedsNoSecondConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schemaURL := postgrestest.URL(t)
	u, err := url.Parse(schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "2")
	u.RawQuery = q.Encode()
	s := postgrestest.OpenURL(t, u.String())
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	s.NowFunc = func() time.Time { return now }

	// K failed its first attempt and was claimed again: a repeat of the
	// first report is answered from a read of K as it is now.
	k, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "k", MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	claim := func() db.Claim {
		t.Helper()
		c, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"k"}, Max: 1, Lease: time.Hour})
		if err != nil || len(c) != 1 {
			t.Fatalf("claim: %d claims, %v", len(c), err)
		}
		return c[0]
	}
	first := claim()
	report := db.RunFinishParams{JobID: k.ID, Generation: first.Job.LeaseGeneration, Outcome: db.OutcomeFailed, Retryable: true, Error: "boom"}
	failed, err := s.RunFinish(ctx, report)
	if err != nil {
		t.Fatal(err)
	}
	now = *failed.NextRunAt
	second := claim()
	// A cancelled job by name: a control names it.
	n, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "n", Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobCancel(ctx, n.ID); err != nil {
		t.Fatal(err)
	}

	outside := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, schemaURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	lock, watch := outside(), outside()
	hold, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `LOCK TABLE runs IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	waitUntil := func(sql string) { // polls until sql counts a row
		t.Helper()
		for {
			var n int
			if err := watch.QueryRow(ctx, sql).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// The repeat's group reads the runs, behind the lock, holding a
	// connection.
	repeated := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		j, err := s.RunFinish(rctx, report)
		if err == nil && j.LeaseGeneration != second.Job.LeaseGeneration {
			err = errors.New("answered with another generation")
		}
		repeated <- err
	}()
	waitUntil(`SELECT count(*) FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND query LIKE '%FROM runs%' AND pid <> pg_backend_pid()`)
	// The control takes the other connection and, its name cancelled, asks
	// for one more.
	controlled := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		defer cancel()
		_, err := s.JobCancel(cctx, "nightly")
		controlled <- err
	}()
	waitUntil(`SELECT count(*) FROM pg_stat_activity
		WHERE state = 'idle in transaction' AND query LIKE '%WHERE name = $1 AND state <> ''cancelled'' FOR UPDATE%'`)
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	if err := <-repeated; err != nil {
		t.Errorf("a repeated report on a pool of two, beside a control by name: %v; want it answered as recorded", err)
	}
	<-controlled // whatever it answers: it ends the wait once the report has
}

// TestStore_ControlByNameNeedsNoSecondConnection: two controls naming a
// cancelled job, on a pool of two, each in its own transaction: the
// cancelled job of that name must not be looked up on a second connection
// while the transaction holds one, or each waits for ever for the other's.
// A table lock held from outside starts them together; the deadlines only
// bound the hang.
func TestStore_ControlByNameNeedsNoSecondConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schemaURL := postgrestest.URL(t)
	u, err := url.Parse(schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "2")
	u.RawQuery = q.Encode()
	s := postgrestest.OpenURL(t, u.String())
	n, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "n", Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobCancel(ctx, n.ID); err != nil {
		t.Fatal(err)
	}

	lock, err := pgx.Connect(ctx, schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	hold, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `LOCK TABLE jobs IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	for range 2 {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			_, err := s.JobCancel(cctx, "nightly")
			done <- err
		}()
	}
	for { // both controls wait for the lock, each holding a connection
		var waiting int
		if err := lock.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%WHERE name = $1%FOR UPDATE%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a control by a cancelled job's name on a pool of two: %v; want an answer", err)
		}
	}
}
