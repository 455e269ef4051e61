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
// power loss (DESIGN.md guarantees 3 and 6). Options.Synchronous can lower it
// to NORMAL, which in WAL mode survives a crash of the process but not of the
// machine; it exists to measure what FULL costs.
//
// Completions are committed in groups: concurrent RunFinish calls are queued
// to one committer goroutine, which finishes every queued call in one
// transaction and answers each with its own result once that transaction is
// on disk. The hot statements are prepared once on the writer (stmts.go).
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/sked-dev/sked/clock"
	"github.com/sked-dev/sked/db"
)

//go:embed migrations/*.sql
var migrations embed.FS

var _ db.Store = (*Store)(nil)

// Store is a db.Store on one SQLite file.
type Store struct {
	// NowFunc is the store's clock; tests replace it before use. Never nil.
	NowFunc func() time.Time
	// ClockGuard, when set, is the clock NowFunc reads through: while it
	// holds after a backward step RunClaim claims nothing, and slots that a
	// forward step jumped over are recorded missed as clock_step.
	ClockGuard *clock.Guard
	// RandFunc draws the backoff jitter in [0,1); tests replace it. Never nil.
	RandFunc func() float64
	// MisfireGrace is how late a recurring slot may start before it counts
	// as misfired (see db.MisfireSkip).
	MisfireGrace time.Duration
	// CatchUpWindow bounds db.MisfireRunAll: slots older than this are
	// recorded missed instead of replayed.
	CatchUpWindow time.Duration

	path  string  // the database file; its WAL is path+"-wal"
	write *sql.DB // one connection: all writes
	read  *sql.DB // a pool: reads outside transactions
	stmts statements

	finishes chan *finishReq // RunFinish calls waiting for the committer
	// claiming counts the RunClaim calls waiting for or holding the
	// writer, and moreUntil is until when (UnixNano) another claim is
	// expected because the last one came back full and said More. The
	// committer lets claims go first (see yieldToClaims).
	claiming   atomic.Int32
	moreUntil  atomic.Int64
	claimsDone chan struct{} // buffered(1): a claim returned
	quit       chan struct{} // closed by Close: the committer stops
	quitOnce   sync.Once     // Close may be called more than once
	stopped    chan struct{} // closed when the committer has returned
}

// Options tune Open. Zero values mean the defaults.
type Options struct {
	// Synchronous is SQLite's synchronous pragma: "FULL" (the default; every
	// commit is fsynced) or "NORMAL" (WAL commits are fsynced only at
	// checkpoints: a power cut can lose the last commits).
	Synchronous string
}

// Defaults of the misfire settings.
const (
	DefaultMisfireGrace  = time.Minute
	DefaultCatchUpWindow = 24 * time.Hour
)

// Open opens (creating if needed) the database file at path and migrates it
// to the current schema, with the default Options.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWith(ctx, path, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, path string, o Options) (*Store, error) {
	sync := strings.ToUpper(cmpOr(o.Synchronous, "FULL"))
	if sync != "FULL" && sync != "NORMAL" {
		return nil, fmt.Errorf("open %s: synchronous %q: use FULL or NORMAL", path, o.Synchronous)
	}
	w, err := sql.Open("sqlite", dsn(path, sync, true))
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
		path:          path,
		write:         w,
		finishes:      make(chan *finishReq, maxGroup),
		claimsDone:    make(chan struct{}, 1),
		quit:          make(chan struct{}),
		stopped:       make(chan struct{}),
	}
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, err
	}
	if err := s.writeProbe(ctx); err != nil && !errors.Is(err, db.ErrBusy) {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := s.stmts.prepare(ctx, w); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn(path, sync, false))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(max(4, runtime.GOMAXPROCS(0)))
	s.read = r
	go s.commitLoop()
	return s, nil
}

// busyTimeout is how long a connection waits for a lock another connection
// or process holds before failing with SQLITE_BUSY.
const busyTimeout = 5 * time.Second

// writerCacheKiB is the page cache of the writer connection: SQLite's
// default of 2 MiB does not hold the upper levels and hot edges of the
// indexes of a million-job file (321 MiB), and completions then read pages
// back from the OS at every step. 32 MiB brought the last completion of a
// 2,000 spike over a million waiting jobs from 206-228 ms to 159-184 ms
// (sked bench), for a peak RSS of about 100 MiB.
const writerCacheKiB = 32 << 10

// dsn builds the modernc DSN. The pragmas run on every new connection.
func dsn(path, sync string, writer bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous("+sync+")")
	if writer {
		q.Add("_pragma", fmt.Sprintf("cache_size(-%d)", writerCacheKiB))
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

// Close stops the committer (after it has answered the queued completions)
// and closes both connection pools. Closing again does nothing.
func (s *Store) Close() error {
	s.quitOnce.Do(func() { close(s.quit) })
	<-s.stopped
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
	if t, ok := parseFixed(s.String); ok {
		return &t, nil
	}
	t, err := time.Parse(timeFormat, s.String)
	if err != nil {
		return nil, fmt.Errorf("parse stored time %q: %w", s.String, err)
	}
	return &t, nil
}

// parseFixed reads a time in timeFormat by position, several times faster
// than time.Parse on the claim and finish paths, which read eight times a
// row. ok is false for anything else, which time.Parse then judges.
func parseFixed(s string) (t time.Time, ok bool) {
	if len(s) != len(timeFormat) || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != '.' || s[23] != 'Z' {
		return time.Time{}, false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				ok = false
				return 0
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	ok = true
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec, milli := num(11, 2), num(14, 2), num(17, 2), num(20, 3)
	if !ok || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	t = time.Date(year, time.Month(month), day, hour, minute, sec, milli*int(time.Millisecond), time.UTC)
	return t, t.Day() == day // rejects 31 April and the like
}

// withTx runs fn in an IMMEDIATE transaction on the writer connection and
// commits it. A full disk or a lock held past busy_timeout comes back as
// db.ErrStorageFull or db.ErrBusy (see translate).
func (s *Store) withTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", translate(err))
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return translate(err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", translate(err))
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

// UseClock makes g the store's clock: NowFunc reads through it, claims hold
// while it holds, and slots it jumped over are recorded as clock_step.
func (s *Store) UseClock(g *clock.Guard) {
	s.NowFunc, s.ClockGuard = g.Now, g
}
