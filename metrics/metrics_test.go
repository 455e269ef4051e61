package metrics_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/internal/buildinfo"
	"github.com/sked-dev/sked/metrics"
	"github.com/sked-dev/sked/worker"
)

// TestMetrics_Scrape runs jobs through a pool on an observed real store,
// provokes stale writes, a lease expiration and missed slots, prunes a
// finished job, and checks every sked_ measure in a parsed scrape of
// /metrics.
func TestMetrics_Scrape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.Open(t)
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Pointer[time.Time]
	clock.Store(&t0)
	store.NowFunc = func() time.Time { return *clock.Load() }
	m := metrics.New(metrics.Config{Stats: store, NowFunc: store.Now})
	obs := m.Store(store)

	create := func(p db.JobCreateParams) db.Job {
		t.Helper()
		j, _, err := obs.JobCreate(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	ok := create(db.JobCreateParams{Type: "ok"})
	fail := create(db.JobCreateParams{Type: "fail", MaxAttempts: 1})
	create(db.JobCreateParams{Type: "other"}) // stays ready, due at t0

	pool := worker.NewPool(worker.PoolConfig{
		Store: obs, NowFunc: store.Now, Lease: time.Minute,
		Handlers: map[string]worker.HandlerFunc{
			"ok":   func(context.Context, *worker.Job) error { return nil },
			"fail": func(context.Context, *worker.Job) error { return errors.New("boom") },
		},
	})
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { pool.Run(pctx); close(done) }()
	waitState(t, store, ok.ID, db.StateDone)
	waitState(t, store, fail.ID, db.StateDead)
	stop()
	<-done

	// A claim whose worker writes with the wrong generation, then vanishes.
	slow := create(db.JobCreateParams{Type: "slow", MaxAttempts: 1})
	rec := create(db.JobCreateParams{Type: "rec", Schedule: "@every 1m"})
	claims, err := obs.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"slow"}, Max: 1, Lease: time.Second})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim slow: %v, %d claims", err, len(claims))
	}
	gen := claims[0].Job.LeaseGeneration
	if _, err := obs.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: slow.ID, Generation: gen + 1}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("heartbeat with a wrong generation: %v, want ErrStale", err)
	}
	if _, err := obs.RunFinish(ctx, db.RunFinishParams{JobID: slow.ID, Generation: gen + 1, Outcome: db.OutcomeSucceeded}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("finish with a wrong generation: %v, want ErrStale", err)
	}

	// Ten minutes pass: the lease expires and the schedule misses slots.
	t1 := t0.Add(10 * time.Minute)
	clock.Store(&t1)
	if n, err := obs.RunReapExpired(ctx); err != nil || n != 1 {
		t.Fatalf("reap: %d, %v; want 1", n, err)
	}
	recClaims, err := obs.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"rec"}, Max: 1, Lease: time.Hour})
	if err != nil || len(recClaims) != 1 {
		t.Fatalf("claim rec: %v, %d claims", err, len(recClaims))
	}
	rec, err = store.JobGet(ctx, rec.ID)
	if err != nil || rec.MissedSlots == 0 {
		t.Fatalf("recurring job after ten minutes: %d missed slots, %v; want some", rec.MissedSlots, err)
	}
	create(db.JobCreateParams{Type: "other", RunAt: t1.Add(30 * time.Second)})
	create(db.JobCreateParams{Type: "other", RunAt: t1.Add(2 * time.Hour)})
	// Retention takes ok (done at t0); the dead jobs stay.
	if n, err := obs.Prune(ctx, db.PruneParams{Before: t1, Limit: 10}); err != nil || n.Jobs != 1 {
		t.Fatalf("prune: %+v, %v; want 1 job", n, err)
	}

	got := scrape(t, m.Handler())
	wantValues(t, got, []sample{
		{"sked_jobs", map[string]string{"state": "ready"}, 3},
		{"sked_jobs", map[string]string{"state": "running"}, 1},
		{"sked_jobs", map[string]string{"state": "done"}, 0},
		{"sked_jobs", map[string]string{"state": "dead"}, 2},
		{"sked_jobs", map[string]string{"state": "cancelled"}, 0},
		{"sked_jobs", map[string]string{"state": "paused"}, 0},
		{"sked_dead_jobs", nil, 2},
		{"sked_database_up", nil, 1},
		{"sked_running_jobs", map[string]string{"type": "rec"}, 1},
		{"sked_running_jobs", map[string]string{"type": "ok"}, 0}, // it ran, though no scrape saw it run
		{"sked_ready_oldest_age_seconds", nil, 600},
		{"sked_jobs_due_next_minute", nil, 2},
		{"sked_ready_oldest_age_by_type_seconds", map[string]string{"type": "other"}, 600},
		{"sked_jobs_due_next_minute_by_type", map[string]string{"type": "other"}, 2},
		{"sked_missed_slots", nil, float64(rec.MissedSlots)},
		{"sked_schedules_quiet", nil, 0},
		{"sked_schedules_failing", nil, 0}, // the schedule's firing is still running
		{"sked_runs_total", map[string]string{"type": "ok", "outcome": "succeeded"}, 1},
		{"sked_runs_total", map[string]string{"type": "fail", "outcome": "failed"}, 1},
		{"sked_lease_expirations_total", nil, 1},
		{"sked_stale_writes_total", map[string]string{"write": "heartbeat"}, 1},
		{"sked_stale_writes_total", map[string]string{"write": "finish"}, 1},
		{"sked_pruned_total", map[string]string{"what": "jobs"}, 1},
		{"sked_pruned_total", map[string]string{"what": "runs"}, 0},
		{"sked_prune_errors_total", nil, 0},
	})
	// Two recorded runs, each the first attempt.
	if h := histogram(t, got, "sked_run_attempts"); h.GetSampleCount() != 2 || h.GetSampleSum() != 2 {
		t.Errorf("sked_run_attempts: count %d sum %v, want 2 and 2", h.GetSampleCount(), h.GetSampleSum())
	}
	// ok, fail and slow started on time; rec's slot t0+1m started at t0+10m.
	if h := histogram(t, got, "sked_start_lateness_seconds"); h.GetSampleCount() != 4 || h.GetSampleSum() != 540 {
		t.Errorf("sked_start_lateness_seconds: count %d sum %v, want 4 and 540", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := histogram(t, got, "sked_completion_duration_seconds"); h.GetSampleCount() != 3 {
		t.Errorf("sked_completion_duration_seconds: count %d, want 3 (two runs and a stale finish)", h.GetSampleCount())
	}
	if h := histogram(t, got, "sked_claim_duration_seconds"); h.GetSampleCount() < 3 {
		t.Errorf("sked_claim_duration_seconds: count %d, want at least 3", h.GetSampleCount())
	}

	// Once nothing of a type runs, its series says 0; it does not vanish.
	if _, err := obs.RunFinish(ctx, db.RunFinishParams{JobID: rec.ID, Generation: recClaims[0].Job.LeaseGeneration, Outcome: db.OutcomeSucceeded}); err != nil {
		t.Fatal(err)
	}
	if v := value(t, scrape(t, m.Handler()), "sked_running_jobs", map[string]string{"type": "rec"}); v != 0 {
		t.Errorf("sked_running_jobs{type=rec} after its run = %v, want 0", v)
	}
}

// TestMetrics_AdoptedClaims: a job leased by a claim whose commit's answer
// was lost, which the pool then finds held by its worker and runs, is
// observed as a claimed job is (its start lateness, its type among the
// running, its attempt at its finish) and counted as adopted, once.
func TestMetrics_AdoptedClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.Open(t)
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Pointer[time.Time]
	clock.Store(&t0)
	store.NowFunc = func() time.Time { return *clock.Load() }
	lost := &dbtest.CommitLost{Store: store}
	m := metrics.New(metrics.Config{Stats: store, NowFunc: store.Now})
	obs := m.Store(lost)
	j, _, err := obs.JobCreate(ctx, db.JobCreateParams{Type: "adopt"})
	if err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(time.Minute) // it starts a minute late
	clock.Store(&t1)

	pool := worker.NewPool(worker.PoolConfig{
		Store: obs, WorkerID: "box/1", NowFunc: store.Now, Lease: time.Minute,
		Handlers: map[string]worker.HandlerFunc{"adopt": func(context.Context, *worker.Job) error { return nil }},
	})
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { pool.Run(pctx); close(done) }()
	waitState(t, store, j.ID, db.StateDone)
	stop()
	<-done
	if !lost.Lost() {
		t.Fatal("no claim's answer was lost: the test tested nothing")
	}

	got := scrape(t, m.Handler())
	wantValues(t, got, []sample{
		{"sked_claims_adopted_total", nil, 1},
		{"sked_runs_total", map[string]string{"type": "adopt", "outcome": "succeeded"}, 1},
		{"sked_running_jobs", map[string]string{"type": "adopt"}, 0}, // it ran, though no scrape saw it run
	})
	if h := histogram(t, got, "sked_start_lateness_seconds"); h.GetSampleCount() != 1 || h.GetSampleSum() != 60 {
		t.Errorf("sked_start_lateness_seconds: count %d sum %v, want 1 and 60", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := histogram(t, got, "sked_run_attempts"); h.GetSampleCount() != 1 || h.GetSampleSum() != 1 {
		t.Errorf("sked_run_attempts: count %d sum %v, want 1 and 1", h.GetSampleCount(), h.GetSampleSum())
	}
}

// TestMetrics_HeldThatEndedIsNotAdopted: RunsHeld reads jobs held by its
// worker, and two of their runs end before it answers, one claimed and
// observed here, the other leased by a claim whose answer was lost; the
// run still held is adopted, once, and the two that ended are not: no
// second lateness or attempt, nothing adopted, no type of theirs among the
// running.
func TestMetrics_HeldThatEndedIsNotAdopted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.Open(t)
	lost := &dbtest.CommitLost{Store: store}
	lost.Disarm()
	ending := &endsAfterHeldRead{Store: lost}
	m := metrics.New(metrics.Config{Stats: store, NowFunc: store.Now})
	obs := m.Store(ending)
	create := func(typ string) {
		t.Helper()
		if _, _, err := obs.JobCreate(ctx, db.JobCreateParams{Type: typ}); err != nil {
			t.Fatal(err)
		}
	}
	const worker = "box/1"
	create("claimed")
	claims, err := obs.RunClaim(ctx, db.RunClaimParams{WorkerID: worker, Types: []string{"claimed"}, Max: 1, Lease: time.Minute})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %d claims, %v", len(claims), err)
	}
	create("gone")
	create("held")
	lost.Arm()
	if _, err := obs.RunClaim(ctx, db.RunClaimParams{WorkerID: worker, Types: []string{"gone", "held"}, Max: 2, Lease: time.Minute}); !errors.Is(err, db.ErrCommitUnknown) {
		t.Fatalf("claim whose answer is lost: %v", err)
	}
	held, err := store.RunsHeld(ctx, worker)
	if err != nil || len(held) != 3 {
		t.Fatalf("held: %d, %v; want 3", len(held), err)
	}
	ending.then = func() {
		for _, c := range held {
			if c.Job.Type == "held" {
				continue
			}
			if _, err := obs.RunFinish(ctx, db.RunFinishParams{JobID: c.Job.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeSucceeded}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, err := obs.RunsHeld(ctx, worker); err != nil || len(got) != 3 {
		t.Fatalf("RunsHeld: %d, %v; want the 3 read", len(got), err)
	}
	ending.then = func() {}
	if _, err := obs.RunsHeld(ctx, worker); err != nil { // the held one again
		t.Fatal(err)
	}

	got := scrape(t, m.Handler())
	wantValues(t, got, []sample{
		{"sked_claims_adopted_total", nil, 1},
		{"sked_runs_total", map[string]string{"type": "claimed", "outcome": "succeeded"}, 1},
		{"sked_runs_total", map[string]string{"type": "gone", "outcome": "succeeded"}, 1},
		{"sked_running_jobs", map[string]string{"type": "held"}, 1},
	})
	for _, s := range got["sked_running_jobs"].GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "type" && l.GetValue() == "gone" {
				t.Errorf("sked_running_jobs has type gone, whose one run ended before it was read as held")
			}
		}
	}
	if h := histogram(t, got, "sked_start_lateness_seconds"); h.GetSampleCount() != 2 {
		t.Errorf("sked_start_lateness_seconds: count %d, want 2 (the claim observed, the run adopted)", h.GetSampleCount())
	}
	if h := histogram(t, got, "sked_run_attempts"); h.GetSampleCount() != 1 {
		t.Errorf("sked_run_attempts: count %d, want 1 (the claim observed)", h.GetSampleCount())
	}
}

// endsAfterHeldRead is a store whose RunsHeld calls then after reading,
// before it answers: runs end while a RunsHeld is under way.
type endsAfterHeldRead struct {
	db.Store
	then func()
}

// RunsHeld reads through the store, then calls then.
func (s *endsAfterHeldRead) RunsHeld(ctx context.Context, worker string) ([]db.Claim, error) {
	held, err := s.Store.RunsHeld(ctx, worker)
	s.then()
	return held, err
}

// TestMetrics_StatsFailure checks that a database that cannot be read
// leaves its gauges out, says so in sked_database_up, and still serves the
// observed metrics, and that a prune it refuses is counted.
func TestMetrics_StatsFailure(t *testing.T) {
	t.Parallel()
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "sked.db"))
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(metrics.Config{Stats: store})
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Store(store).Prune(context.Background(), db.PruneParams{Before: time.Now(), Limit: 10}); err == nil {
		t.Fatal("prune on a closed database: no error")
	}
	got := scrape(t, m.Handler())
	if _, ok := got["sked_jobs"]; ok {
		t.Error("sked_jobs served from a closed database")
	}
	if v := value(t, got, "sked_lease_expirations_total", nil); v != 0 {
		t.Errorf("sked_lease_expirations_total = %v, want 0", v)
	}
	if v := value(t, got, "sked_prune_errors_total", nil); v != 1 {
		t.Errorf("sked_prune_errors_total = %v, want 1 (the failed prune)", v)
	}
	if v := value(t, got, "sked_database_up", nil); v != 0 {
		t.Errorf("sked_database_up = %v, want 0: the gauges read from it are absent", v)
	}
}

// TestMetrics_BuildInfo checks that sked_build_info says what `sked
// version` says.
func TestMetrics_BuildInfo(t *testing.T) {
	t.Parallel()
	b := buildinfo.Read()
	labels := map[string]string{"version": b.Version, "revision": b.Commit, "goversion": b.GoVersion}
	if v := value(t, scrape(t, metrics.New(metrics.Config{}).Handler()), "sked_build_info", labels); v != 1 {
		t.Errorf("sked_build_info%v = %v, want 1", labels, v)
	}
}

func waitState(t *testing.T, s db.Store, id string, state db.JobState) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		j, err := s.JobGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s, want %s", id, j.State, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// scrape GETs /metrics from h and parses the text format.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse scrape: %v\n%s", err, rec.Body)
	}
	return fams
}

// find returns the metric of family name with exactly labels.
func find(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("%s is not in the scrape", name)
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		return m
	}
	t.Fatalf("%s%v is not in the scrape", name, labels)
	return nil
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := find(t, fams, name, labels)
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	t.Fatalf("%s is neither a gauge nor a counter", name)
	return 0
}

// sample is the value a scrape should have for the series of name with
// labels.
type sample struct {
	name   string
	labels map[string]string
	want   float64
}

// wantValues checks each of samples against fams.
func wantValues(t *testing.T, fams map[string]*dto.MetricFamily, samples []sample) {
	t.Helper()
	for _, c := range samples {
		if v := value(t, fams, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
}

func histogram(t *testing.T, fams map[string]*dto.MetricFamily, name string) *dto.Histogram {
	t.Helper()
	return find(t, fams, name, nil).GetHistogram()
}
