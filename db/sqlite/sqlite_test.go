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
