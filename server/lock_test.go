//go:build unix

package server

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLockDB_MissingDirectory: a --db in a directory that does not exist
// is refused with the directory and the fix, not a doubled path.
func TestLockDB_MissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nonexistent")
	_, err := lockDB(filepath.Join(dir, "sked.db"))
	if err == nil {
		t.Fatal("locked a database in a directory that does not exist")
	}
	for _, want := range []string{"directory " + dir + " does not exist", "mkdir -p " + dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q; want it to say %q", err, want)
		}
	}
}
