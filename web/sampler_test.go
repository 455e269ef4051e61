package web

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

func TestSampler_RunOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.Open(t)
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	store.NowFunc = func() time.Time { return now }
	s := NewSampler(SamplerConfig{Stats: store, Activity: store, NowFunc: store.Now, Window: time.Minute})

	// Two jobs due at 10:00; one waits, the other starts 3s late and
	// finishes within the first sample's window.
	for range 2 {
		if _, _, err := store.JobCreate(ctx, db.JobCreateParams{Type: "t", Payload: []byte(`{}`), RunAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(3 * time.Second)
	claims, err := store.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Max: 1, Lease: time.Minute})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v, %d claims", err, len(claims))
	}
	now = now.Add(2 * time.Second)
	if _, err := store.RunFinish(ctx, db.RunFinishParams{
		JobID: claims[0].Job.ID, Generation: claims[0].Job.LeaseGeneration, Outcome: db.OutcomeSucceeded,
	}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(5 * time.Second) // 10:00:10
	if err := s.runOnce(ctx); err != nil {
		t.Fatal(err)
	}

	got := s.Series()
	if len(got.Samples) != 1 || len(got.Minutes) != 1 {
		t.Fatalf("got %d samples, %d minutes; want 1 and 1", len(got.Samples), len(got.Minutes))
	}
	if p := got.Samples[0]; p.Ready != 1 || p.OldestReadyAgeSeconds != 10 {
		t.Errorf("sample: got %+v, want 1 ready, the oldest 10s late", p)
	}
	m := got.Minutes[0]
	if m.Finished != 1 || m.Started != 1 || m.LatenessP50Seconds == nil || *m.LatenessP50Seconds != 3 {
		t.Errorf("minute: got %+v, want 1 finished, 1 started 3s late", m)
	}

	// The next window sees nothing new; past the window the first sample
	// is dropped.
	now = now.Add(time.Minute) // 10:01:10
	if err := s.runOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Series(); len(got.Samples) != 1 || got.Minutes[0].Finished != 0 || got.Minutes[0].LatenessP95Seconds != nil {
		t.Errorf("after the window: got %+v, want one empty sample", got)
	}
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	d := []time.Duration{5 * time.Second, time.Second, 3 * time.Second, 2 * time.Second, 4 * time.Second}
	for _, c := range []struct {
		q    float64
		want float64
	}{{0.5, 3}, {0.95, 5}, {0, 1}, {1, 5}} {
		if got := quantile(d, c.q); got == nil || *got != c.want {
			t.Errorf("quantile(%v): got %v, want %v", c.q, got, c.want)
		}
	}
	if got := quantile(nil, 0.5); got != nil {
		t.Errorf("quantile of none: got %v, want nil", *got)
	}
}

// TestSampler_OutageLogsFew: samples of a store that fails every call, as
// through an outage of the database, log the 1st and 10th failure in a
// row, not each, and once that sampling works again.
func TestSampler_OutageLogsFew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	closed, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "closed.db"))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	var logs bytes.Buffer
	cfg := SamplerConfig{Stats: closed, Activity: closed, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	s := NewSampler(cfg)
	for range 30 {
		s.sample(ctx)
	}
	if n := strings.Count(logs.String(), `msg="sample stats"`); n != 2 {
		t.Errorf("30 failed samples in a row logged %d lines; want 2 (the 1st and the 10th):\n%s", n, logs.String())
	}
	store := sqlitetest.Open(t)
	s.cfg.Stats, s.cfg.Activity = store, store
	s.sample(ctx)
	s.sample(ctx)
	if n := strings.Count(logs.String(), `msg="sample stats works again"`); n != 1 {
		t.Errorf("sampling again logged %d lines that it works; want 1:\n%s", n, logs.String())
	}
}
