package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db/schema"
	"github.com/sked-dev/sked/db/sqlite"
)

func TestStore_Ready(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sked.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("fresh store: Ready = %v, want nil", err)
	}

	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetMaxOpenConns(1)

	t.Run("Locked", func(t *testing.T) {
		conn, err := other.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
			t.Fatal(err)
		}
		lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := s.Ready(lctx); err == nil {
			t.Error("Ready while another process holds the write lock = nil, want an error")
		}
		if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
			t.Fatal(err)
		}
		if err := s.Ready(ctx); err != nil {
			t.Errorf("Ready after the lock is released = %v, want nil", err)
		}
	})

	t.Run("Pending", func(t *testing.T) {
		if _, err := other.ExecContext(ctx, `DELETE FROM goose_db_version WHERE version_id =
			(SELECT max(version_id) FROM goose_db_version)`); err != nil {
			t.Fatal(err)
		}
		if err := s.Ready(ctx); err == nil || !strings.Contains(err.Error(), "sked migrate") {
			t.Errorf("Ready with a migration pending = %v, want an error naming sked migrate", err)
		}
	})

	t.Run("Newer", func(t *testing.T) {
		if _, err := other.ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (99, 1)`); err != nil {
			t.Fatal(err)
		}
		err := s.Ready(ctx)
		if !errors.Is(err, schema.ErrNewer) || !strings.Contains(err.Error(), "version 99") {
			t.Errorf("Ready on a database a newer sked migrated = %v, want ErrNewer naming version 99", err)
		}
		if s2, err := sqlite.Open(ctx, path); !errors.Is(err, schema.ErrNewer) {
			if s2 != nil {
				s2.Close()
			}
			t.Errorf("Open of a database a newer sked migrated = %v, want ErrNewer", err)
		}
	})
}
