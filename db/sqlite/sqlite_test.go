package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/sqlite"
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
