package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

func TestStore_Conformance(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, now func() time.Time, rnd func() float64) db.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "sked.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		s.NowFunc, s.RandFunc = now, rnd
		return s
	})
}

func FuzzParseFixed(f *testing.F) {
	for _, s := range []string{"2026-03-08T07:00:00.000Z", "2026-04-31T00:00:00.000Z", "2026-13-01T00:00:00.000Z", "0000-01-01T00:00:00.000Z", "2026-03-08T07:00:00.00xZ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// The fast path agrees with time.Parse wherever it answers; what it
		// refuses (a comma before the milliseconds, say) falls back to
		// time.Parse.
		got, ok := sqlite.ParseFixed(s)
		want, err := time.Parse("2006-01-02T15:04:05.000Z", s)
		if ok && (err != nil || !got.Equal(want)) {
			t.Fatalf("ParseFixed(%q) = %v, time.Parse = %v, %v", s, got, want, err)
		}
	})
}

// TestStore_RunExpireOwnedBy ends the leases of the dead pools of a host,
// also one whose worker id the new process has again (pid 1 in a
// container), and not a remote worker's.
func TestStore_RunExpireOwnedBy(t *testing.T) {
	s := sqlitetest.Open(t)
	ctx := context.Background()
	for range 3 {
		if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []string{"serve:host/41", "serve:host/42", "host/43"} {
		if c, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: w, Max: 1, Lease: time.Hour}); err != nil || len(c) != 1 {
			t.Fatalf("claim for %s: %v %v", w, c, err)
		}
	}
	n, err := s.RunExpireOwnedBy(ctx, "serve:host/")
	if err != nil || n != 2 {
		t.Fatalf("expired %d, %v; want the leases of serve:host/41 and serve:host/42", n, err)
	}
	if n, _ := s.RunReapExpired(ctx); n != 2 {
		t.Fatalf("reaped %d, want 2", n)
	}
	jobs, _, _ := s.JobList(ctx, db.JobListParams{State: db.StateRunning})
	if len(jobs) != 1 || jobs[0].LeaseOwner != "host/43" {
		t.Fatalf("still running: %+v; want the remote worker's job only", jobs)
	}
}

// TestOpen_NotADatabase: a file that is not SQLite's is refused with what
// it is and what to give instead, not the driver's "file is not a
// database (26)" behind goose's words.
func TestOpen_NotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.db")
	if err := os.WriteFile(path, []byte("shopping list: milk, eggs\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := sqlite.Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), "it is not a SQLite database") || !strings.Contains(err.Error(), "a new file") {
		t.Fatalf("open a text file: %v; want it named as not a SQLite database, with what to give instead", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "shopping list: milk, eggs\n" {
		t.Errorf("the file was changed: %q", b)
	}
}

// TestOpen_PathWithURICharacters opens a file whose name holds the
// characters a SQLite URI gives a meaning to (% ? #): the file made is the
// one named, backed up as such, not a file named by the name's first part.
func TestOpen_PathWithURICharacters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs #1?x%41.db")
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.JobCreate(context.Background(), db.JobCreateParams{Type: "noop"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if jobs, _, err := sqlite.Backup(context.Background(), path, filepath.Join(dir, "copy.db")); err != nil || jobs != 1 {
		t.Fatalf("backup of %s: %d jobs, %v", path, jobs, err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if _, err := os.Stat(path); err != nil || slices.ContainsFunc(names, func(n string) bool { return n == "jobs " || strings.HasPrefix(n, "jobs #1?xA") }) {
		t.Fatalf("files made: %q; want %q and its WAL", names, filepath.Base(path))
	}
	// A path beginning with // is a path, not a URI's host.
	s, err = sqlite.Open(context.Background(), "/"+filepath.Join(dir, "slashed.db"))
	if err != nil {
		t.Fatalf("open //…: %v", err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, "slashed.db")); err != nil {
		t.Fatal(err)
	}
}
