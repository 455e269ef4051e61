package bench_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sked-dev/sked/bench"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestRun runs every measurement at a small size and checks that each one
// accounted for all of its jobs. It asserts no timings.
func TestRun(t *testing.T) {
	cfg := bench.Config{Jobs: 300, Spike: 50, Backlog: 2_000, Workers: 16, Dir: t.TempDir()}
	out := run(t, cfg)
	for _, want := range []string{"sked bench --jobs 300 --backlog 2000 --workers 16 --sync full --spike 50", "enqueue 300 jobs (batches of 300)", "end to end", "last started", "spike due now", "ratio to spike due now"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// run runs every measurement with cfg, checks that each spike accounted for
// all of its jobs and that the database size was measured, and returns the
// printed report.
func run(t *testing.T, cfg bench.Config) *strings.Builder {
	t.Helper()
	r, err := bench.Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]bench.Spike{"spike": r.Spike.Ahead, "spike due now": r.Spike.Now,
		"backlog": r.Backlog.Ahead, "backlog due now": r.Backlog.Now} {
		if got := len(s.Lateness); got != cfg.Spike {
			t.Errorf("%s: %d runs started, want %d", name, got, cfg.Spike)
		}
	}
	if r.Backlog.Ahead.DBSize == 0 {
		t.Error("backlog: database size not measured")
	}
	var out strings.Builder
	if err := r.Write(&out, "0"); err != nil {
		t.Fatal(err)
	}
	return &out
}

// BenchmarkThroughput enqueues, claims and completes b.N no-op jobs; the
// jobs/s metric is end to end.
func BenchmarkThroughput(b *testing.B) {
	r, err := bench.RunThroughput(context.Background(), bench.Config{Jobs: b.N, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/(r.Enqueue+r.Run).Seconds(), "jobs/s")
	b.ReportMetric(float64(b.N)/r.Enqueue.Seconds(), "enqueue-jobs/s")
	b.ReportMetric(float64(b.N)/r.Run.Seconds(), "run-jobs/s")
}

// BenchmarkSpike runs b.N pairs of spikes of 2,000 jobs due at one
// instant, created ahead and then due as created, and reports the start
// lateness of the last of each.
func BenchmarkSpike(b *testing.B) {
	for b.Loop() {
		r, err := bench.RunSpikes(context.Background(), bench.Config{Dir: b.TempDir()}, 0)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(r.Ahead.Percentile(99).Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(r.Ahead.Percentile(100).Microseconds())/1000, "max-ms")
		b.ReportMetric(float64(r.Now.Percentile(50).Microseconds())/1000, "now-p50-ms")
		b.ReportMetric(float64(r.Now.Percentile(99).Microseconds())/1000, "now-p99-ms")
	}
}

// TestRunPostgres runs every measurement at a tiny size on three nodes
// sharing one PostgreSQL schema and checks that each accounted for all of
// its jobs and that the report has every row. It skips without a
// PostgreSQL server (postgrestest.ServerURL).
func TestRunPostgres(t *testing.T) {
	url := postgrestest.ServerURL(t)
	cfg := bench.Config{Jobs: 200, Spike: 50, Backlog: 10, Workers: 16, DB: url, Nodes: 3}
	out := run(t, cfg)
	for _, want := range []string{"PostgreSQL · 3 node(s)", "--nodes 3 --jobs 200 --backlog 10 --workers 16 --spike 50",
		"enqueue 200 jobs", "claim+complete (3 pools, 16 slots)", "end to end", "POST /jobs/batch", "remote pool", "end to end over HTTP",
		"start lateness", "last started", "last finished", "backlog 10", "ratio to spike", "peak RSS", "database tables with the backlog"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
