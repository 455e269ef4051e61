//go:build unix

package server

import (
	"errors"
	"io/fs"
	"os"
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

// TestLockStore_NotADatabase: a file that is not a SQLite database is
// refused before its lock file is made, so nothing is left beside it; an
// empty file, a new database, is locked.
func TestLockStore_NotADatabase(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "thumb.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nconvert \"$1\" -resize 10% out.jpg\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := LockStore(script); err == nil || !strings.Contains(err.Error(), "it is not a SQLite database") {
		t.Fatalf("LockStore(a shell script): %v; want it refused as not a SQLite database", err)
	}
	if _, err := os.Stat(script + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a lock file was left beside the refused file: %v", err)
	}
	empty := filepath.Join(dir, "new.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := LockStore(empty)
	if err != nil {
		t.Fatalf("LockStore(an empty file): %v", err)
	}
	f.Close()
}

// TestLockDB_Symlinks: a symbolic link to the database, or to its
// directory, names the database's own lock, so that a second sked serve
// through the link is refused rather than running the same jobs at once.
func TestLockDB_Symlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "data", "sked.db")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fileLink, dirLink := filepath.Join(dir, "other.db"), filepath.Join(dir, "linked")
	if err := os.Symlink(real, fileLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(real), dirLink); err != nil {
		t.Fatal(err)
	}
	want := lockName(real)
	for _, path := range []string{fileLink, filepath.Join(dirLink, "sked.db"), filepath.Join(dir, "data", ".", "sked.db")} {
		if got := lockName(path); got != want {
			t.Errorf("lockName(%s) = %s; want the database's own lock %s", path, got, want)
		}
	}
	// A link to a database not made yet names the lock its target will
	// have.
	dangling := filepath.Join(dir, "dangling.db")
	if err := os.Symlink(filepath.Join("data", "later.db"), dangling); err != nil {
		t.Fatal(err)
	}
	if got, want := lockName(dangling), filepath.Join(filepath.Dir(want), "later.db.lock"); got != want {
		t.Errorf("lockName(a link to a database not made yet) = %s; want %s", got, want)
	}
	// A new database through a linked directory: the lock is in the
	// directory the link points to.
	if got, want := lockName(filepath.Join(dirLink, "new.db")), filepath.Join(filepath.Dir(want), "new.db.lock"); got != want {
		t.Errorf("lockName(a new database through a linked directory) = %s; want %s", got, want)
	}
	f, err := lockDB(real)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if g, err := lockDB(fileLink); err == nil {
		g.Close()
		t.Fatal("a second lock through a symbolic link to the database was taken")
	} else if !strings.Contains(err.Error(), "holds") {
		t.Fatalf("lockDB through a link: %v; want it refused as held", err)
	}
}

// TestDBLabel: logs name a SQLite file by its absolute path, and a
// PostgreSQL URL without its password.
func TestDBLabel(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dsn, want := range map[string]string{
		"sked.db":                            filepath.Join(wd, "sked.db"),
		"/var/lib/s.db":                      "/var/lib/s.db",
		"postgres://sked:secret@db.lan/sked": "postgres://sked:xxxxx@db.lan/sked",
	} {
		if got := dbLabel(dsn); got != want {
			t.Errorf("dbLabel(%q) = %q, want %q", dsn, got, want)
		}
	}
}
