// Package sqlite implements db.Store on an embedded SQLite file through
// modernc.org/sqlite (pure Go, so the binary stays static).
//
// Connection policy: every write goes through one writer connection
// (SetMaxOpenConns(1)) whose transactions begin IMMEDIATE, so writers queue in
// Go instead of failing with "database is locked", and a read-then-write
// inside a transaction cannot be interleaved with another writer. Reads that
// need no transaction use a separate pool of connections; in WAL mode they
// never block the writer nor it them. Both open with journal_mode=WAL,
// busy_timeout (another process holding the lock is waited for, not failed
// on), foreign_keys=on and synchronous=FULL: a commit is fsynced before it
// returns, so an acknowledged write and a handed-out lease generation survive
// power loss (DESIGN.md guarantees 3 and 6).
//
// Migrations are embedded and run by goose at Open.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"runtime"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/sked-dev/sked/db"
)

//go:embed migrations/*.sql
var migrations embed.FS

var _ db.Store = (*Store)(nil)

// Store is a db.Store on one SQLite file.
type Store struct {
	// NowFunc is the store's clock; tests replace it before use. Never nil.
	NowFunc func() time.Time
	// RandFunc draws the backoff jitter in [0,1); tests replace it. Never nil.
	RandFunc func() float64
	// MisfireGrace is how late a recurring slot may start before it counts
	// as misfired (see db.MisfireSkip).
	MisfireGrace time.Duration
	// CatchUpWindow bounds db.MisfireRunAll: slots older than this are
	// recorded missed instead of replayed.
	CatchUpWindow time.Duration

	write *sql.DB // one connection: all writes
	read  *sql.DB // a pool: reads outside transactions
}

// Defaults of the misfire settings.
const (
	DefaultMisfireGrace  = time.Minute
	DefaultCatchUpWindow = 24 * time.Hour
)

// Open opens (creating if needed) the database file at path and migrates it
// to the current schema.
func Open(ctx context.Context, path string) (*Store, error) {
	w, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	s := &Store{
		NowFunc:       time.Now,
		RandFunc:      rand.Float64,
		MisfireGrace:  DefaultMisfireGrace,
		CatchUpWindow: DefaultCatchUpWindow,
		write:         w,
	}
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(max(4, runtime.GOMAXPROCS(0)))
	s.read = r
	return s, nil
}

// dsn builds the modernc DSN. The pragmas run on every new connection.
func dsn(path string, writer bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	if writer {
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	return "file:" + path + "?" + q.Encode()
}

func (s *Store) migrate(ctx context.Context) error {
	p, err := Migrations(s.write)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Migrations returns the goose provider of the embedded migrations on conn.
func Migrations(conn *sql.DB) (*goose.Provider, error) {
	sub, err := fsSub()
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, conn, sub)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}

// Close closes both connection pools.
func (s *Store) Close() error {
	return errors.Join(s.read.Close(), s.write.Close())
}

// Now is the store's clock, in UTC.
func (s *Store) Now() time.Time { return s.NowFunc().UTC() }

// timeFormat is how every time is stored: fixed width and UTC, so that
// string order is time order (next_run_at is compared and indexed as text).
const timeFormat = "2006-01-02T15:04:05.000Z"

func fmtTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// nullTime formats t, or NULL for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return fmtTime(t)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func parseTime(s sql.NullString) (*time.Time, error) {
	if !s.Valid {
		return nil, nil
	}
	t, err := time.Parse(timeFormat, s.String)
	if err != nil {
		return nil, fmt.Errorf("parse stored time %q: %w", s.String, err)
	}
	return &t, nil
}

// withTx runs fn in an IMMEDIATE transaction on the writer connection and
// commits it.
func (s *Store) withTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func fsSub() (fs.FS, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("embedded migrations: %w", err)
	}
	return sub, nil
}
