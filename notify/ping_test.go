package notify_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/notify"
)

// The three signals of a run reach a healthchecks.io-style check at its
// three URLs, the query kept at the end, through the real job path.
func TestNotifier_Ping(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	ctx := context.Background()
	check := newRecorder(t)
	n := &notify.Notifier{Store: s}
	pingURL := check.URL + "/ping/key/nightly-backup?create=1"

	slot := time.Date(2026, 3, 8, 2, 0, 0, 0, time.UTC)
	started := s.Now().Add(-time.Minute) // the end pings are due at once
	job := db.Job{ID: "01JOBID", Type: "exec"}
	run := db.Run{ID: 9, JobID: job.ID, Slot: &slot, Attempt: 2, StartedAt: &started}
	failed := run
	failed.Error, failed.Output = "exit status 3", "no space left on device"
	for _, p := range []struct {
		sig notify.Signal
		run db.Run
	}{{notify.PingStart, run}, {notify.PingSuccess, run}, {notify.PingFail, failed}, {notify.PingFail, failed}} {
		if err := n.Ping(ctx, pingURL, p.sig, job, p.run); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{"/ping/key/nightly-backup/start?create=1", "/ping/key/nightly-backup?create=1", "/ping/key/nightly-backup/fail?create=1"}
	deliver(t, s, nil, func() bool {
		for _, p := range paths {
			if _, ok := check.get(p); !ok {
				return false
			}
		}
		return true
	})

	var body struct {
		JobID, Error, Output string
		RunID                int64
		Attempt              int
		Slot                 time.Time
	}
	req, _ := check.get(paths[2])
	if err := json.Unmarshal(req.body, &body); err != nil {
		t.Fatal(err)
	}
	if body.JobID != "01JOBID" || body.RunID != 9 || body.Attempt != 2 || !body.Slot.Equal(slot) || body.Error != "exit status 3" || body.Output != failed.Output {
		t.Errorf("fail ping body = %s", req.body)
	}
	if req, _ := check.get(paths[0]); strings.Contains(string(req.body), "error") {
		t.Errorf("start ping body = %s", req.body)
	}

	jobs, _, err := s.JobList(ctx, db.JobListParams{})
	if err != nil || len(jobs) != 3 { // the repeated fail ping was enqueued once
		t.Fatalf("jobs = %d, %v; want 3", len(jobs), err)
	}
	for _, j := range jobs {
		start := strings.HasPrefix(j.IdempotencyKey, "ping:start:")
		if j.State != db.StateDone || !notify.IsDelivery(j.IdempotencyKey) || start != (j.MaxAttempts == 1) {
			t.Errorf("ping job %s: state %s, key %q, %d attempts", j.ID, j.State, j.IdempotencyKey, j.MaxAttempts)
		}
	}
}

// A run's end ping falls due once its start ping's one attempt is over.
func TestNotifier_PingEndWaitsForStart(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	ctx := context.Background()
	n := &notify.Notifier{Store: s}
	started := s.Now().Truncate(time.Second) // the store keeps milliseconds
	run := db.Run{ID: 1, StartedAt: &started, Attempt: 1}
	if err := n.Ping(ctx, "https://hc-ping.com/abc", notify.PingSuccess, db.Job{ID: "j1"}, run); err != nil {
		t.Fatal(err)
	}
	jobs, _, err := s.JobList(ctx, db.JobListParams{})
	if err != nil || len(jobs) != 1 || jobs[0].NextRunAt == nil {
		t.Fatalf("jobs = %+v, %v", jobs, err)
	}
	if due := *jobs[0].NextRunAt; !due.Equal(started.Add(10 * time.Second)) {
		t.Errorf("success ping due at %s, want 10s after the run started at %s", due, started)
	}
}

func TestNotifier_PingErrors(t *testing.T) {
	t.Parallel()
	n := &notify.Notifier{Store: sqlitetest.Open(t)}
	for _, bad := range []string{"", "hc-ping.com/abc", "ftp://hc-ping.com/abc", "https:///abc"} {
		err := notify.CheckPingURL(bad)
		if err == nil || !strings.Contains(err.Error(), "absolute http(s) URL") {
			t.Errorf("CheckPingURL(%q) = %v, want a message that says what to give", bad, err)
		}
		if err := n.Ping(context.Background(), bad, notify.PingStart, db.Job{ID: "j1"}, db.Run{ID: 1}); err == nil {
			t.Errorf("Ping(%q) succeeded", bad)
		}
	}
	if err := notify.CheckPingURL("https://hc-ping.com/0b5a…"); err != nil {
		t.Errorf("CheckPingURL of a check's URL: %v", err)
	}
	if err := n.Ping(context.Background(), "https://hc-ping.com/abc", "log", db.Job{ID: "j1"}, db.Run{ID: 1}); err == nil || !strings.Contains(err.Error(), `unknown signal "log"`) {
		t.Errorf("Ping with signal log = %v", err)
	}
}
