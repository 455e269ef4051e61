package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// poolOfTwo opens a store on a new schema whose pool holds two connections,
// named app in pg_stat_activity, and returns it with a connection of its
// own to the schema (outside the pool).
func poolOfTwo(t *testing.T, app string) (*postgres.Store, *pgx.Conn) {
	t.Helper()
	schemaURL := postgrestest.URL(t)
	u, err := url.Parse(schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "2")
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	s := postgrestest.OpenURL(t, u.String())
	c, err := pgx.Connect(context.Background(), schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return s, c
}

// cancelledNightly creates a job named nightly in s and cancels it, so that
// a control by that name finds no live job of it.
func cancelledNightly(t *testing.T, s *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	n, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "n", Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobCancel(ctx, n.ID); err != nil {
		t.Fatal(err)
	}
}

// lockTable begins a transaction on c that takes the lock statement lock;
// the caller commits it.
func lockTable(t *testing.T, c *pgx.Conn, lock string) pgx.Tx {
	t.Helper()
	tx, err := c.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), lock); err != nil {
		t.Fatal(err)
	}
	return tx
}

// waitFor polls until the backends named app that cond selects from
// pg_stat_activity number n, or until stop returns true; it fails t after
// a minute.
func waitFor(t *testing.T, c *pgx.Conn, app, cond string, n int, stop func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !stop() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %d backends of %s where %s", n, app, cond)
		}
		// c may be in a transaction, which reads pg_stat_activity once
		// unless told to read it again.
		if _, err := c.Exec(context.Background(), `SELECT pg_stat_clear_snapshot()`); err != nil {
			t.Fatal(err)
		}
		var got int
		if err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND `+cond, app).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStore_RepeatNeedsNoSecondConnection: a completion repeated after its
// job was claimed again is answered with the job as it is now. That read
// must not take a second connection of the pool while the group's
// transaction holds one: on a pool of two, with a control by a cancelled
// job's name waiting likewise in its transaction, each would wait for the
// other's for ever, and every later completion behind the committer. A
// table lock held from outside puts the group there; the deadline of the
// repeated report only bounds the hang, and the control's longer one ends
// it.
func TestStore_RepeatNeedsNoSecondConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const app = "sked-test-repeat-pool"
	s, outside := poolOfTwo(t, app)
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
	cancelledNightly(t, s)
	hold := lockTable(t, outside, `LOCK TABLE runs IN ACCESS EXCLUSIVE MODE`)
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
	waitFor(t, outside, app, `wait_event_type = 'Lock'`, 1, func() bool { return false })
	// The control takes the other connection (and, in a transaction that
	// holds it, would look the cancelled name up on another).
	controlled := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		defer cancel()
		_, err := s.JobCancel(cctx, "nightly")
		controlled <- err
	}()
	waitFor(t, outside, app, `state = 'idle in transaction'`, 1, func() bool { return len(controlled) > 0 })
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-repeated; err != nil {
		t.Errorf("a repeated report on a pool of two, beside a control by name: %v; want it answered as recorded", err)
	}
	<-controlled // whatever it answers
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
	const app = "sked-test-name-pool"
	s, outside := poolOfTwo(t, app)
	cancelledNightly(t, s)
	hold := lockTable(t, outside, `LOCK TABLE jobs IN EXCLUSIVE MODE`)
	done := make(chan error, 2)
	for range 2 {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			_, err := s.JobCancel(cctx, "nightly")
			done <- err
		}()
	}
	// Both controls wait for the lock, each holding a connection.
	waitFor(t, outside, app, `wait_event_type = 'Lock'`, 2, func() bool { return false })
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a control by a cancelled job's name on a pool of two: %v; want an answer", err)
		}
	}
}
