package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// NewSchema creates an empty schema named prefix plus a random suffix on the
// server at base (a postgres:// URL) and returns base with its search_path
// set to it, so that a Store opened on that URL keeps its tables there, and
// a drop that removes the schema and everything in it. Tests and benchmarks
// use it to share one server without seeing each other's jobs.
func NewSchema(ctx context.Context, base, prefix string) (schemaURL string, drop func(context.Context) error, err error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("parse postgres url: %w", err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema := prefix + hex.EncodeToString(b)
	if err := execOnce(ctx, base, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	drop = func(ctx context.Context) error {
		if err := execOnce(ctx, base, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", schema, err)
		}
		return nil
	}
	return u.String(), drop, nil
}

// execOnce runs sql on a connection of its own to url.
func execOnce(ctx context.Context, url, sql string) error {
	conn, err := Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// Connect opens one connection to the database at url, a URL that Open
// accepts: the pool's settings in it (pool_max_conns and the other pool_*
// parameters) are read as Open reads them and not sent to the server, which
// would refuse them as unknown parameters.
func Connect(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse postgres url: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	return conn, nil
}
