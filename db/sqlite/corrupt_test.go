package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
)

// TestStore_Corrupt damages a page deep in a database file: quick_check
// finds it, a read that reaches it fails with ErrCorrupt, and from then on
// the store says it is not ready.
func TestStore_Corrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sked.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	pad, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 2000)})
	batch := make([]db.JobCreateParams, 500)
	for i := range batch {
		batch[i] = db.JobCreateParams{Type: "t", Payload: pad}
	}
	for range 4 {
		if _, err := s.JobCreateBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.QuickCheck(ctx); err != nil {
		t.Fatalf("quick_check of a sound file: %v", err)
	}
	if err := s.Close(); err != nil { // the last connection checkpoints the WAL into the file
		t.Fatal(err)
	}

	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	const page = 4096
	garbage := []byte(strings.Repeat("\xde\xad\xbe\xef", page/4))
	for off := fi.Size() / 2 / page * page; off < fi.Size()/2+8*page; off += page {
		if _, err := f.WriteAt(garbage, off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()

	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("open of a file damaged deep inside: %v (the damage is found by a check, not by opening)", err)
	}
	defer s.Close()
	if err := s.QuickCheck(ctx); !errors.Is(err, db.ErrCorrupt) {
		t.Fatalf("quick_check of a damaged file = %v, want ErrCorrupt", err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready before any call met the damage = %v, want nil (the store has not seen it yet)", err)
	}
	var readErr error
	for cursor := ""; readErr == nil; {
		var page []db.Job
		page, cursor, readErr = s.JobList(ctx, db.JobListParams{Limit: 500, Cursor: cursor})
		if readErr == nil && cursor == "" {
			t.Fatalf("listed every job of a damaged file without an error (last page %d jobs)", len(page))
		}
	}
	if !errors.Is(readErr, db.ErrCorrupt) {
		t.Fatalf("reading the damaged pages = %v, want ErrCorrupt", readErr)
	}
	if err := s.Ready(ctx); err == nil || !strings.Contains(err.Error(), "sked check") {
		t.Fatalf("Ready after a read met the damage = %v, want not ready, naming sked check", err)
	}
}
