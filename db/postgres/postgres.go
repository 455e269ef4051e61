// Package postgres implements db.Store on PostgreSQL through
// github.com/jackc/pgx/v5, so that several sked processes share one
// database.
//
// Connection policy: one pgxpool per Store, sized by the URL's
// pool_max_conns (pgx's default otherwise), plus one dedicated connection
// for LISTEN while Wakeups runs. Transactions are READ COMMITTED; every
// read-then-write locks the job row it read (SELECT … FOR UPDATE) and every
// write to a claimed row names the lease generation it expects, so a
// concurrent claim, reap or finish on another node either waits for the lock
// and then finds the generation gone (ErrStale) or skips the row. Commits are
// as durable as the server's synchronous_commit (on by default): a reply is
// sent after the commit returns, and a handed-out generation is never handed
// out again. A transaction pooler in transaction mode (PgBouncer) does not
// carry LISTEN; point sked at the server or a session-mode pool.
//
// One clock: every lease and due time is the database's now(), the start of
// the transaction that writes it, never the node's. Tests set NowFunc to
// pass their own instant instead (the SQL reads coalesce($now, now())).
//
// Many nodes, no leader: claims pick due rows with FOR UPDATE SKIP LOCKED,
// and the reaper does too, so each expired lease is reaped by exactly one
// node while the others skip it; reaping closes the run and moves the job
// with statements fenced by the lease generation, so a reap that loses a
// race to a finish changes nothing. Every node runs its reaper, and running
// it on one node or on all of them gives the same result.
//
// Wake-ups: writes that make a job due soon (create, resume, retry, a retry
// or a release after a run) NOTIFY sked_jobs in their transaction; Wakeups
// LISTENs for them so every node's dispatcher starts the job without waiting
// for its next poll.
//
// Migrations are embedded (migrations/*.sql) and run by goose at Open, under
// an advisory lock so that nodes starting together migrate once.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/sked-dev/sked/db"
)

//go:embed migrations/*.sql
var migrations embed.FS

var _ db.Store = (*Store)(nil)

// Store is a db.Store on a PostgreSQL database.
type Store struct {
	// NowFunc, when non-nil, replaces the database's now() in every
	// statement; tests set it before use. nil (the default) means the
	// database's clock.
	NowFunc func() time.Time
	// RandFunc draws the backoff jitter in [0,1); tests replace it. Never nil.
	RandFunc func() float64
	// MisfireGrace is how late a recurring slot may start before it counts
	// as misfired (see db.MisfireSkip).
	MisfireGrace time.Duration
	// CatchUpWindow bounds db.MisfireRunAll: slots older than this are
	// recorded missed instead of replayed.
	CatchUpWindow time.Duration

	pool *pgxpool.Pool // immutable; never nil
}

// Defaults of the misfire settings, equal to db/sqlite's so that both
// backends behave alike.
const (
	DefaultMisfireGrace  = time.Minute
	DefaultCatchUpWindow = 24 * time.Hour
)

// Open connects to the database at url (postgres://… or any connection
// string pgx accepts) and migrates it to the current schema.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse postgres url: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	s := &Store{
		RandFunc:      rand.Float64,
		MisfireGrace:  DefaultMisfireGrace,
		CatchUpWindow: DefaultCatchUpWindow,
		pool:          pool,
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	conn := stdlib.OpenDBFromPool(s.pool)
	defer conn.Close()
	p, err := provider(conn)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// provider is the goose provider of the embedded migrations on conn; its Up
// holds schemaLocker's lock.
func provider(conn *sql.DB) (*goose.Provider, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("embedded migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, conn, sub, goose.WithSessionLocker(schemaLocker{}))
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}

// schemaLocker serializes migrations of one schema across processes with a
// session advisory lock keyed by the schema's name. It waits in the server
// (pg_advisory_lock blocks) instead of polling, and databases in other
// schemas of the same server (parallel tests) do not wait for each other.
type schemaLocker struct{}

func (schemaLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(hashtext('sked.migrate.' || current_schema()))`); err != nil {
		return fmt.Errorf("lock migrations: %w", err)
	}
	return nil
}

func (schemaLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock(hashtext('sked.migrate.' || current_schema()))`); err != nil {
		return fmt.Errorf("unlock migrations: %w", err)
	}
	return nil
}

// Close closes the connection pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Now is the store's clock: NowFunc when set, else the database's now(). It
// is only advice (the dispatcher uses it to sleep until a due time); when the
// database does not answer it falls back to this machine's clock.
func (s *Store) Now() time.Time {
	if s.NowFunc != nil {
		return s.NowFunc().UTC()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var t time.Time
	if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&t); err != nil {
		return time.Now().UTC()
	}
	return t.UTC()
}

// nowArg is the $now of coalesce($now, now()): NULL (the database's clock)
// unless a test set NowFunc.
func (s *Store) nowArg() *time.Time {
	if s.NowFunc == nil {
		return nil
	}
	t := s.NowFunc().UTC()
	return &t
}

// txNow reads the clock inside tx. now() is the start time of the
// transaction, so every time the transaction writes agrees with it.
func (s *Store) txNow(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	var t time.Time
	if err := tx.QueryRow(ctx, `SELECT coalesce($1::timestamptz, now())`, s.nowArg()).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read clock: %w", err)
	}
	return t.UTC(), nil
}

// withTx runs fn in a transaction with the transaction's clock and commits
// it.
func (s *Store) withTx(ctx context.Context, fn func(tx pgx.Tx, now time.Time) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now, err := s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		return fn(tx, now)
	})
}

// translate turns the driver's errors into db's at the edge: no rows is
// ErrNotFound, a value the schema refuses is ErrInvalid. Others pass through.
func translate(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return db.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "22P02" || pgErr.Code == "22025": // invalid text representation, bad escape
			return &db.ValidationError{Field: "payload", Msg: "not a JSON document: " + pgErr.Message}
		case pgErr.Code == "23514": // check_violation
			return &db.ValidationError{Field: pgErr.ColumnName, Msg: "value out of range (" + pgErr.ConstraintName + ")"}
		}
	}
	return err
}

// utc returns t in UTC; pgx reads timestamptz in the local zone.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nullTime is t, or NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// nullString is s, or NULL for "".
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
