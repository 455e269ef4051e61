package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/metrics"
)

// TestMetrics_TypeLabelsBounded: jobs of more types than MaxTypeLabels run.
// The metrics labelled by type give the first MaxTypeLabels types a series
// each and count the rest together under OtherTypes, so that a client that
// makes up types cannot grow the scrape without end; nothing goes
// uncounted.
func TestMetrics_TypeLabelsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.Open(t)
	m := metrics.New(metrics.Config{Stats: store, NowFunc: store.Now})
	obs := m.Store(store)

	const extra = 3
	n := metrics.MaxTypeLabels + extra
	for i := range n {
		if _, _, err := obs.JobCreate(ctx, db.JobCreateParams{Type: fmt.Sprintf("type-%03d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	due := byType(t, scrape(t, m.Handler())["sked_jobs_due_next_minute_by_type"], nil)
	checkBounded(t, "sked_jobs_due_next_minute_by_type", due, n, extra)

	claims, err := obs.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Max: n, Lease: time.Minute})
	if err != nil || len(claims) != n {
		t.Fatalf("claim: %d claims, %v; want %d", len(claims), err, n)
	}
	running := byType(t, scrape(t, m.Handler())["sked_running_jobs"], nil)
	checkBounded(t, "sked_running_jobs", running, n, extra)

	for _, c := range claims {
		if _, err := obs.RunFinish(ctx, db.RunFinishParams{JobID: c.Job.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	runs := byType(t, scrape(t, m.Handler())["sked_runs_total"], map[string]string{"outcome": "succeeded"})
	checkBounded(t, "sked_runs_total", runs, n, extra)
	for typ := range running {
		if _, ok := runs[typ]; !ok {
			t.Errorf("type %s had a series of its own in sked_running_jobs and none in sked_runs_total: a type keeps its label", typ)
		}
	}
}

// checkBounded checks that counts, by type label, give MaxTypeLabels types
// one job each and OtherTypes the other extra of total.
func checkBounded(t *testing.T, name string, counts map[string]float64, total, extra int) {
	t.Helper()
	sum := 0.0
	for typ, v := range counts {
		sum += v
		if typ != metrics.OtherTypes && v != 1 {
			t.Errorf("%s{type=%q} = %v; want 1", name, typ, v)
		}
	}
	if len(counts) != metrics.MaxTypeLabels+1 || counts[metrics.OtherTypes] != float64(extra) || sum != float64(total) {
		t.Errorf("%s: %d series, %v under %s, %v in all; want %d series, %d under %s, %d in all",
			name, len(counts), counts[metrics.OtherTypes], metrics.OtherTypes, sum, metrics.MaxTypeLabels+1, extra, metrics.OtherTypes, total)
	}
}

// byType is the values of a family's metrics by their type label, of those
// that also carry the labels of match.
func byType(t *testing.T, f *dto.MetricFamily, match map[string]string) map[string]float64 {
	t.Helper()
	if f == nil {
		t.Fatal("family not in the scrape")
	}
	out := map[string]float64{}
next:
	for _, m := range f.GetMetric() {
		typ := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "type" {
				typ = l.GetValue()
			} else if want, ok := match[l.GetName()]; ok && want != l.GetValue() {
				continue next
			}
		}
		out[typ] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	return out
}
