package server

import "strings"

// lockStore makes this process the only sked serve on the SQLite database
// at dsn (see lockDB) until the returned func is called. A PostgreSQL store
// is shared by design and is not locked.
func lockStore(dsn string) (unlock func(), err error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return func() {}, nil
	}
	return lockDB(dsn)
}
