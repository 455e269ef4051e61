// Package sqlitetest opens real, migrated SQLite stores for other packages'
// tests.
package sqlitetest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/sked-dev/sked/db/sqlite"
)

// Open returns a migrated store on a new file in t.TempDir(), closed when the
// test ends.
func Open(t testing.TB) *sqlite.Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "sked.db"))
}

// openAt is Open on the file at path.
func openAt(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}

// OpenRaw is Open, and the store's file opened beside it as a plain
// database/sql handle (closed when the test ends), for a test that writes
// what the store would refuse, such as a schedule that no longer parses.
func OpenRaw(t testing.TB) (*sqlite.Store, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sked.db")
	s := openAt(t, path)
	raw, err := sql.Open("sqlite", sqlite.FileURI(path, nil))
	if err != nil {
		t.Fatalf("open the store's file: %v", err)
	}
	t.Cleanup(func() { raw.Close() })
	return s, raw
}
