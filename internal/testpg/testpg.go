// Package testpg starts a throwaway PostgreSQL server for the tests of one
// process from the binaries installed on the machine, as .ci/postgres.sh
// does: initdb in a temporary directory, the server run as the postgres
// user when we are root (PostgreSQL refuses root), listening on 127.0.0.1
// only, with fsync off. The server is stopped and its directory removed
// when the process exits, however it exits.
package testpg

import "sync"

// A MissingError says why no server can be started on this machine.
type MissingError struct{ Reason string }

func (e *MissingError) Error() string { return e.Reason }

// URL returns the URL of the process's throwaway server, starting it on
// the first call; later calls return the same server (or error). The error
// is a *MissingError when PostgreSQL is not installed here.
var URL = sync.OnceValues(start)
