package server

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/sqlite"
)

// OpenStore opens and migrates the store dsn names: a postgres:// or
// postgresql:// URL is a PostgreSQL database that many sked processes may
// share; anything else is the path of a SQLite file.
func OpenStore(ctx context.Context, dsn string) (db.Store, error) {
	if postgres.IsURL(dsn) {
		return postgres.Open(ctx, dsn)
	}
	return sqlite.Open(ctx, dsn)
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

// forwardWakeups calls wake for every wake-up of a PostgreSQL store (a
// write of another node that makes a job due soon) until ctx ends; it
// returns at once for SQLite, whose one process wakes its pool itself.
func forwardWakeups(ctx context.Context, store db.Store, wake func(), log *slog.Logger) error {
	pg, ok := store.(*postgres.Store)
	if !ok {
		return nil
	}
	pg.Logger = log
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
