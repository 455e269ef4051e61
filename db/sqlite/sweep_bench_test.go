package sqlite_test

import (
	"testing"
	"time"

	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

// BenchmarkQuietSweep times a quiet sweep (every 5 s, holding the writer)
// over 10,000 watched schedules none of which is quiet: it should read
// the few whose window ran out, not every watched job.
func BenchmarkQuietSweep(b *testing.B) {
	s := sqlitetest.Open(b)
	clock := dbtest.NewClock(dbtest.Start)
	s.NowFunc = clock.Now
	dbtest.WatchedSchedules(b, s, 10_000)
	clock.Advance(30 * time.Minute)
	dbtest.QuietSweeps(b, s)
}

// BenchmarkStats times a read of the queue's statistics over 10,000
// watched schedules, none of them failing or quiet.
func BenchmarkStats(b *testing.B) {
	s := sqlitetest.Open(b)
	dbtest.WatchedSchedules(b, s, 10_000)
	dbtest.StatsReads(b, s)
}
