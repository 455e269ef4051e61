package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sked-dev/sked/db/postgres"
)

// Report is every figure of one `sked bench` run.
type Report struct {
	Config     Config
	Throughput Throughput
	HTTP       HTTP
	Spike      Spikes
	Backlog    Spikes
}

// Run measures throughput, the spike and the spike with a backlog, in that
// order (the backlog's large file last). progress, if not nil, hears what
// is running.
func Run(ctx context.Context, cfg Config, progress io.Writer) (Report, error) {
	cfg = cfg.withDefaults()
	if progress == nil {
		progress = io.Discard
	}
	r := Report{Config: cfg}
	var err error
	fmt.Fprintf(progress, "throughput: %d jobs, %d workers…\n", cfg.Jobs, cfg.Workers)
	if r.Throughput, err = RunThroughput(ctx, cfg); err != nil {
		return r, fmt.Errorf("throughput: %w", err)
	}
	fmt.Fprintf(progress, "http: %d jobs through the API on loopback…\n", cfg.Jobs)
	if r.HTTP, err = RunHTTP(ctx, cfg); err != nil {
		return r, fmt.Errorf("http: %w", err)
	}
	fmt.Fprintf(progress, "spike: %d jobs due at once, created ahead, then due as created…\n", cfg.Spike)
	if r.Spike, err = RunSpikes(ctx, cfg, 0); err != nil {
		return r, fmt.Errorf("spike: %w", err)
	}
	fmt.Fprintf(progress, "backlog: the spikes with %d future jobs…\n", cfg.Backlog)
	if r.Backlog, err = RunSpikes(ctx, cfg, cfg.Backlog); err != nil {
		return r, fmt.Errorf("backlog: %w", err)
	}
	return r, nil
}

// Command is the sked bench command line that reproduces cfg.
func (c Config) Command() string {
	c = c.withDefaults()
	cmd := "sked bench"
	if c.DB != "" {
		cmd += fmt.Sprintf(" --db '%s' --nodes %d", postgres.Redacted(c.DB), c.Nodes)
	}
	cmd += fmt.Sprintf(" --jobs %d --backlog %d --workers %d", c.Jobs, c.Backlog, c.Workers)
	if c.DB == "" {
		cmd += " --sync " + strings.ToLower(c.Sync)
	}
	if c.Spike != (Config{}).withDefaults().Spike {
		cmd += fmt.Sprintf(" --spike %d", c.Spike)
	}
	return cmd
}

// Write prints the report as one table, with the command that reproduces it
// and the machine's load.
func (r Report) Write(w io.Writer, load string) error {
	t, h, s, b := r.Throughput, r.HTTP, r.Spike, r.Backlog
	backend, pools, dbSize := fmt.Sprintf("SQLite synchronous=%s", r.Config.Sync), "pool", "database file with the backlog"
	if r.Config.DB != "" {
		backend = fmt.Sprintf("PostgreSQL · %d node(s)", r.Config.Nodes)
		pools, dbSize = fmt.Sprintf("%d pools", r.Config.Nodes), "database tables with the backlog"
	}
	fmt.Fprintf(w, "sked bench · %s · %d CPUs · load %s\n", backend, runtime.NumCPU(), load)
	fmt.Fprintf(w, "command: %s\n\n", r.Config.Command())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")) }
	row("test", "measure", "value", "target")
	row("throughput", fmt.Sprintf("enqueue %d jobs (batches of %d)", t.Jobs, min(t.BatchLen, t.Jobs)), rate(t.Jobs, t.Enqueue), "")
	row("throughput", fmt.Sprintf("claim+complete (%s, %d slots)", pools, t.Workers), rate(t.Jobs, t.Run), "")
	row("throughput", "end to end", rate(t.Jobs, t.Enqueue+t.Run), "≥ 20,000/s")
	row("http", fmt.Sprintf("enqueue POST /jobs/batch (%d clients)", httpClients), rate(h.Jobs, h.Enqueue), "≥ 20,000/s")
	row("http", fmt.Sprintf("claim+complete by a remote pool (%d slots)", h.Workers), rate(h.Jobs, h.Remote), "")
	row("http", "end to end over HTTP", rate(h.Jobs, h.Enqueue+h.Remote), "")
	backlog := fmt.Sprintf("backlog %s", count(b.Ahead.Backlog))
	for _, x := range []struct {
		name   string
		s      Spike
		target bool
	}{{"spike", s.Ahead, true}, {"spike due now", s.Now, false}, {backlog, b.Ahead, true}, {backlog + " due now", b.Now, false}} {
		p99, last := "", ""
		if x.target {
			p99, last = "p99 ≤ 50 ms", "≤ 100 ms"
		}
		row(x.name, fmt.Sprintf("start lateness min/p50/p95/p99 (%d jobs)", x.s.Jobs),
			fmt.Sprintf("%s / %s / %s / %s", ms(x.s.Percentile(0)), ms(x.s.Percentile(50)), ms(x.s.Percentile(95)), ms(x.s.Percentile(99))), p99)
		row(x.name, "last started (max lateness)", ms(x.s.Percentile(100)), last)
		row(x.name, "last finished", ms(x.s.LastFinish), "")
	}
	for _, x := range []struct {
		name          string
		with, without Spike
	}{{"ratio to spike: p99 · last finished", b.Ahead, s.Ahead}, {"ratio to spike due now: p99 · last finished", b.Now, s.Now}} {
		row("backlog", x.name, fmt.Sprintf("%.2f · %.2f", ratio(x.with.Percentile(99), x.without.Percentile(99)),
			ratio(x.with.LastFinish, x.without.LastFinish)), "≤ 1.2")
	}
	row("memory", "peak RSS: throughput · http · spikes · backlog",
		fmt.Sprintf("%s · %s · %s · %s", mib(t.PeakRSS), mib(h.PeakRSS), mib(s.Ahead.PeakRSS), mib(b.Ahead.PeakRSS)), "≤ 150 MiB")
	row("memory", dbSize, mib(b.Ahead.DBSize), "")
	return tw.Flush()
}

func rate(n int, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return count(int(float64(n)/d.Seconds())) + "/s"
}

// count writes n with thousands separators.
func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}
