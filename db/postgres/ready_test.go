package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

func TestStore_Ready(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
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
}
