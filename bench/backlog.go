package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"time"

	"github.com/sked-dev/sked/db/sqlite"
)

// backlogChunk is the jobs inserted per transaction.
const backlogChunk = 100_000

// insertBacklog writes n ready no-op jobs due from a day ahead onwards, one
// a second, straight into the jobs table in big transactions (the API would
// take minutes), then settles the database (a WAL checkpoint on SQLite,
// ANALYZE on PostgreSQL) so the spike starts from a steady state.
func (e *env) insertBacklog(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	if e.pg != nil {
		return e.pg.insertBacklog(ctx, n)
	}
	return insertSQLiteBacklog(ctx, e.path, n)
}

// insertSQLiteBacklog is insertBacklog on the SQLite database at path.
func insertSQLiteBacklog(ctx context.Context, path string, n int) error {
	conn, err := sql.Open("sqlite", sqlite.FileURI(path, url.Values{"_pragma": {"busy_timeout(10000)"}, "_txlock": {"immediate"}}))
	if err != nil {
		return fmt.Errorf("open backlog connection: %w", err)
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	base := time.Now().Add(24 * time.Hour).Unix()
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	for from := 0; from < n; from += backlogChunk {
		to := min(from+backlogChunk, n) - 1
		_, err := conn.ExecContext(ctx, `INSERT INTO jobs (id, type, payload, timezone, state, next_run_at, slot,
				max_attempts, timeout_ms, backoff_ms, created_at, updated_at)
			WITH RECURSIVE seq(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM seq WHERE i < ?)
			SELECT printf('00BACKLOG%017d', i), ?, '{}', 'UTC', 'ready',
				strftime('%Y-%m-%dT%H:%M:%fZ', ? + i, 'unixepoch'), strftime('%Y-%m-%dT%H:%M:%fZ', ? + i, 'unixepoch'),
				5, 3600000, 1000, ?, ?
			FROM seq`, from, to, noopType, base, base, now, now)
		if err != nil {
			return fmt.Errorf("insert backlog: %w", err)
		}
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("checkpoint backlog: %w", err)
	}
	return nil
}
