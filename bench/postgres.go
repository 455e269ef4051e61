package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sked-dev/sked/db/postgres"
)

// pgEnv is one temporary schema on a PostgreSQL server.
type pgEnv struct {
	url  string // the server's URL with search_path set to the schema
	drop func(context.Context) error
}

// openPostgres creates a fresh schema on the server at cfg.DB and opens
// cfg.Nodes migrated stores on it, each with its own connection pool, as
// that many sked processes would.
func openPostgres(ctx context.Context, cfg Config) (*env, error) {
	url, drop, err := postgres.NewSchema(ctx, cfg.DB, "sked_bench_")
	if err != nil {
		return nil, err
	}
	e := &env{pg: &pgEnv{url: url, drop: drop}}
	for range cfg.Nodes {
		s, err := postgres.Open(ctx, url)
		if err != nil {
			return nil, errors.Join(err, e.close())
		}
		e.stores = append(e.stores, s)
	}
	return e, nil
}

// insertBacklog is env.insertBacklog on PostgreSQL: one INSERT … SELECT
// over generate_series per chunk, then ANALYZE so the planner knows the
// table's size.
func (p *pgEnv) insertBacklog(ctx context.Context, n int) error {
	conn, err := postgres.Connect(ctx, p.url)
	if err != nil {
		return fmt.Errorf("open backlog connection: %w", err)
	}
	defer conn.Close(ctx)
	base := time.Now().Add(24 * time.Hour).Unix()
	for from := 0; from < n; from += backlogChunk {
		to := min(from+backlogChunk, n) - 1
		_, err := conn.Exec(ctx, `INSERT INTO jobs (id, type, payload, timezone, state, next_run_at, slot,
				max_attempts, timeout_ms, backoff_ms, created_at, updated_at)
			SELECT '00BACKLOG' || lpad(i::text, 17, '0'), $1, '{}', 'UTC', 'ready',
				to_timestamp($2::bigint + i), to_timestamp($2::bigint + i), 5, 3600000, 1000, now(), now()
			FROM generate_series($3::bigint, $4::bigint) AS i`, noopType, base, from, to)
		if err != nil {
			return fmt.Errorf("insert backlog: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, `ANALYZE jobs`); err != nil {
		return fmt.Errorf("analyze backlog: %w", err)
	}
	return nil
}

// size is the bytes of the schema's tables with their indexes and TOAST,
// or 0 when it cannot be read.
func (p *pgEnv) size(ctx context.Context) int64 {
	conn, err := postgres.Connect(ctx, p.url)
	if err != nil {
		return 0
	}
	defer conn.Close(ctx)
	var n int64
	_ = conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
		WHERE ns.nspname = current_schema() AND c.relkind = 'r'`).Scan(&n)
	return n
}
