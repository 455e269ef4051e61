package server

import (
	"context"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/sqlite"
)

// OpenStore opens and migrates the store dsn names: a postgres:// or
// postgresql:// URL is a PostgreSQL database that many sked processes may
// share; anything else is the path of a SQLite file.
func OpenStore(ctx context.Context, dsn string) (db.Store, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return postgres.Open(ctx, dsn)
	}
	return sqlite.Open(ctx, dsn)
}

// redactDSN is dsn fit for a log: a URL's password is replaced by "xxxxx".
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		return u.Redacted()
	}
	return dsn
}

// forwardWakeups calls wake for every wake-up of a PostgreSQL store (a
// write of another node that makes a job due soon) until ctx ends; it
// returns at once for SQLite, whose one process wakes its pool itself.
func forwardWakeups(ctx context.Context, store db.Store, wake func()) error {
	pg, ok := store.(*postgres.Store)
	if !ok {
		return nil
	}
	for range pg.Wakeups(ctx) {
		wake()
	}
	return nil
}

// jitteredIdle is the dispatcher's longest sleep for this process: the
// default within ±20%, so that nodes sharing a database do not poll it in
// lockstep.
func jitteredIdle(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.4-0.2)*float64(d))
}
