package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/db/schema"
)

func TestStore_Ready(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	s := postgrestest.OpenURL(t, url)
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("fresh store: Ready = %v, want nil", err)
	}

	t.Run("ReadOnly", func(t *testing.T) {
		ro, err := postgres.Open(ctx, url+"&default_transaction_read_only=on")
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		if err := ro.Ready(ctx); err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("Ready on a read-only session = %v, want the server's read-only error", err)
		}
	})

	t.Run("Pending", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DELETE FROM goose_db_version WHERE version_id =
			(SELECT max(version_id) FROM goose_db_version)`); err != nil {
			t.Fatal(err)
		}
		if err := s.Ready(ctx); err == nil || !strings.Contains(err.Error(), "sked migrate") {
			t.Errorf("Ready with a migration pending = %v, want an error naming sked migrate", err)
		}
	})

	t.Run("Newer", func(t *testing.T) {
		postgrestest.Supersede(t, url)
		err := s.Ready(ctx)
		if !errors.Is(err, schema.ErrNewer) || !strings.Contains(err.Error(), "version 99") {
			t.Errorf("Ready on a database a newer sked migrated = %v, want ErrNewer naming version 99", err)
		}
		if s2, err := postgres.Open(ctx, url); !errors.Is(err, schema.ErrNewer) {
			if s2 != nil {
				s2.Close()
			}
			t.Errorf("Open of a database a newer sked migrated = %v, want ErrNewer", err)
		}
	})
}

// TestOpen_Together opens stores on one empty schema at once, as nodes
// starting together do: each migration is applied once.
func TestOpen_Together(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	const nodes = 6
	errs := make(chan error, nodes)
	for range nodes {
		go func() {
			s, err := postgres.Open(ctx, url)
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, versions int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT version_id) FROM goose_db_version`).Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	if rows != versions {
		t.Errorf("goose_db_version has %d rows for %d versions: a migration was applied more than once", rows, versions)
	}
}
