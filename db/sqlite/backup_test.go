package sqlite_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
)

// TestBackup copies an open store's file: the copy holds its jobs, and a
// second copy onto it is refused rather than written over.
func TestBackup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "sked.db")
	s, err := sqlite.Open(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 3 {
		if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "noop"}); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(dir, "copy.db")
	jobs, runs, err := sqlite.Backup(ctx, src, dst)
	if err != nil || jobs != 3 || runs != 0 {
		t.Fatalf("Backup = %d jobs, %d runs, %v; want 3, 0", jobs, runs, err)
	}
	if _, _, err := sqlite.Backup(ctx, src, dst); err == nil {
		t.Fatal("a backup onto an existing file succeeded")
	}
	if _, _, err := sqlite.Backup(ctx, filepath.Join(dir, "missing.db"), filepath.Join(dir, "x.db")); err == nil {
		t.Fatal("a backup of a missing file succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "x.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed backup left its copy: %v", err)
	}
	// The database, its WAL and the copy hold payloads (an exec job's env,
	// an http job's headers): readable by their owner alone, whatever the
	// umask (they were 0644 under the usual 022).
	for _, f := range []string{src, src + "-wal", dst} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v, %v; want it readable by its owner alone", f, st.Mode(), err)
		}
	}
}
