package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/internal/syncbuf"
	"github.com/sked-dev/sked/worker"
)

// TestPool_LogsEachOutcome checks the one structured line per run outcome
// that an operator greps for: job id (and name, when it has one), type,
// attempt, generation, outcome, duration and when the run ended.
func TestPool_LogsEachOutcome(t *testing.T) {
	s := sqlitetest.Open(t)
	var logs syncbuf.Buffer
	// The jobs exist before the pool starts: nothing wakes it for later ones.
	ok := create(t, s, db.JobCreateParams{Type: "ok", Name: "nightly-report"})
	fail := create(t, s, db.JobCreateParams{Type: "fail"})
	startPool(t, s, worker.PoolConfig{
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Handlers: map[string]worker.HandlerFunc{
			"ok":   func(context.Context, *worker.Job) error { return nil },
			"fail": func(context.Context, *worker.Job) error { return worker.Permanent(errors.New("bad input")) },
		},
	})

	want := map[string]struct {
		level, outcome string
	}{ok.ID: {"INFO", "succeeded"}, fail.ID: {"WARN", "failed"}}
	lines := map[string]map[string]any{}
	deadline := time.Now().Add(20 * time.Second)
	for len(lines) < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("no run outcome lines for every job after 20 s; log:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "run finished" {
				lines[m["job_id"].(string)] = m
			}
		}
	}
	for id, w := range want {
		m := lines[id]
		if m["level"] != w.level || m["outcome"] != w.outcome || m["attempt"] != 1.0 || m["generation"] != 1.0 {
			t.Errorf("job %s: log line %v, want level %s, outcome %s, attempt 1, generation 1", id, m, w.level, w.outcome)
		}
		if _, ok := m["duration"]; !ok {
			t.Errorf("job %s: log line %v has no duration", id, m)
		}
		if name, named := m["name"]; id == ok.ID && name != "nightly-report" || id != ok.ID && named {
			t.Errorf("job %s: log line %v; want the job's name, only when it has one", id, m)
		}
		ended, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["ended"]))
		logged, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(m["time"]))
		if err != nil || ended.After(logged) {
			t.Errorf("job %s: log line %v, want ended, when the handler returned, no later than the line (%v)", id, m, err)
		}
	}
}

// TestPool_ClaimFailureNamesWorker: a failed claim's line names the
// pool's worker id, so that the lines of the two pools of a sked serve
// (its jobs' and its deliveries'), each counting its own failures, are
// told apart.
func TestPool_ClaimFailureNamesWorker(t *testing.T) {
	s := sqlitetest.Open(t)
	create(t, s, db.JobCreateParams{Type: "ok"})
	closed, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "closed.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	startPool(t, s, worker.PoolConfig{
		Store: closed, WorkerID: "serve:host/1-ABC-notify",
		Logger:   slog.New(slog.NewJSONHandler(&logs, nil)),
		Handlers: map[string]worker.HandlerFunc{"ok": func(context.Context, *worker.Job) error { return nil }},
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "claim" {
				if m["worker_id"] != "serve:host/1-ABC-notify" {
					t.Fatalf("a failed claim's line %v; want worker_id serve:host/1-ABC-notify", m)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failed claim's line after 20 s; log:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
