package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
)

// Backup writes a consistent, compacted copy of the database file src to
// dst, which must not exist, with VACUUM INTO; dst is readable by its
// owner alone, as the database is. It reads one snapshot of src in a read
// transaction, so a server running on it (WAL mode) goes on writing
// meanwhile. It then opens the copy and returns how many jobs and runs it
// holds, which also proves it a readable sked database.
func Backup(ctx context.Context, src, dst string) (jobs, runs int64, err error) {
	s, err := openReadOnly(src)
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	if err := createPrivate(dst); err != nil { // VACUUM INTO fills an empty file
		return 0, 0, fmt.Errorf("copy %s: %w", src, err)
	}
	defer func() {
		if err != nil {
			os.Remove(dst)
		}
	}()
	if _, err := s.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return 0, 0, fmt.Errorf("copy %s: %w", src, err)
	}
	d, err := openReadOnly(dst)
	if err != nil {
		return 0, 0, err
	}
	defer d.Close()
	err = d.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM runs)`).Scan(&jobs, &runs)
	if err != nil {
		return 0, 0, fmt.Errorf("read copy %s: %w", dst, err)
	}
	return jobs, runs, nil
}

// openReadOnly opens an existing database file read-only, on one
// connection. busy_timeout waits out a checkpoint of a running server
// instead of failing.
func openReadOnly(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", 2*busyTimeout.Milliseconds()))
	d, err := sql.Open("sqlite", FileURI(path, q))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	d.SetMaxOpenConns(1)
	return d, nil
}
