// Package postgres is the PostgreSQL dialect of sked's store: the
// transactions, SQL text and scanning that db/engine runs its lifecycle on,
// through github.com/jackc/pgx/v5, so that several sked processes share one
// database.
//
// Connections: one pgxpool per Store, sized by the URL's pool_max_conns
// (pgx's default otherwise: the larger of 4 and the number of CPUs), plus one
// connection of its own for LISTEN while Wakeups runs. pgx caches each
// statement's preparation per connection; every statement here has one
// fixed text, with arrays (unnest, = ANY) where the number of values varies,
// so that the cache holds. A transaction pooler in transaction mode
// (PgBouncer) carries neither LISTEN nor prepared statements; point sked at
// the server or a session-mode pool.
//
// Transactions are READ COMMITTED. A Tx's reads lock the rows they return
// (SELECT … FOR UPDATE), and the sweeps' and claims' reads pass over rows
// another transaction holds (SKIP LOCKED), so that several nodes share the
// work instead of waiting for each other (but for a sweeper's start of the
// dead-man's switches' windows after downtime, which must reach every
// schedule: it waits, locking in id order as the completions do); every write to a claimed row
// names the lease generation it expects. Commits are as durable as the
// server's synchronous_commit (on by default): a reply is sent after the
// commit returns, and a handed-out generation is never handed out again.
// Batches of rows travel as arrays in one statement (unnest), so that a
// group of completions or a batch of new jobs costs a few round trips, not
// a few per row.
//
// One clock: every lease and due time is the database's now(), the start of
// the transaction that writes it, never the node's. Tests set
// engine.Store.NowFunc to pass their own instant instead.
//
// Wake-ups: writes that make jobs due soon NOTIFY the schema's channel
// (see wakeChannel) in their transaction, with how many of each type;
// Wakeups LISTENs for them so that every node's dispatcher, and the claims
// of the types that waiting workers make, start the jobs without waiting
// for their next poll.
//
// Migrations are embedded (migrations/*.sql) and run by goose at Open, under
// an advisory lock so that nodes starting together migrate once.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/engine"
	"github.com/sked-dev/sked/db/schema"
)

//go:embed migrations/*.sql
var migrations embed.FS

var _ db.Store = (*Store)(nil)

// Store is sked's store on a PostgreSQL database: db/engine's lifecycle
// over this dialect, plus its wake-ups.
type Store struct {
	*engine.Store
	d *dialect // immutable; never nil
	// Logger receives a warning when Wakeups loses its LISTEN connection
	// or cannot re-establish it (a few of a long row of failures; see
	// Wakeups); nil discards them. Set it before Wakeups.
	Logger *slog.Logger
	woken  woken // what Wakeups heard; see TakeWakeups
}

// dialect is the engine.Dialect of one database.
type dialect struct {
	pool    *pgxpool.Pool // immutable; never nil
	channel string        // the LISTEN/NOTIFY channel of this schema's wake-ups; immutable

	migrated schema.Versions // what Open found and left; immutable after
}

// Migrated says from which schema version to which Open migrated the
// database (the same when it was up to date).
func (s *Store) Migrated() schema.Versions { return s.d.migrated }

// Options tune OpenWith. Zero values mean the defaults.
type Options struct {
	// Logger becomes the Store's Logger. At Open it receives an INFO line
	// when the migration lock has been held by another process for
	// lockWaitNotice, and another when this one gets it, so that a node
	// waiting for another's migration says why it does not start. Nil
	// discards.
	Logger *slog.Logger
}

// lockWaitNotice is how long Open waits for another process's migration
// lock before it logs that it does.
const lockWaitNotice = time.Second

// Open connects to the database at url (postgres://… or any connection
// string pgx accepts) and migrates it to the current schema, with the
// default Options.
func Open(ctx context.Context, url string) (*Store, error) {
	return OpenWith(ctx, url, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, url string, o Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse postgres url: %w", err)
	}
	// Plan each statement for its arguments: a generic plan of a statement
	// over arrays (unnest, = ANY) assumes ten elements whatever the batch,
	// and then prefers a scan of the whole table to looking rows up by key.
	// This holds for the reads outside transactions (lists, pages); a
	// transaction pins its own plans (see InTx). A URL may say otherwise.
	// It is set once a connection is made, not sent at its start, where a
	// pooler such as PgBouncer refuses any parameter it does not know.
	if _, ok := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !ok {
		cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_custom_plan"); err != nil {
				return fmt.Errorf("set plan_cache_mode: %w", err)
			}
			return nil
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	d := &dialect{pool: pool}
	var (
		schema     *string
		searchPath string
	)
	if err := pool.QueryRow(ctx, `SELECT current_schema(), current_setting('search_path')`).Scan(&schema, &searchPath); err != nil {
		pool.Close()
		return nil, fmt.Errorf("read current schema: %w", translate(err))
	}
	if schema == nil {
		pool.Close()
		return nil, fmt.Errorf("no schema to keep sked's tables in: the search_path (%s) names no existing schema; create it (CREATE SCHEMA, owned by sked's role), or fix search_path in the URL", searchPath)
	}
	d.channel = wakeChannel(*schema)
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := d.migrate(ctx, log.With("schema", *schema)); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{Store: engine.New(engine.Config{Dialect: d}), d: d, Logger: o.Logger}, nil
}

// migrate migrates the database under a session advisory lock keyed by the
// schema's name, so that nodes starting together migrate once: the others
// wait in the server (pg_advisory_lock blocks) and then find nothing to do.
// The lock covers all of goose's work, whose first look at the version table
// would otherwise create it outside any lock (and the losers of that race
// log an ERROR). Databases in other schemas of the same server (parallel
// tests) do not wait for each other. The lock is held on a connection of
// its own, outside the pool that goose migrates through, which may hold
// only one. A wait for the lock longer than lockWaitNotice is logged to
// log, and so is its end.
func (d *dialect) migrate(ctx context.Context, log *slog.Logger) error {
	lock, err := pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("lock migrations: %w", translate(err))
	}
	defer lock.Close(context.WithoutCancel(ctx))
	const key = `hashtext('sked.migrate.' || current_schema())`
	logged := make(chan struct{})
	waiting := time.AfterFunc(lockWaitNotice, func() {
		defer close(logged)
		log.InfoContext(ctx, "waiting for the migration lock, which another node holds (it is migrating this database); "+
			"this one starts when it has the lock", "waited", lockWaitNotice)
	})
	start := time.Now()
	_, err = lock.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`)
	if !waiting.Stop() {
		<-logged
		if err == nil {
			log.InfoContext(ctx, "got the migration lock", "waited", time.Since(start).Round(time.Millisecond))
		}
	}
	if err != nil {
		return fmt.Errorf("lock migrations: %w", err)
	}
	defer lock.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+key+`)`)
	return d.withProvider(func(p *goose.Provider) (err error) {
		d.migrated, err = schema.Up(ctx, p)
		return err
	})
}

// withProvider runs fn with the goose provider of the embedded migrations.
func (d *dialect) withProvider(fn func(*goose.Provider) error) error {
	conn := stdlib.OpenDBFromPool(d.pool)
	defer conn.Close()
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("embedded migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, conn, sub)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	return fn(p)
}

// Close closes the connection pool.
func (d *dialect) Close() error {
	d.pool.Close()
	return nil
}

// Now reads the database's clock.
func (d *dialect) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := d.pool.QueryRow(ctx, `SELECT now()`).Scan(&t)
	return t.UTC(), translate(err)
}

// Precision is timestamptz's.
func (d *dialect) Precision() time.Duration { return time.Microsecond }

// translate turns the driver's errors into db's at the edge: no rows is
// ErrNotFound, a value the schema refuses is ErrInvalid, and so is text
// PostgreSQL cannot hold (NUL, bytes that are not UTF-8), which what comes
// from the API never is. Others pass through.
func translate(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return db.ErrNotFound
	}
	if lost(err) {
		return fmt.Errorf("%w: %w", db.ErrUnreachable, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "22P02" || pgErr.Code == "22025": // invalid text representation, bad escape
			return &db.ValidationError{Field: "payload", Msg: "not a JSON document: " + pgErr.Message}
		case pgErr.Code == "22021" || pgErr.Code == "22P05": // character_not_in_repertoire (NUL, not UTF-8), untranslatable_character
			return &db.ValidationError{Msg: "a value holds a NUL character or bytes that are not UTF-8, which sked cannot store: " + pgErr.Message}
		case pgErr.Code == "23514": // check_violation
			return &db.ValidationError{Field: pgErr.ColumnName, Msg: "value out of range (" + pgErr.ConstraintName + ")"}
		case pgErr.Code == "53100": // disk_full
			return fmt.Errorf("%w: %w", db.ErrStorageFull, err)
		case pgErr.Code == "55P03", pgErr.Code == "40P01", pgErr.Code == "40001": // lock_not_available, deadlock_detected, serialization_failure
			return fmt.Errorf("%w: %w", db.ErrBusy, err)
		case pgErr.Code == "23505" && pgErr.ConstraintName == "jobs_name_live": // unique_violation
			return &db.ConflictError{Msg: "a job that is not cancelled has this name already"}
		case pgErr.Code == "XX001", pgErr.Code == "XX002": // data_corrupted, index_corrupted
			return fmt.Errorf("%w: %w", db.ErrCorrupt, err)
		case shutDown(err): // admin_shutdown, crash_shutdown, cannot_connect_now
			return fmt.Errorf("%w: %w", db.ErrUnreachable, err)
		}
	}
	return err
}

// lost reports whether err is the loss of the server: a connection that
// could not be made, or one that broke (the server stopped, restarted or
// was cut off). A connection not made in time is one too, whether the
// URL's connect_timeout or the caller's deadline ran out first (pgx does
// not tell them apart): the server did not answer in either.
func lost(err error) bool {
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	switch {
	case err == nil || errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &connectErr):
		return true
	case errors.Is(err, context.DeadlineExceeded):
		return false // the caller's time ran out (a net.Error too), not the server
	}
	return pgconn.SafeToRetry(err) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed)
}

// Unreachable reports whether err, of opening the database (Open), may
// pass by itself: the server lost (see lost: not listening or answering
// yet), silent past the URL's connect_timeout (TimedOut), starting up or
// shutting down, every connection slot taken, or its host name not
// resolved yet (a container started before the database's).
// A refused login, a missing database or a misspelt parameter is not, nor
// a host name holding an @ (a password's, not percent-encoded), nor
// answers that say the URL names the wrong thing (wrongPlace) at every
// host it names.
func Unreachable(err error) bool {
	var (
		pgErr  *pgconn.PgError
		dnsErr *net.DNSError
	)
	switch {
	case errors.As(err, &pgErr):
		return shutDown(err) || pgErr.Code == "53300" // too_many_connections
	case errors.As(err, &dnsErr):
		return !strings.Contains(dnsErr.Name, "@")
	case wrongPlace(err):
		return false
	case TimedOut(err):
		return true
	}
	return lost(err)
}

// TimedOut reports whether err is a connection that could not be made
// because no answer came in time: within the URL's connect_timeout, or
// before the deadline of the caller's context, which the caller can tell
// by its context's Err.
func TimedOut(err error) bool {
	var connErr *pgconn.ConnectError
	return errors.As(err, &connErr) && errors.Is(err, context.DeadlineExceeded)
}

// wrongPlace reports whether err is a connection that could not be made
// because every try of it reached something else than the PostgreSQL the
// URL means: TLS refused (RefusedTLS) or a reply that is not PostgreSQL's
// (NotPostgres). pgx tries each host of a URL that names several in turn
// (and, by sslmode=prefer, each with TLS and without) and joins the errors
// of its tries: one host in the wrong place while another does not answer
// yet is a server to wait for.
func wrongPlace(err error) bool {
	var connErr *pgconn.ConnectError
	if !errors.As(err, &connErr) {
		return false
	}
	tries := []error{connErr.Unwrap()}
	if joined, ok := tries[0].(interface{ Unwrap() []error }); ok {
		tries = joined.Unwrap()
	}
	for _, try := range tries {
		if !refusedTLS(try) && !notPostgres(try) {
			return false
		}
	}
	return true
}

// RefusedTLS reports whether err is a connection that could not be made
// because what answers refused TLS, which the URL's sslmode (require,
// verify-ca, verify-full) asks for: a server with ssl off, or the wrong
// host or port. pgx says so in text alone.
func RefusedTLS(err error) bool {
	var connErr *pgconn.ConnectError
	return errors.As(err, &connErr) && refusedTLS(err)
}

// refusedTLS reports whether err, of a try to connect, says TLS was
// refused.
func refusedTLS(err error) bool {
	return strings.Contains(err.Error(), "server refused TLS connection")
}

// NotPostgres reports whether err is a connection that could not be made
// because what answers is not PostgreSQL (an HTTP server, such as sked's
// own port): its reply announced a message longer than PostgreSQL sends.
func NotPostgres(err error) bool {
	var connErr *pgconn.ConnectError
	return errors.As(err, &connErr) && notPostgres(err)
}

// notPostgres reports whether err, of a try to connect, is a reply longer
// than PostgreSQL sends.
func notPostgres(err error) bool {
	var bodyErr *pgproto3.ExceededMaxBodyLenErr
	return errors.As(err, &bodyErr)
}

// shutDown reports whether err is the server ending the session (it stops,
// crashed, or is starting up).
func shutDown(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03")
}

// inUTC sets each of ts that is not nil to UTC, in place; pgx reads
// timestamptz in the local zone, into a time.Time of the scan's own.
func inUTC(ts ...*time.Time) {
	for _, t := range ts {
		if t != nil {
			*t = t.UTC()
		}
	}
}

// nullString is s, or NULL for "".
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// queryPassword matches the value of a password parameter in a URL's
// query, after the name (group 1).
var queryPassword = regexp.MustCompile(`([?&](?:ssl)?password=)[^&#]*`)

// IsURL says whether dsn names a PostgreSQL database (a postgres:// or
// postgresql:// URL) rather than the path of a SQLite file.
func IsURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// CheckURL says what is wrong with url, a PostgreSQL URL (IsURL), as pgx
// reads it, without connecting: a parameter of the pool out of range
// (pool_max_conns=0), an sslmode it does not know, a TLS file it cannot
// read. The error does not hold the URL, whose password it may not hide.
func CheckURL(url string) error {
	_, err := pgxpool.ParseConfig(url)
	if err == nil {
		return nil
	}
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, "`: "); ok && errors.As(err, new(*pgconn.ParseConfigError)) {
		msg = rest // "cannot parse `URL`: " said first
	}
	return errors.New(msg)
}

// Redacted is dsn fit for a log or a terminal: a PostgreSQL URL's
// passwords, in its user info or its query (?password=, ?sslpassword=, as
// pgx takes them from either), are replaced by "xxxxx". It does not parse
// the URL as Go's URL parser would (pgx reads it as libpq does, and takes
// a password with #, ? or @ unencoded that Go reads otherwise): everything
// between the user name and the URL's last @ is hidden. Anything else (a
// SQLite path) is returned as it is.
func Redacted(dsn string) string {
	if !IsURL(dsn) {
		return dsn
	}
	scheme, rest, _ := strings.Cut(dsn, "://")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo := rest[:at]
		user, _, hasPassword := strings.Cut(userinfo, ":")
		switch {
		case strings.ContainsAny(user, "/?#"): // no user name to tell
			userinfo = "xxxxx"
		case hasPassword:
			userinfo = user + ":xxxxx"
		}
		rest = userinfo + "@" + rest[at+1:]
	}
	return scheme + "://" + queryPassword.ReplaceAllString(rest, "${1}xxxxx")
}
