package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

// TestPollUntil_NoAnswer: a wait whose server stops answering asks it again
// for a minute since its last answer, on a clock of the test's whose pauses
// take no time: a restart that gives no answer to ten reads, over 56s, is
// waited for, where the wait gave up at the sixth of them, and a
// server that does not come back is given up on at the first read past the
// minute, with the job as last read.
func TestPollUntil_NoAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		silent    int32 // reads without an answer after the first, then the job is done
		wantReads int32
		wantErr   error
		wantTook  time.Duration // by the test's clock
	}{
		{"BackWithinAMinute", 10, 12, nil, 56 * time.Second},
		{"Gone", 1000, 13, ErrNoAnswer, 64 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var reads atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch n := reads.Add(1); {
				case n == 1:
					io.WriteString(w, `{"jobId": "j1", "state": "running"}`)
				case n <= 1+tc.silent:
					conn, _, _ := w.(http.Hijacker).Hijack()
					conn.Close() // no answer at all
				default:
					io.WriteString(w, `{"jobId": "j1", "state": "done"}`)
				}
			}))
			defer srv.Close()
			c := &Client{BaseURL: srv.URL, HTTP: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
			start := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
			now := start
			w := c.waiting(0)
			w.now = func() time.Time { return now }
			w.pause = func(_ context.Context, d time.Duration) error { now = now.Add(d); return nil }
			job, err := pollUntil(context.Background(), w, "job j1", func(ctx context.Context) (db.Job, bool, error) {
				job, err := c.JobGet(ctx, "j1")
				return job, err == nil && job.State.Final(), err
			})
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) || reads.Load() != tc.wantReads || now.Sub(start) != tc.wantTook {
				t.Errorf("wait: %v after %d reads and %s; want %v after %d reads and %s",
					err, reads.Load(), now.Sub(start), tc.wantErr, tc.wantReads, tc.wantTook)
			}
			if want := map[bool]db.JobState{true: db.StateDone, false: db.StateRunning}[tc.wantErr == nil]; job.State != want {
				t.Errorf("wait ended with the job %s; want it %s (as last read)", job.State, want)
			}
		})
	}
}

// TestWaiting_PauseAfter: the pauses between reads that got no answer
// double from the poll up to 8s, or the poll if it is longer.
func TestWaiting_PauseAfter(t *testing.T) {
	for _, tc := range []struct {
		poll time.Duration
		want []time.Duration
	}{
		{500 * time.Millisecond, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}},
		{3 * time.Second, []time.Duration{3 * time.Second, 6 * time.Second, 8 * time.Second, 8 * time.Second}},
		{20 * time.Second, []time.Duration{20 * time.Second, 20 * time.Second}},
	} {
		w := waiting{poll: tc.poll}
		for i, want := range tc.want {
			if got := w.pauseAfter(i + 1); got != want {
				t.Errorf("poll %s: pause after %d reads without an answer = %s, want %s", tc.poll, i+1, got, want)
			}
		}
	}
}
