// Package metrics exposes what an operator watches (docs/operations.md,
// "Metrics") in the Prometheus text format, on a registry of its own (never the global
// default one, so that two servers in one process do not collide).
//
// Two kinds of measure meet here. Gauges of the queue (oldest ready job, jobs
// due in the next minute, jobs per state, running per type, dead letters,
// missed slots) are read from the database at every scrape through
// db.StatsReader, so they are true whichever process changed the rows.
// Counters and histograms of what happens (claim and completion latency,
// start lateness, attempts, stale writes, lease expirations, run outcomes,
// pruned history) are observed by Store, a decorator of the store the pool,
// the reaper, the pruner and the worker API use.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/buildinfo"
)

// Config is what New needs. Zero values mean the defaults stated per field.
type Config struct {
	// Stats is read at every scrape for the queue gauges. Nil leaves them
	// out.
	Stats db.StatsReader
	// NowFunc is the store's clock, which due times are compared with. Nil
	// means time.Now.
	NowFunc func() time.Time
	// Logger receives scrape errors and the warning that job types ran
	// out of type labels (MaxTypeLabels). Nil discards.
	Logger *slog.Logger
}

// StatsTimeout bounds how long a scrape waits for the database.
const StatsTimeout = 5 * time.Second

// Metrics is sked's registry and the collectors observed where things
// happen. Safe for concurrent use.
type Metrics struct {
	reg    *prometheus.Registry
	logger *slog.Logger
	now    func() time.Time
	types  *typeLabels
	queue  *dbCollector // nil without Config.Stats

	claimSeconds     prometheus.Histogram
	finishSeconds    prometheus.Histogram
	startLateness    prometheus.Histogram
	runAttempts      prometheus.Histogram
	leaseExpirations prometheus.Counter
	adoptedClaims    prometheus.Counter
	staleWrites      *prometheus.CounterVec // by write: heartbeat or finish
	runs             *prometheus.CounterVec // by type and outcome
	pruned           *prometheus.CounterVec // by what: jobs, runs or events
	pruneErrors      prometheus.Counter
}

// latencyBuckets are for store calls: 0.5 ms to about 4 s.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 14)

// New returns the metrics of one sked process, with the Go runtime and
// process collectors registered beside sked's own.
func New(cfg Config) *Metrics {
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		reg:    prometheus.NewRegistry(),
		logger: cfg.Logger,
		now:    cfg.NowFunc,
		types:  newTypeLabels(cfg.Logger),
		claimSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sked_claim_duration_seconds",
			Help:    "Time a claim of due jobs took in the store, empty claims included.",
			Buckets: latencyBuckets,
		}),
		finishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sked_completion_duration_seconds",
			Help:    "Time recording a run's outcome took in the store.",
			Buckets: latencyBuckets,
		}),
		startLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sked_start_lateness_seconds",
			Help:    "Start minus due time of each claimed job, observed at claim.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}),
		runAttempts: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sked_run_attempts",
			Help:    "Attempt number of each run this process claimed whose outcome was recorded (released runs excluded).",
			Buckets: []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 50},
		}),
		leaseExpirations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sked_lease_expirations_total",
			Help: "Runs whose lease expired and were taken back by the reaper.",
		}),
		adoptedClaims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sked_claims_adopted_total",
			Help: "Jobs leased by a claim whose commit's answer was lost, found held by its worker afterwards and run; the other claim measures count them too.",
		}),
		staleWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sked_stale_writes_total",
			Help: "Heartbeats and completions refused because their lease generation no longer held the job.",
		}, []string{"write"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sked_runs_total",
			Help: "Runs whose outcome was recorded, by job type and outcome.",
		}, []string{"type", "outcome"}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sked_pruned_total",
			Help: "History deleted by retention: one-off jobs (each with its runs and events), and runs and events of recurring jobs.",
		}, []string{"what"}),
		pruneErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sked_prune_errors_total",
			Help: "Retention deletions that failed (each is logged); the next pass tries again.",
		}),
	}
	m.reg.MustRegister(m.claimSeconds, m.finishSeconds, m.startLateness, m.runAttempts,
		m.leaseExpirations, m.adoptedClaims, m.staleWrites, m.runs, m.pruned, m.pruneErrors, newBuildInfo(buildinfo.Read()),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, w := range []string{staleHeartbeat, staleFinish} {
		m.staleWrites.WithLabelValues(w)
	}
	for _, w := range []string{prunedJobs, prunedRuns, prunedEvents} {
		m.pruned.WithLabelValues(w)
	}
	if cfg.Stats != nil {
		m.queue = newDBCollector(cfg.Stats, cfg.NowFunc, m.types)
		m.reg.MustRegister(m.queue)
	}
	return m
}

// newBuildInfo returns sked_build_info: always 1, with labels saying which
// sked this is, in the shape of Prometheus's own build_info metrics.
func newBuildInfo(b buildinfo.Info) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sked_build_info",
		Help: "Always 1; the labels are the version, commit (revision) and Go version of this sked.",
		ConstLabels: prometheus.Labels{
			"version": b.Version, "revision": b.Commit, "goversion": b.GoVersion,
		},
	})
	g.Set(1)
	return g
}

// Labels of sked_stale_writes_total.
const (
	staleHeartbeat = "heartbeat"
	staleFinish    = "finish"
)

// Labels of sked_pruned_total.
const (
	prunedJobs   = "jobs"
	prunedRuns   = "runs"
	prunedEvents = "events"
)

// Registry is the registry behind Handler; an embedding program may register
// its own collectors on it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format. A failed read
// of the database leaves its gauges out of the answer and is logged; the
// other metrics are still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(m.logger.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	})
}

// dbCollector reads the queue gauges from the database at scrape time.
type dbCollector struct {
	stats db.StatsReader
	now   func() time.Time
	types *typeLabels

	mu          sync.Mutex
	everRunning map[string]bool // guarded by mu: the type labels sked_running_jobs has shown

	up, oldestAge, dueNextMinute, jobs, running, dead, missed, quiet, failing *prometheus.Desc
	typeOldestAge, typeDueNextMinute                                          *prometheus.Desc
}

func newDBCollector(stats db.StatsReader, now func() time.Time, types *typeLabels) *dbCollector {
	return &dbCollector{
		stats:       stats,
		now:         now,
		types:       types,
		everRunning: map[string]bool{},
		oldestAge: prometheus.NewDesc("sked_ready_oldest_age_seconds",
			"How long the oldest due ready job, of any type (served by a worker or not), has waited past its due time; 0 when none is due.", nil, nil),
		dueNextMinute: prometheus.NewDesc("sked_jobs_due_next_minute",
			"Ready jobs due within the next minute, overdue ones included.", nil, nil),
		typeOldestAge: prometheus.NewDesc("sked_ready_oldest_age_by_type_seconds",
			"How long the oldest due ready job of a type has waited past its due time; types with no job due within a minute are absent.", []string{"type"}, nil),
		typeDueNextMinute: prometheus.NewDesc("sked_jobs_due_next_minute_by_type",
			"Ready jobs due within the next minute, overdue ones included, by type; types with none are absent.", []string{"type"}, nil),
		up: prometheus.NewDesc("sked_database_up",
			"1 when this scrape read the database's statistics, 0 when it could not (the database is unreachable or failing): the gauges read from it are absent then.", nil, nil),
		jobs:    prometheus.NewDesc("sked_jobs", "Jobs in the database by state.", []string{"state"}, nil),
		running: prometheus.NewDesc("sked_running_jobs", "Jobs leased to a worker, by type.", []string{"type"}, nil),
		dead:    prometheus.NewDesc("sked_dead_jobs", "Jobs in the dead-letter list (state dead).", nil, nil),
		missed: prometheus.NewDesc("sked_missed_slots",
			"Recurring slots that did not run (overlap, downtime, paused, clock step, skipped), summed over the jobs in the database: it falls when a job is deleted or pruned, or a schedule's change takes back slots it had counted.", nil, nil),
		quiet: prometheus.NewDesc("sked_schedules_quiet",
			"Recurring jobs whose dead-man's switch fired: no run succeeded within expectSuccessWithin.", nil, nil),
		failing: prometheus.NewDesc("sked_schedules_failing",
			"Recurring jobs whose last firing spent its attempts (gave up), until a firing succeeds.", nil, nil),
	}
}

func (c *dbCollector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{c.up, c.oldestAge, c.dueNextMinute, c.typeOldestAge, c.typeDueNextMinute, c.jobs, c.running, c.dead, c.missed, c.quiet, c.failing}
}

// Describe implements prometheus.Collector.
func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

// runningByLabel is sked_running_jobs' values: the running jobs by type
// label, and 0 for each label it showed before, so that a type's series
// does not vanish when nothing of it runs (a gap a graph or an alert on
// "running == 0" would read as no data).
func (c *dbCollector) runningByLabel(byType map[string]int64) map[string]int64 {
	out := c.types.byLabel(byType)
	c.mu.Lock()
	defer c.mu.Unlock()
	for label := range out {
		c.everRunning[label] = true
	}
	for label := range c.everRunning {
		if _, ok := out[label]; !ok {
			out[label] = 0
		}
	}
	return out
}

// claimed notes the types of claimed jobs, so that sked_running_jobs shows
// each from then on, although no scrape saw one of its jobs running.
func (c *dbCollector) claimed(claims []db.Claim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range claims {
		c.everRunning[c.types.label(cl.Job.Type)] = true
	}
}

// Collect implements prometheus.Collector with one read of the statistics.
func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), StatsTimeout)
	defer cancel()
	now := c.now()
	st, err := c.stats.Stats(ctx, now)
	if err != nil {
		// The gauges read from the database are absent, which an alert
		// on them reads as no data: sked_database_up says why.
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.oldestAge, prometheus.GaugeValue, db.Age(st.ReadyOldestDue, now).Seconds())
	ch <- prometheus.MustNewConstMetric(c.dueNextMinute, prometheus.GaugeValue, float64(st.DueNextMinute))
	for typ, d := range c.types.dueByLabel(st.DueByType) {
		ch <- prometheus.MustNewConstMetric(c.typeOldestAge, prometheus.GaugeValue, db.Age(d.Oldest, now).Seconds(), typ)
		ch <- prometheus.MustNewConstMetric(c.typeDueNextMinute, prometheus.GaugeValue, float64(d.NextMinute), typ)
	}
	for state, n := range st.JobsByState {
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), string(state))
	}
	for typ, n := range c.runningByLabel(st.RunningByType) {
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(n), typ)
	}
	ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(st.JobsByState[db.StateDead]))
	ch <- prometheus.MustNewConstMetric(c.missed, prometheus.GaugeValue, float64(st.MissedSlots))
	ch <- prometheus.MustNewConstMetric(c.quiet, prometheus.GaugeValue, float64(st.QuietSchedules))
	ch <- prometheus.MustNewConstMetric(c.failing, prometheus.GaugeValue, float64(st.FailingSchedules))
}
