package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

// BenchmarkPrune_NothingOld times the last batch of a prune pass, the one
// that finds nothing more to delete, over a schedule's history of a day
// (n runs, evenly spread) that is all younger than the prune's instant:
// the state of every hourly pass once the old runs are gone. The cost should
// follow the runs of about an hour, not every run in the table.
func BenchmarkPrune_NothingOld(b *testing.B) {
	for _, n := range []int{24_000, 240_000} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s, raw := sqlitetest.OpenRaw(b)
			s.NowFunc = dbtest.NewClock(dbtest.Start).Now
			j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t", Schedule: "@every 1s"})
			if err != nil {
				b.Fatal(err)
			}
			step := 24 * time.Hour / time.Duration(n)
			_, err = raw.Exec(`WITH RECURSIVE i(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM i WHERE k + 1 < ?2)
				INSERT INTO runs (job_id, slot, attempt, generation, worker_id, started_at, finished_at, outcome, output)
				SELECT ?1, t, 1, k + 1, 'w', t, t, 'succeeded', '{"status":"ok"}'
				FROM (SELECT k, strftime('%Y-%m-%dT%H:%M:%fZ', ?3, '+' || (k * ?4) || ' seconds') AS t FROM i)`,
				j.ID, n, dbtest.Start.Format(time.RFC3339), step.Seconds())
			if err != nil {
				b.Fatal(err)
			}
			p := db.PruneParams{Before: dbtest.Start.Add(-time.Second), Limit: 500}
			for b.Loop() {
				if got, err := s.Prune(ctx, p); err != nil || got != (db.Pruned{}) {
					b.Fatalf("Prune = %+v, %v; want nothing", got, err)
				}
			}
		})
	}
}
