package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
)

// neverFiredDB builds, through the real store, the database of a run in
// which an "@every 1s" schedule was created at 12:00 and never claimed,
// while a one-off job created an hour later ran and succeeded. It returns
// the file and the schedule's job.
func neverFiredDB(t *testing.T) (string, db.Job) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sked.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	s.NowFunc = func() time.Time { return now }
	sched, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "report", Schedule: "@every 1s"})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	one, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "once"})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w1", Types: []string{"once"}, Max: 1})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %d claims, %v", len(claims), err)
	}
	now = now.Add(time.Second)
	if _, err := s.RunFinish(ctx, db.RunFinishParams{JobID: one.ID, Generation: claims[0].Job.LeaseGeneration, Outcome: db.OutcomeSucceeded}); err != nil {
		t.Fatal(err)
	}
	return path, sched
}

func runCheckCmd(args ...string) (string, error) {
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"check"}, args...), func(string) string { return "" }, &out, &out)
	return out.String(), err
}

// `sked check --finished` fails on a schedule that silently never fired,
// naming the job and its slots. Without --finished the slots from the
// pending one on may still be open (the server may be down), so it passes.
func TestCheck_ScheduleNeverFired(t *testing.T) {
	t.Parallel()
	path, sched := neverFiredDB(t)
	out, err := runCheckCmd("--db", path, "--finished")
	if err == nil || err.Error() != "check: 1 violations" {
		t.Fatalf("sked check --finished: %v, want 1 violation\n%s", err, out)
	}
	for _, want := range []string{
		"slot_missing: job " + sched.ID + ": 3601 due slots from 2026-03-02T12:00:01.000Z to 2026-03-02T13:00:01.000Z",
		"the schedule stopped firing: its pending slot 2026-03-02T12:00:01.000Z",
		"no run row for slot 2026-03-02T12:00:01.000Z",
		"… and 3596 more up to 2026-03-02T13:00:01.000Z",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if out, err := runCheckCmd("--db", path); err != nil || !strings.HasPrefix(out, "ok: 2 jobs, 1 runs") {
		t.Errorf("sked check without --finished: %v\n%s", err, out)
	}
}

// --end says how long the run lasted when nothing was written at its end.
func TestCheck_End(t *testing.T) {
	t.Parallel()
	path, sched := neverFiredDB(t)
	out, err := runCheckCmd("--db", path, "--finished", "--end", "2026-03-02T12:10:00Z")
	if err == nil || !strings.Contains(out, "slot_missing: job "+sched.ID+": 600 due slots from 2026-03-02T12:00:01.000Z to 2026-03-02T12:10:00.000Z") {
		t.Errorf("--end 12:10: %v\n%s", err, out)
	}
	out, err = runCheckCmd("--db", path, "--finished", "--end", "12:10")
	if err == nil || !strings.Contains(err.Error(), "RFC 3339") {
		t.Errorf("--end 12:10: %v, want a message naming RFC 3339\n%s", err, out)
	}
}
