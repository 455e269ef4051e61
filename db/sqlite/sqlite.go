// Package sqlite is the SQLite dialect of sked's store: the transactions,
// SQL text and scanning that db/engine runs its lifecycle on, over an
// embedded file through modernc.org/sqlite (pure Go, so the binary stays
// static).
//
// Connection policy: every write goes through one writer connection
// (SetMaxOpenConns(1)) whose transactions begin IMMEDIATE, so writers queue in
// Go instead of failing with "database is locked", and a read-then-write
// inside a transaction cannot be interleaved with another writer: the writer
// holds the whole database, which is how a Tx's reads hold their rows. Reads
// that need no transaction use a separate pool of connections; in WAL mode
// they never block the writer nor it them. Both open with journal_mode=WAL,
// busy_timeout (another process holding the lock is waited for, not failed
// on), foreign_keys=on and synchronous=FULL: a commit is fsynced before it
// returns, so an acknowledged write and a handed-out lease generation survive
// power loss. Options.Synchronous can lower it to NORMAL, which in WAL mode
// survives a crash of the process but not of the machine; it exists to
// measure what FULL costs.
//
// The store's clock is this machine's (engine.Store.NowFunc), read once a
// transaction holds the writer, so that times follow commit order. The
// statements every job runs are prepared once on the writer (stmts).
//
// Migrations are embedded and run by goose at Open.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/engine"
	"github.com/sked-dev/sked/db/schema"
)

//go:embed migrations/*.sql
var migrations embed.FS

var _ db.Store = (*Store)(nil)

// Store is sked's store on one SQLite file: db/engine's lifecycle over this
// dialect, plus what only SQLite has (checkpoints, backups, plans).
type Store struct {
	*engine.Store
	d *dialect // immutable; never nil
}

// dialect is the engine.Dialect of one file.
type dialect struct {
	path  string  // the database file; its WAL is path+"-wal"
	write *sql.DB // one connection: all writes
	read  *sql.DB // a pool: reads outside transactions
	stmts statements

	migrated schema.Versions // what Open found and left; immutable after
}

// Migrated says from which schema version to which Open migrated the
// database (the same when it was up to date).
func (s *Store) Migrated() schema.Versions { return s.d.migrated }

// Options tune Open. Zero values mean the defaults.
type Options struct {
	// Synchronous is SQLite's synchronous pragma: "FULL" (the default; every
	// commit is fsynced) or "NORMAL" (WAL commits are fsynced only at
	// checkpoints: a power cut can lose the last commits).
	Synchronous string
}

// Open opens (creating if needed) the database file at path and migrates it
// to the current schema, with the default Options.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWith(ctx, path, Options{})
}

// notADatabase is the error of opening path, which is not a SQLite
// database, for err.
func notADatabase(path string, err error) error {
	return fmt.Errorf("open %s: it is not a SQLite database (a file of another kind, damaged, or encrypted); "+
		"name a sked database or a new file: %w", path, err)
}

// errNoHeader is why CheckFile refuses a file.
var errNoHeader = errors.New("it does not begin with the SQLite header")

// CheckFile refuses an existing file at path that is not empty and does not
// begin as a SQLite database does, before anything is written beside it (a
// lock file); a missing or empty file is a new database, and a damaged one
// with the header is left to Open to find.
func CheckFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	// Nothing read: empty, or a directory, which Open names.
	if n, _ := io.ReadFull(f, head); n > 0 && string(head[:n]) != sqliteHeader {
		return notADatabase(path, errNoHeader)
	}
	return nil
}

// sqliteHeader is how every SQLite database file begins.
const sqliteHeader = "SQLite format 3\x00"

// createPrivate creates the empty file path, readable and writable by its
// owner alone (the database holds payloads: an exec job's env, an http
// job's headers), whatever the umask; SQLite gives its -wal and -shm files
// the database's mode. An existing file is fs.ErrExist, and left as it is.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, path string, o Options) (*Store, error) {
	sync := strings.ToUpper(o.Synchronous)
	if sync == "" {
		sync = "FULL"
	}
	if sync != "FULL" && sync != "NORMAL" {
		return nil, fmt.Errorf("open %s: synchronous %q: use FULL or NORMAL", path, o.Synchronous)
	}
	if err := createPrivate(path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w, err := sql.Open("sqlite", dsn(path, sync, true))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	d := &dialect{path: path, write: w}
	if err := d.migrate(ctx); err != nil {
		w.Close()
		switch {
		case isNotADatabase(err):
			return nil, notADatabase(path, err)
		case isReadOnly(err): // a new or older database, which it must write to migrate
			return nil, fmt.Errorf("open %s: %w", path, readOnly(err))
		}
		return nil, fmt.Errorf("open %s: %w", path, d.full(err))
	}
	if err := d.writeProbe(ctx); err != nil && !errors.Is(err, db.ErrBusy) {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, d.full(err))
	}
	if err := d.stmts.prepare(ctx, w); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn(path, sync, false))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(max(4, runtime.GOMAXPROCS(0)))
	d.read = r
	return &Store{Store: engine.New(engine.Config{Dialect: d, NowFunc: time.Now, YieldToClaims: true}), d: d}, nil
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
	return FileURI(path, q)
}

// FileURI is the SQLite URI of the file at path with the parameters q (the
// driver's _pragma and _txlock among them): the characters a URI gives a
// meaning to (% ? #) are escaped, and an absolute path is written after
// an empty authority (file:///…), so that a path beginning with // is not
// read as a host; the file opened is the one named, the one the lock file
// is made beside.
func FileURI(path string, q url.Values) string {
	prefix := "file:"
	if strings.HasPrefix(path, "/") {
		prefix = "file://"
	}
	return prefix + uriPath.Replace(path) + "?" + q.Encode()
}

var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

func (d *dialect) migrate(ctx context.Context) error {
	p, err := Migrations(d.write)
	if err != nil {
		return err
	}
	d.migrated, err = schema.Up(ctx, p)
	return err
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
func (d *dialect) Close() error {
	return errors.Join(d.read.Close(), d.write.Close())
}

// Now is this machine's clock: SQLite has none of its own.
func (d *dialect) Now(context.Context) (time.Time, error) { return time.Now().UTC(), nil }

// Precision is that of timeFormat.
func (d *dialect) Precision() time.Duration { return time.Millisecond }

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

// parseTime reads a time in timeFormat.
func parseTime(s string) (time.Time, error) {
	if t, ok := parseFixed(s); ok {
		return t, nil
	}
	t, err := time.Parse(timeFormat, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse stored time %q: %w", s, err)
	}
	return t, nil
}

// Scanners of the columns the database keeps in its own way.
type (
	at     struct{ t **time.Time }  // a time in timeFormat, or NULL (nil)
	moment struct{ t *time.Time }   // a time in timeFormat, never NULL
	millis struct{ d *db.Duration } // a duration in milliseconds
	text   struct{ s *string }      // text, or NULL ("")
	count  struct{ n *int64 }       // an integer, or NULL (0)
)

func (a at) Scan(v any) error {
	t, ok, err := storedTime(v)
	if !ok || err != nil {
		*a.t = nil
		return err
	}
	*a.t = new(t) // made here: a NULL makes nothing
	return nil
}

func (m moment) Scan(v any) error {
	t, ok, err := storedTime(v)
	if !ok || err != nil {
		return cmp.Or(err, errors.New("stored time is NULL"))
	}
	*m.t = t
	return nil
}

// storedTime reads a stored time in timeFormat; ok is false for NULL.
func storedTime(v any) (t time.Time, ok bool, err error) {
	if v == nil {
		return time.Time{}, false, nil
	}
	s, isText := v.(string)
	if !isText {
		return time.Time{}, true, fmt.Errorf("stored time %v is %T, not text", v, v)
	}
	t, err = parseTime(s)
	return t, true, err
}

func (m millis) Scan(v any) error {
	n, ok := v.(int64)
	if !ok {
		return fmt.Errorf("stored duration %v is %T, not an integer", v, v)
	}
	*m.d = db.Duration(time.Duration(n) * time.Millisecond)
	return nil
}

func (c count) Scan(v any) error {
	var n sql.NullInt64
	err := n.Scan(v)
	*c.n = n.Int64
	return err
}

// nullCount is n, or NULL for 0.
func nullCount(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

func (t text) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*t.s = ""
	case string: // how the driver gives text: no sql.NullString, which escapes (twice a job's run, once a column)
		*t.s = v
	default:
		var s sql.NullString
		err := s.Scan(v)
		*t.s = s.String
		return err
	}
	return nil
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

func fsSub() (fs.FS, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("embedded migrations: %w", err)
	}
	return sub, nil
}
