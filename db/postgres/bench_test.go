package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// BenchmarkQuietSweep times a quiet sweep (every 5 s) over 10,000 watched
// schedules none of which is quiet, and reports the WAL it writes (the
// server's, so run it alone): it should lock the few rows whose window ran
// out, not every watched job.
func BenchmarkQuietSweep(b *testing.B) {
	ctx := context.Background()
	url := postgrestest.URL(b)
	s := postgrestest.OpenURL(b, url)
	clock := dbtest.NewClock(dbtest.Start)
	s.NowFunc = clock.Now
	dbtest.WatchedSchedules(b, s, 10_000)
	clock.Advance(30 * time.Minute)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	lsn := func() (n int64) {
		if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	from := lsn()
	dbtest.QuietSweeps(b, s)
	b.ReportMetric(float64(lsn()-from)/float64(b.N), "WAL-bytes/op")
}

// BenchmarkStats times a read of the queue's statistics over 10,000
// watched schedules, none of them failing or quiet, once the server has
// analyzed them (as autovacuum does).
func BenchmarkStats(b *testing.B) {
	url := postgrestest.URL(b)
	s := postgrestest.OpenURL(b, url)
	dbtest.WatchedSchedules(b, s, 10_000)
	postgrestest.Exec(b, url, `ANALYZE jobs`)
	dbtest.StatsReads(b, s)
}

// BenchmarkJobCreateBatch times JobCreateBatch of 1,000 one-off jobs
// without keys or names, as an enqueue of many jobs sends them (a client
// CPU profile: -cpuprofile).
func BenchmarkJobCreateBatch(b *testing.B) {
	s := postgrestest.Open(b)
	ps := make([]db.JobCreateParams, 1000)
	for i := range ps {
		ps[i] = db.JobCreateParams{Type: "noop"}
	}
	for b.Loop() {
		if _, err := s.JobCreateBatch(context.Background(), ps); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ps))/b.Elapsed().Seconds(), "jobs/s")
}
