package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
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
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
