package dbtest

import (
	"context"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

// WatchedSchedules creates n schedules firing every minute, each with a
// dead-man's switch of an hour, for a benchmark of the quiet sweep: none of
// them goes quiet within the hour after the store's Now.
func WatchedSchedules(b *testing.B, s db.Store, n int) {
	b.Helper()
	ps := make([]db.JobCreateParams, 0, db.MaxBatch)
	for i := range n {
		ps = append(ps, db.JobCreateParams{Type: "noop", Schedule: "* * * * *", ExpectSuccessWithin: time.Hour})
		if len(ps) == db.MaxBatch || i == n-1 {
			if _, err := s.JobCreateBatch(context.Background(), ps); err != nil {
				b.Fatal(err)
			}
			ps = ps[:0]
		}
	}
}

// QuietSweeps runs b.Loop's quiet sweeps over the schedules of
// WatchedSchedules, none of which is quiet.
func QuietSweeps(b *testing.B, s db.Store) {
	b.Helper()
	for b.Loop() {
		if quiet, err := s.JobQuietSweep(context.Background()); err != nil || len(quiet) != 0 {
			b.Fatalf("JobQuietSweep = %d quiet, %v; want none", len(quiet), err)
		}
	}
}

// StatsReads runs b.Loop's reads of Stats, as /stats, each /metrics scrape
// and the dashboard's sampler make them, over the schedules of
// WatchedSchedules.
func StatsReads(b *testing.B, s db.Store) {
	b.Helper()
	for b.Loop() {
		if _, err := s.Stats(context.Background(), s.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
