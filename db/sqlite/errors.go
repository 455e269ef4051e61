package sqlite

import (
	"errors"
	"fmt"
	"strings"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sked-dev/sked/db"
)

// driverError is a driver error marked with the db sentinel it means. Its
// message is the driver's; errors.Is finds both.
type driverError struct {
	err  error
	kind error
}

func (e *driverError) Error() string   { return e.err.Error() }
func (e *driverError) Unwrap() []error { return []error{e.err, e.kind} }

// translate marks SQLite's "disk full" as db.ErrStorageFull and "busy" (the
// write lock held by another process past busy_timeout) as db.ErrBusy; other
// errors pass unchanged. A write that fails with SQLITE_IOERR_WRITE failed
// in write(2) itself, which on a full file system or past RLIMIT_FSIZE is
// ENOSPC or EFBIG (SQLite turns a short write into SQLITE_FULL, an EFBIG into
// an I/O error), so it counts as full too.
func translate(err error) error {
	var se *msqlite.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch code := se.Code(); {
	case code&0xff == sqlite3.SQLITE_FULL, code == sqlite3.SQLITE_IOERR_WRITE:
		return &driverError{err, db.ErrStorageFull}
	case code&0xff == sqlite3.SQLITE_BUSY:
		return &driverError{err, db.ErrBusy}
	case code&0xff == sqlite3.SQLITE_CORRUPT, code&0xff == sqlite3.SQLITE_NOTADB:
		return &driverError{err, db.ErrCorrupt}
	case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE && strings.Contains(se.Error(), "jobs.name"):
		return &db.ConflictError{Msg: "a job that is not cancelled has this name already"}
	}
	return err
}

// isReadOnly reports whether err is SQLite's "attempt to write a readonly
// database" (in any of its extended forms).
func isReadOnly(err error) bool {
	var se *msqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_READONLY
}

// readOnly is the error of a write that failed because the database file
// is read-only, saying what to check.
func readOnly(err error) error {
	return fmt.Errorf("the database file is read-only (check its permissions, immutable attribute and mount): %w", err)
}

// isNotADatabase reports whether err is SQLite's "file is not a database":
// the file's header is not SQLite's.
func isNotADatabase(err error) bool {
	var se *msqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB
}
