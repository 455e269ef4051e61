package sqlite_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

// TestStore_MendUnparseableSchedule: a schedule stored by another version
// of sked (a zone its tz database no longer has, say) no longer parses; a
// change of schedule mends it, paused or ready.
func TestStore_MendUnparseableSchedule(t *testing.T) {
	ctx := context.Background()
	s, raw := sqlitetest.OpenRaw(t)
	clock := dbtest.NewClock(dbtest.Start)
	s.NowFunc = clock.Now
	for _, pause := range []bool{false, true} {
		j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t", Schedule: "@every 1m"})
		if err != nil {
			t.Fatal(err)
		}
		if pause {
			if _, err := s.JobPause(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := raw.Exec(`UPDATE jobs SET timezone = 'US/Pacific-New' WHERE id = ?`, j.ID); err != nil {
			t.Fatal(err)
		}
		clock.Advance(3 * time.Minute)
		spec := db.SpecOf(j)
		spec.Timezone = "America/Los_Angeles"
		if _, err := s.JobRedefine(ctx, db.JobRedefineParams{ID: j.ID, Spec: spec}); err != nil {
			t.Errorf("paused %v: a change of schedule that mends one that no longer parses: %v", pause, err)
		}
	}
}

// TestStore_Unparseable: one schedule that no longer parses is set aside
// and stops no other job (dbtest.RunUnparseable); each set-aside is logged.
func TestStore_Unparseable(t *testing.T) {
	var (
		logs strings.Builder
		raw  *sql.DB
	)
	dbtest.RunUnparseable(t, func(t *testing.T, now func() time.Time, rnd func() float64) db.Store {
		var s *sqlite.Store
		s, raw = sqlitetest.OpenRaw(t)
		s.NowFunc, s.RandFunc = now, rnd
		s.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		return s
	}, func(t *testing.T, _ db.Store, id, zone string) {
		if _, err := raw.Exec(`UPDATE jobs SET timezone = ? WHERE id = ?`, zone, id); err != nil {
			t.Fatal(err)
		}
	})
	if n := strings.Count(logs.String(), "job set aside"); n < 3 {
		t.Errorf("logged %d set-asides; want one each for the claim, the reaper and the pause sweep:\n%s", n, logs.String())
	}
}
