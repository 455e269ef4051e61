package postgres_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestMigration_ReadyByTypeLetsReadsThrough: the upgrade that rebuilds
// jobs_ready (9) holds writes to jobs while it waits and builds, not
// reads, so nodes serve reads of jobs meanwhile; down, it goes back to
// the index by due time alone, likewise.
func TestMigration_ReadyByTypeLetsReadsThrough(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	conn := stdlib.OpenDB(*cfg)
	defer conn.Close()
	sub, err := fs.Sub(postgres.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, conn, sub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 8); err != nil {
		t.Fatal(err)
	}
	connect := func() *pgx.Conn {
		c, err := postgres.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.WithoutCancel(ctx)) })
		return c
	}
	writer, reader, watcher := connect(), connect(), connect()
	if _, err := reader.Exec(ctx, `SET lock_timeout = '10s'`); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		migrate func() error
		want    string
	}{
		{func() error { _, err := p.UpTo(ctx, 9); return err }, "(type, next_run_at)"},
		{func() error { _, err := p.Down(ctx); return err }, "(next_run_at)"},
	} {
		// A write in progress makes the migration wait for its lock on jobs.
		tx, err := writer.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE jobs IN ROW EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- step.migrate() }()
		for waiting := false; !waiting; {
			if err := watcher.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE relation = 'jobs'::regclass AND NOT granted)`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				t.Fatalf("the migration did not wait for the write in progress: %v", err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		var n int
		readErr := reader.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&n)
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if readErr != nil {
			t.Errorf("a read of jobs while the migration waited: %v", readErr)
		}
		var def string
		if err := watcher.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE indexname = 'jobs_ready' AND schemaname = current_schema()`).Scan(&def); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(def, step.want+" WHERE") {
			t.Errorf("jobs_ready after the migration: %s, want %s", def, step.want)
		}
	}
}
