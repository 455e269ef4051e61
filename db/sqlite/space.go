package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sked-dev/sked/db"
)

// full is err, marked db.ErrStorageFull when the file system that holds the
// database has no space left: SQLite reports some writes that failed for
// space (creating the WAL and its index at start) only as an I/O error.
func (d *dialect) full(err error) error {
	if err == nil || errors.Is(err, db.ErrStorageFull) {
		return err
	}
	if free, ferr := freeBytes(filepath.Dir(d.path)); ferr == nil && free == 0 {
		return fmt.Errorf("%w: the file system that holds it has no space left (%w)", db.ErrStorageFull, err)
	}
	return err
}

// Size is the size in bytes of the database file, not counting its WAL.
func (s *Store) Size() (int64, error) {
	fi, err := os.Stat(s.d.path)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", s.d.path, err)
	}
	return fi.Size(), nil
}

// QuickCheck runs SQLite's quick_check, which reads every page and checks
// the structure of every table and index (not that each index matches its
// table: that is integrity_check, which sked check runs). It returns an
// error wrapping db.ErrCorrupt, with what it found, unless the answer is
// ok.
func (s *Store) QuickCheck(ctx context.Context) error {
	rows, err := s.d.read.QueryContext(ctx, `PRAGMA quick_check`)
	if err != nil {
		return fmt.Errorf("quick_check: %w", translate(err))
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("quick_check: %w", translate(err))
		}
		if line != "ok" && len(found) < 5 {
			found = append(found, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("quick_check: %w", translate(err))
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: quick_check found: %s", db.ErrCorrupt, strings.Join(found, "; "))
	}
	return nil
}
