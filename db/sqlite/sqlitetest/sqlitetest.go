// Package sqlitetest opens real, migrated SQLite stores for other packages'
// tests.
package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sked-dev/sked/db/sqlite"
)

// Open returns a migrated store on a new file in t.TempDir(), closed when the
// test ends.
func Open(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "sked.db"))
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
