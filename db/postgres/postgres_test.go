package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/internal/syncbuf"
)

func TestStore_Conformance(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, now func() time.Time, rnd func() float64) db.Store {
		s := postgrestest.Open(t)
		s.NowFunc, s.RandFunc = now, rnd
		return s
	})
}

// TestStore_JobCreateTx creates jobs inside a transaction of the caller's:
// rolled back, no job; committed, the job is there and can be claimed.
func TestStore_JobCreateTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	s := postgrestest.OpenURL(t, url)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, commit := range []bool{false, true} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (id int)`); err != nil {
			t.Fatal(err)
		}
		j, created, err := s.JobCreateTx(ctx, tx, db.JobCreateParams{Type: "ship", IdempotencyKey: "order-1"})
		if err != nil || !created {
			t.Fatalf("JobCreateTx: %v created=%v", err, created)
		}
		end := tx.Rollback
		if commit {
			end = tx.Commit
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := s.JobGet(ctx, j.ID)
		switch {
		case !commit && !errors.Is(err, db.ErrNotFound):
			t.Fatalf("a job created in a transaction rolled back: %+v, %v", got, err)
		case commit && (err != nil || got.Type != "ship"):
			t.Fatalf("a job created in a transaction committed: %+v, %v", got, err)
		}
	}
	claims, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Max: 5})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claimed %d, %v; want the committed job", len(claims), err)
	}
}

// TestStore_DeletedJobTakesItsHistory deletes a job with plain SQL, as a
// node of an older version prunes (it counted on the foreign keys'
// cascade) or an operator would: its runs and events go with it.
func TestStore_DeletedJobTakesItsHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	s := postgrestest.OpenURL(t, url)
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "noop", Notify: &db.Notify{Ping: "https://hc.example/x"}})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Max: 1, Lease: time.Minute})
	if err != nil || len(claims) != 1 {
		t.Fatalf("RunClaim = %d, %v", len(claims), err)
	}
	if _, err := s.RunFinish(ctx, db.RunFinishParams{JobID: j.ID, Generation: claims[0].Job.LeaseGeneration, Outcome: db.OutcomeSucceeded}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	count := func() (runs, events int) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM runs WHERE job_id = $1),
			(SELECT count(*) FROM job_events WHERE job_id = $1)`, j.ID).Scan(&runs, &events); err != nil {
			t.Fatal(err)
		}
		return runs, events
	}
	if runs, events := count(); runs != 1 || events == 0 {
		t.Fatalf("before the delete: %d runs, %d events; want 1 run and its events", runs, events)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM jobs WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	if runs, events := count(); runs != 0 || events != 0 {
		t.Fatalf("after the delete: %d runs, %d events left; want none", runs, events)
	}
}

// TestNewSchema_PoolSettings: a URL with pool settings, which Open honours,
// serves the single connections of NewSchema and Connect too (the server
// would refuse pool_max_conns as an unknown parameter).
func TestNewSchema_PoolSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schemaURL, drop, err := postgres.NewSchema(ctx, withParam(t, postgrestest.ServerURL(t), "pool_max_conns", "2"), "sked_test_pool_")
	if err != nil {
		t.Fatalf("NewSchema with pool_max_conns: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(ctx); err != nil {
			t.Error(err)
		}
	})
	s, err := postgres.Open(ctx, schemaURL)
	if err != nil {
		t.Fatalf("Open the schema: %v", err)
	}
	s.Close()
	conn, err := postgres.Connect(ctx, schemaURL)
	if err != nil {
		t.Fatalf("Connect with pool_max_conns: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&n); err != nil || n != 0 {
		t.Errorf("jobs in the new schema: %d, %v; want 0", n, err)
	}
	conn.Close(ctx)
}

// TestStore_Unparseable: one schedule that no longer parses is set aside
// and stops no other job (dbtest.RunUnparseable).
func TestStore_Unparseable(t *testing.T) {
	t.Parallel()
	url := postgrestest.URL(t)
	dbtest.RunUnparseable(t, func(t *testing.T, now func() time.Time, rnd func() float64) db.Store {
		s := postgrestest.OpenURL(t, url)
		s.NowFunc, s.RandFunc = now, rnd
		return s
	}, func(t *testing.T, _ db.Store, id, zone string) {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `UPDATE jobs SET timezone = $1 WHERE id = $2`, zone, id); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStore_NotText: text PostgreSQL cannot hold (a NUL, a byte that is
// not UTF-8) that reaches the store past the API's checks, as an embedding
// program may send it, is a validation error, not an internal one, and
// nothing is written.
func TestStore_NotText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := postgrestest.Open(t)
	for name, call := range map[string]func() error{
		"payload not UTF-8": func() error {
			_, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "noop", Payload: []byte("{\"a\":\"\xff\"}")})
			return err
		},
		"type with NUL": func() error {
			_, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "a\x00b"})
			return err
		},
		"id not UTF-8": func() error {
			_, err := s.JobGet(ctx, "\xff")
			return err
		},
		"filter with NUL": func() error {
			_, _, err := s.JobList(ctx, db.JobListParams{Name: "a\x00b"})
			return err
		},
	} {
		var ve *db.ValidationError
		if err := call(); !errors.As(err, &ve) || !strings.Contains(err.Error(), "which sked cannot store") {
			t.Errorf("%s: %v; want a validation error saying sked cannot store it", name, err)
		}
	}
	if jobs, _, err := s.JobList(ctx, db.JobListParams{}); err != nil || len(jobs) != 0 {
		t.Errorf("jobs after the refused creates: %d, %v; want none", len(jobs), err)
	}
}

// TestOpen_OneConnection: a store whose pool holds one connection
// (pool_max_conns=1) opens, migrating, and runs a job. The migrations' lock
// once took the pool's only connection and goose waited for another
// forever. The deadline only stops a hang.
func TestOpen_OneConnection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, withParam(t, postgrestest.URL(t), "pool_max_conns", "1"))
	if err != nil {
		t.Fatalf("open a store of one connection: %v", err)
	}
	defer s.Close()
	j, c := createClaimed(t, s)
	done, err := s.RunFinish(ctx, db.RunFinishParams{JobID: j.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeSucceeded})
	if err != nil || done.State != db.StateDone {
		t.Fatalf("finish: %s, %v; want done", done.State, err)
	}
}

// TestOpen_WaitsForMigrationLockLogged: a store opened while another
// connection holds sked's migration lock of the schema waits for it, says
// so in the log (once), and says so again when it gets the lock.
func TestOpen_WaitsForMigrationLockLogged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := postgrestest.URL(t)
	holder, err := postgres.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	const key = `hashtext('sked.migrate.' || current_schema())`
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	opened := make(chan error, 1)
	go func() {
		s, err := postgres.OpenWith(ctx, u, postgres.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), "waiting for the migration lock"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no line about the wait 20 s after Open began waiting for the lock; logged:\n%s", logs.String())
		}
	}
	select {
	case err := <-opened:
		t.Fatalf("Open returned (%v) while another connection held the migration lock", err)
	default:
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock(`+key+`)`); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("open after the lock was released: %v", err)
	}
	if got := logs.String(); strings.Count(got, "waiting for the migration lock") != 1 || !strings.Contains(got, "got the migration lock") {
		t.Fatalf("logged:\n%s\nwant one line about the wait, then one about getting the lock", got)
	}
}

// withParam is the URL raw with its query parameter key set to value.
func withParam(t *testing.T, raw, key, value string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// createClaimed creates a job of type t in s and claims it.
func createClaimed(t *testing.T, s *postgres.Store) (db.Job, db.Claim) {
	t.Helper()
	ctx := context.Background()
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Max: 1})
	if err != nil || len(c) != 1 {
		t.Fatalf("claim: %d jobs, %v", len(c), err)
	}
	return j, c[0]
}
