package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/metrics"
)

// TestMetrics_RepeatedFinishCountedOnce: a worker that lost the answer to
// its completion sends it again, and the store answers the repeat as
// recorded. One run ended, so sked_runs_total counts one.
func TestMetrics_RepeatedFinishCountedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.Open(t)
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	store.NowFunc = func() time.Time { return t0 }
	m := metrics.New(metrics.Config{Stats: store, NowFunc: store.Now})
	obs := m.Store(store)

	j, _, err := obs.JobCreate(ctx, db.JobCreateParams{Type: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := obs.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Max: 1, Lease: time.Minute})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %d claims, %v", len(claims), err)
	}
	p := db.RunFinishParams{JobID: j.ID, Generation: claims[0].Job.LeaseGeneration, Outcome: db.OutcomeSucceeded}
	for range 2 {
		if _, err := obs.RunFinish(ctx, p); err != nil {
			t.Fatalf("finish (the second a repeat): %v", err)
		}
	}
	if runs, _, err := store.RunList(ctx, db.RunListParams{JobID: j.ID}); err != nil || len(runs) != 1 {
		t.Fatalf("runs of %s: %d, %v; want 1", j.ID, len(runs), err)
	}
	labels := map[string]string{"type": "ok", "outcome": "succeeded"}
	if v := value(t, scrape(t, m.Handler()), "sked_runs_total", labels); v != 1 {
		t.Errorf("sked_runs_total%v = %v after one run and a repeat of its report; want 1", labels, v)
	}
}
