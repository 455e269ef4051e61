package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sethvargo/go-retry"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/schema"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/worker"
)

// DefaultDBWait is how long a node waits at start for a PostgreSQL server
// that does not answer yet.
const DefaultDBWait = time.Minute

// OpenStore opens and migrates the store dsn names: a postgres:// or
// postgresql:// URL is a PostgreSQL database that many sked processes may
// share; anything else is the path of a SQLite file. A PostgreSQL server
// that cannot be reached yet (not listening, starting up, its name not
// known yet) is tried again, with growing pauses, for up to wait (none if
// wait is not positive); a mistake of the URL, the login or the database
// fails at once. On PostgreSQL, log (nil: discard) hears of each failed
// try and of a wait for another node's migration.
func OpenStore(ctx context.Context, dsn string, wait time.Duration, log *slog.Logger) (db.Store, error) {
	if !postgres.IsURL(dsn) {
		return sqlite.Open(ctx, dsn)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := retry.NewExponential(250 * time.Millisecond)
	b = retry.WithCappedDuration(5*time.Second, b)
	b = retry.WithMaxDuration(max(wait, 0), b)
	start := time.Now()
	var last error
	s, err := retry.DoValue(ctx, b, func(ctx context.Context) (*postgres.Store, error) {
		s, err := postgres.OpenWith(ctx, dsn, postgres.Options{Logger: log})
		if err == nil || !postgres.Unreachable(err) {
			return s, err
		}
		last = err
		if left := wait - time.Since(start); left > 0 {
			log.WarnContext(ctx, "PostgreSQL does not answer yet; trying again", "err", postgresOpenError(dsn, err),
				"gives_up_in", left.Round(time.Second))
		}
		return nil, retry.RetryableError(err)
	})
	switch {
	case err == nil:
		return s, nil
	case ctx.Err() != nil && last != nil:
		return nil, fmt.Errorf("stopped while waiting for PostgreSQL: %w", postgresOpenError(dsn, last))
	case last != nil && wait > 0:
		return nil, fmt.Errorf("%w; gave up after %s of trying", postgresOpenError(dsn, err), time.Since(start).Round(time.Second))
	}
	return nil, postgresOpenError(dsn, err)
}

// MigratedOf is from which schema version to which opening store migrated
// its database (From 0: a new database; From == To: none).
func MigratedOf(store db.Store) schema.Versions {
	return byStore(store, (*sqlite.Store).Migrated, (*postgres.Store).Migrated)
}

// newsTo has store tell sw of news as the transactions that make it
// commit: events of runs to deliver (a ping, a firing that gave up, a
// recovery). Without it they wait for the next sweep.
func newsTo(store db.Store, sw *worker.Sweeper) {
	engineOf(store).EventsFunc = sw.News
}

// postgresOpenError says what err, of opening the PostgreSQL database at
// dsn, means and what to do, for the mistakes of a first setup: no server
// there, no such database or role, a role that may not create tables, a
// parameter of the URL misspelt.
// Other errors pass as they are.
func postgresOpenError(dsn string, err error) error {
	where, mode := postgres.Redacted(dsn), sslMode(dsn)
	var (
		pgErr   *pgconn.PgError
		connErr *pgconn.ConnectError
		opErr   *net.OpError
		dnsErr  *net.DNSError
	)
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42501": // insufficient_privilege
		return fmt.Errorf("%s: sked's role may not create its tables (%s): make the role the database's owner "+
			"(createdb --owner ROLE, or ALTER DATABASE … OWNER TO ROLE), or give it a schema of its own with search_path in the URL; see docs/postgresql.md", where, pgErr.Message)
	case errors.As(err, &pgErr) && pgErr.Code == "3D000": // invalid_catalog_name
		return fmt.Errorf("%s: %s: create it, owned by sked's role (createdb --owner ROLE NAME), or fix the database name in --db", where, pgErr.Message)
	case errors.As(err, &pgErr) && pgErr.Code == "42704" && strings.HasPrefix(pgErr.Message, "unrecognized configuration parameter"): // undefined_object
		// pgx sends a URL parameter it does not know itself to the server.
		return fmt.Errorf("%s: the server does not know a parameter of --db (%s); check the names after ? in --db (sslmode, search_path, pool_max_conns, …)", where, pgErr.Message)
	case errors.As(err, &pgErr) && (pgErr.Code == "28000" || pgErr.Code == "28P01"): // invalid_authorization_specification, invalid_password
		return fmt.Errorf("%s: the server refused the login: %s; check the user and password in --db", where, pgErr.Message)
	case errors.As(err, &connErr) && errors.As(err, &dnsErr) && strings.Contains(dnsErr.Name, "@"):
		// The name is what follows the URL's first @: part of a password.
		return fmt.Errorf("cannot connect to PostgreSQL at %s: the host name read from --db holds an @, so the user name or "+
			"password has one: write an @ (or :, /, ?, #) in them percent-encoded, @ as %%40", where)
	case errors.As(err, &connErr) && errors.As(err, &dnsErr):
		return fmt.Errorf("cannot connect to PostgreSQL at %s: %v; check the host name in --db", where, dnsErr)
	case errors.As(err, &connErr) && errors.As(err, &opErr):
		return fmt.Errorf("cannot connect to PostgreSQL at %s: %v; check that it runs there and that --db names its host and port", where, opErr)
	case postgres.TimedOut(err):
		return fmt.Errorf("cannot connect to PostgreSQL at %s: no answer within connect_timeout; "+
			"check that it runs there and that --db names its host and port", where)
	case postgres.NotPostgres(err):
		return fmt.Errorf("cannot connect to PostgreSQL at %s: what answers there is not PostgreSQL (is it sked's own HTTP port?); "+
			"check the host and port in --db", where)
	case postgres.RefusedTLS(err) && (mode == "require" || strings.HasPrefix(mode, "verify-")):
		return fmt.Errorf("cannot connect to PostgreSQL at %s: what answers there refused TLS, which sslmode=%s asks for; "+
			"check the host and port in --db, then that the server has ssl on (or, on a network you trust, use sslmode=disable)", where, mode)
	case errors.As(err, &connErr):
		return fmt.Errorf("cannot connect to PostgreSQL at %s: %w", where, connErr)
	}
	return err
}

// sslMode is dsn's sslmode, "prefer" (pgx's default) when it has none.
func sslMode(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "prefer"
	}
	return cmp.Or(u.Query().Get("sslmode"), "prefer")
}

// quickCheckMax is the largest SQLite file checked at start: quick_check
// reads the whole file, a few hundred MiB a second.
const quickCheckMax = 256 << 20

// checkAtStart runs SQLite's quick_check on a file small enough to check
// quickly and refuses to serve a damaged one; of a larger file it logs how
// to check it. PostgreSQL checks its own pages (data checksums).
func checkAtStart(ctx context.Context, store db.Store, path string, log *slog.Logger) error {
	s, ok := store.(*sqlite.Store)
	if !ok {
		return nil
	}
	size, err := s.Size()
	if err != nil {
		return err
	}
	if size > quickCheckMax {
		log.Info("the database is too large to check at every start; check it with `sked check --db "+path+"`",
			"bytes", size, "checked_up_to", quickCheckMax)
		return nil
	}
	if err := s.QuickCheck(ctx); err != nil {
		return fmt.Errorf("%s is damaged, so sked will not serve it: %w; see what is wrong with `sked check --db %s`, then restore a backup (sked backup makes them)", path, err, path)
	}
	return nil
}

// announces says whether store tells this process of its own writes that
// make jobs due, as of other processes' (forwardWakeups forwards both):
// PostgreSQL's NOTIFY comes back to the node that sent it.
func announces(store db.Store) bool {
	_, ok := store.(*postgres.Store)
	return ok
}

// forwardWakeups calls wake for every wake-up of a PostgreSQL store (a
// write of this node or another that makes jobs due soon) with how many jobs of
// each type became due (see postgres.Store.TakeWakeups) until ctx ends; it
// returns at once for SQLite, whose one process wakes its pool itself.
func forwardWakeups(ctx context.Context, store db.Store, wake func(due map[string]int), log *slog.Logger) error {
	pg, ok := store.(*postgres.Store)
	if !ok {
		return nil
	}
	pg.Logger = log
	for range pg.Wakeups(ctx) {
		wake(pg.TakeWakeups())
	}
	return nil
}

// jitteredIdle is the dispatcher's longest sleep for this process: the
// default within ±20%, so that nodes sharing a database do not poll it in
// lockstep.
func jitteredIdle(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.4-0.2)*float64(d))
}
