package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/notify"
)

// Deliver turns a job's timeline into pings and notifications by its
// settings: the ping URL hears each start, success and give-up; the job's
// own sinks hear what it chose, and the server's sinks nothing of it.
func TestNotifier_Deliver(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	ctx := context.Background()
	n := &notify.Notifier{Store: s, Sinks: parseSinks(t, "webhook:https://server.example/hook")}
	slot := time.Date(2026, 3, 8, 2, 0, 0, 0, time.UTC)
	job := db.Job{ID: "01JOBID", Name: "nightly", Type: "exec", Schedule: "0 2 * * *", MaxAttempts: 1,
		Notify: &db.Notify{On: []string{notify.OnGaveUp}, Sinks: []string{"ntfy:https://ntfy.sh/ops"}, Ping: "https://hc.example/abc"}}
	event := func(id int64, kind string, d db.RunEvent) db.Event {
		b, _ := json.Marshal(d)
		return db.Event{ID: id, JobID: job.ID, Kind: kind, At: slot.Add(time.Minute), Detail: b}
	}
	run := db.RunEvent{Slot: &slot, Attempt: 1, Generation: 4, StartedAt: &slot, Error: "exit status 1"}
	for _, ev := range []db.Event{event(1, db.EventStarted, run), event(2, db.EventGaveUp, run), event(3, db.EventRecovered, run), event(2, db.EventGaveUp, run)} {
		if err := n.Deliver(ctx, job, ev); err != nil {
			t.Fatal(err)
		}
	}
	jobs, _, err := s.JobList(ctx, db.JobListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs {
		var p struct{ URL string }
		json.Unmarshal(j.Payload, &p)
		got = append(got, p.URL)
	}
	want := map[string]bool{"https://hc.example/abc/start": true, "https://hc.example/abc/fail": true, "https://ntfy.sh/": true}
	if len(got) != len(want) {
		t.Fatalf("deliveries to %v; want the start and fail pings and one ntfy message (the recovery not chosen, the server's sink not used, the repeat a no-op)", got)
	}
	for _, u := range got {
		if !want[u] {
			t.Errorf("a delivery to %s; want only %v", u, want)
		}
	}
	// An event that names its run is keyed and told by the run's id; one
	// recorded before events named it (above) by its own id, as then.
	started := db.RunEvent{RunID: 77, Slot: &slot, Attempt: 1, Generation: 5, StartedAt: &slot}
	if err := n.Deliver(ctx, job, event(9, db.EventStarted, started)); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	if jobs, _, err = s.JobList(ctx, db.JobListParams{}); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		keys[j.IdempotencyKey] = string(j.Payload)
	}
	for _, want := range []string{"ping:start:01JOBID:1", "ping:start:01JOBID:77"} {
		if _, ok := keys[want]; !ok {
			t.Errorf("no delivery keyed %s among %v", want, keys)
		}
	}
	if p := keys["ping:start:01JOBID:77"]; !strings.Contains(p, `"runId":77`) {
		t.Errorf("start ping of run 77: %s; want it to carry runId 77", p)
	}
	if err := n.CheckSettings(&db.Notify{On: []string{"sometimes"}}); !errors.Is(err, db.ErrInvalid) || !strings.Contains(err.Error(), "gave_up") {
		t.Errorf("CheckSettings of an unknown event = %v; want ErrInvalid naming the events", err)
	}
	if err := n.CheckSettings(&db.Notify{Sinks: []string{"smtp://a:b@other.example?to=x@example.com"}}); !errors.Is(err, db.ErrInvalid) {
		t.Errorf("CheckSettings of an email sink the server lacks = %v; want ErrInvalid", err)
	}
	// A megabyte URL, or a hundred sinks, each notification would send.
	long := "https://example.com/" + strings.Repeat("a", 2048)
	for _, s := range []db.Notify{{Sinks: []string{"webhook:" + long}}, {Ping: long}, {Sinks: slices.Repeat([]string{"ntfy:https://ntfy.sh/t"}, 11)}} {
		if err := n.CheckSettings(&s); !errors.Is(err, db.ErrInvalid) {
			t.Errorf("CheckSettings(%.80v…) = %v; want ErrInvalid", s, err)
		}
	}
}

// TestNotifier_DeliverNone: a job whose settings choose "none" is told of
// nothing, its going dead included, while its ping still hears
// its runs.
func TestNotifier_DeliverNone(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	ctx := context.Background()
	n := &notify.Notifier{Store: s, Sinks: parseSinks(t, "webhook:https://server.example/hook")}
	slot := time.Date(2026, 3, 8, 2, 0, 0, 0, time.UTC)
	job := db.Job{ID: "01JOBID", Type: "exec", MaxAttempts: 1, Notify: &db.Notify{On: []string{notify.OnNone}, Ping: "https://hc.example/abc"}}
	if err := n.CheckSettings(job.Notify); err != nil {
		t.Fatalf("CheckSettings of none: %v", err)
	}
	run, _ := json.Marshal(db.RunEvent{Slot: &slot, Attempt: 1, Generation: 1, StartedAt: &slot, Error: "exit status 1"})
	for i, kind := range []string{db.EventGaveUp, db.EventRecovered, db.EventQuiet} {
		if err := n.Deliver(ctx, job, db.Event{ID: int64(i + 1), JobID: job.ID, Kind: kind, At: slot.Add(time.Minute), Detail: run}); err != nil {
			t.Fatal(err)
		}
	}
	jobs, _, err := s.JobList(ctx, db.JobListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if !strings.HasPrefix(j.IdempotencyKey, db.PingKeyPrefix) {
			t.Errorf("a delivery %s (%s) for a job that chose none", j.IdempotencyKey, j.Payload)
		}
	}
	if len(jobs) == 0 {
		t.Error("no ping of the failed run; the ping is apart from the events")
	}
}
