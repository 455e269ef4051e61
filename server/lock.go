package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/handlers"
)

// LockStore makes this process the only sked (serve or migrate) on the SQLite database
// at dsn (see lockDB) until the returned file, which holds the lock, is
// closed, by this process and by every supervisor it gave the file to (see
// worker.ExecConfig.Hold). A PostgreSQL store is shared by design and is not
// locked: the file is nil. A file that is not a SQLite database is refused
// first, so that no lock file is left beside it.
func LockStore(dsn string) (*os.File, error) {
	if postgres.IsURL(dsn) {
		return nil, nil
	}
	if err := sqlite.CheckFile(dsn); err != nil {
		return nil, err
	}
	return lockDB(dsn)
}

// servePrefix starts the worker id of a sked serve's in-process pool on
// host: "serve:<host>/", then the pid. POST /claims refuses such ids, so
// the leases of remote workers (sked work) never match it.
func servePrefix(host string) string { return handlers.ServeWorkerPrefix + host + "/" }

// reclaimPredecessor hands back at once the jobs the in-process pool of the
// previous sked serve on this host held when it died (kill -9, power cut),
// instead of after their leases run out. It runs before this serve's pool
// claims anything. Only SQLite does: it is under the
// single-instance lock, so the predecessor is certainly dead; on PostgreSQL
// several live nodes may share a host, so their leases are left to run out.
func reclaimPredecessor(ctx context.Context, store db.Store, host string, log *slog.Logger) error {
	s, ok := store.(*sqlite.Store)
	if !ok {
		return nil
	}
	n, err := s.RunExpireOwnedBy(ctx, servePrefix(host))
	if err != nil {
		return fmt.Errorf("hand back the jobs of the previous sked serve of this host: %w", err)
	}
	if n > 0 {
		log.Warn("the previous sked serve died holding jobs; they are handed back now", "jobs", n)
	}
	return nil
}
