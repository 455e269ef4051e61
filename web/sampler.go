package web

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/failurelog"
)

// Defaults of SamplerConfig.
const (
	DefaultSampleInterval = 10 * time.Second
	DefaultSampleWindow   = time.Hour
)

// SamplerConfig is what NewSampler needs. Zero values mean the defaults
// stated per field.
type SamplerConfig struct {
	// Stats reads the ready queue. Required.
	Stats db.StatsReader
	// Activity reads what runs did between two samples. Required.
	Activity db.ActivityReader
	// NowFunc is the store's clock. Nil means time.Now.
	NowFunc func() time.Time
	// Interval between samples; default DefaultSampleInterval.
	Interval time.Duration
	// Window of history kept; default DefaultSampleWindow.
	Window time.Duration
	// Logger receives failed samples. Nil discards.
	Logger *slog.Logger
}

// Sampler reads the store every Interval and keeps the samples of the last
// Window in memory, for the dashboard's charts. The history starts empty at
// each start of the process. Safe for concurrent use.
type Sampler struct {
	cfg SamplerConfig // immutable after NewSampler

	mu      sync.Mutex
	samples []sample  // oldest first, at most Window/Interval; guarded by mu
	last    time.Time // end of the last sampled window; guarded by mu

	failures failurelog.Log // the failed samples in a row; Run's alone
}

// sample is what one tick saw.
type sample struct {
	at        time.Time
	oldestAge time.Duration // age of the oldest due ready job; 0 when none
	ready     int64
	running   int64
	finished  int64           // runs finished since the previous sample
	lateness  []time.Duration // first attempts started since the previous sample
}

// NewSampler returns a sampler for cfg. It panics if Stats or Activity is
// nil.
func NewSampler(cfg SamplerConfig) *Sampler {
	if cfg.Stats == nil || cfg.Activity == nil {
		panic("web: SamplerConfig needs Stats and Activity")
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultSampleInterval)
	cfg.Window = cmp.Or(cfg.Window, DefaultSampleWindow)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sampler{cfg: cfg}
}

// Run samples at once and then every Interval until ctx is done. A failed
// sample is skipped, and logged as a failurelog.Log logs failures (the
// database's outage is a few lines); it never stops the loop.
func (s *Sampler) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sample takes one sample and logs how it went.
func (s *Sampler) sample(ctx context.Context) {
	switch err := s.runOnce(ctx); {
	case err == nil:
		s.failures.Worked(s.cfg.Logger, "sample stats works again")
	case ctx.Err() == nil:
		s.failures.Failed(s.cfg.Logger, slog.LevelWarn, "sample stats", err)
	}
}

// runOnce takes one sample: the queue now and the runs since the previous
// sample (or one Interval back, the first time).
func (s *Sampler) runOnce(ctx context.Context) error {
	now := s.cfg.NowFunc()
	s.mu.Lock()
	from := s.last
	s.mu.Unlock()
	if from.IsZero() || !from.Before(now) {
		from = now.Add(-s.cfg.Interval)
	}
	st, err := s.cfg.Stats.Stats(ctx, now)
	if err != nil {
		return err
	}
	act, err := s.cfg.Activity.RunActivity(ctx, db.RunActivityParams{From: from, To: now})
	if err != nil {
		return err
	}
	smp := sample{
		at: now, ready: st.JobsByState[db.StateReady], running: st.JobsByState[db.StateRunning],
		finished: act.Finished, lateness: act.Lateness, oldestAge: db.Age(st.ReadyOldestDue, now),
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = now
	s.samples = append(s.samples, smp)
	cut := 0
	for cut < len(s.samples) && now.Sub(s.samples[cut].at) >= s.cfg.Window {
		cut++
	}
	s.samples = slices.Delete(s.samples, 0, cut)
	return nil
}

// Series is the sampled history, the body of GET /stats/series.
type Series struct {
	IntervalSeconds float64  `json:"intervalSeconds"`
	WindowSeconds   float64  `json:"windowSeconds"`
	Samples         []Point  `json:"samples"` // oldest first
	Minutes         []Minute `json:"minutes"` // oldest first
}

// Point is one sample of the queue.
type Point struct {
	At                    time.Time `json:"at"`
	OldestReadyAgeSeconds float64   `json:"oldestReadyAgeSeconds"`
	Ready                 int64     `json:"ready"`
	Running               int64     `json:"running"`
}

// Minute sums the samples of one wall-clock minute (UTC). The lateness
// quantiles are nil when no first attempt started in it.
type Minute struct {
	At                 time.Time `json:"at"` // start of the minute
	Finished           int64     `json:"finished"`
	Started            int       `json:"started"` // first attempts sampled for lateness
	LatenessP50Seconds *float64  `json:"latenessP50Seconds"`
	LatenessP95Seconds *float64  `json:"latenessP95Seconds"`
}

// Series returns the history kept.
func (s *Sampler) Series() Series {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Series{
		IntervalSeconds: s.cfg.Interval.Seconds(), WindowSeconds: s.cfg.Window.Seconds(),
		Samples: make([]Point, 0, len(s.samples)), Minutes: []Minute{},
	}
	var late []time.Duration
	flush := func() {
		m := &out.Minutes[len(out.Minutes)-1]
		m.Started = len(late)
		m.LatenessP50Seconds, m.LatenessP95Seconds = quantile(late, 0.50), quantile(late, 0.95)
		late = late[:0]
	}
	for _, smp := range s.samples {
		out.Samples = append(out.Samples, Point{
			At: smp.at, OldestReadyAgeSeconds: smp.oldestAge.Seconds(), Ready: smp.ready, Running: smp.running,
		})
		minute := smp.at.UTC().Truncate(time.Minute)
		if n := len(out.Minutes); n == 0 || !out.Minutes[n-1].At.Equal(minute) {
			if n > 0 {
				flush()
			}
			out.Minutes = append(out.Minutes, Minute{At: minute})
		}
		out.Minutes[len(out.Minutes)-1].Finished += smp.finished
		late = append(late, smp.lateness...)
	}
	if len(out.Minutes) > 0 {
		flush()
	}
	return out
}

// quantile returns the q-quantile of d in seconds (nearest rank), sorting d;
// nil when d is empty.
func quantile(d []time.Duration, q float64) *float64 {
	if len(d) == 0 {
		return nil
	}
	slices.Sort(d)
	i := int(math.Ceil(q*float64(len(d)))) - 1
	v := d[max(0, i)].Seconds()
	return &v
}
