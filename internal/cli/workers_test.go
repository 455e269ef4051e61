package cli

import (
	"context"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/handlers"
	"github.com/sked-dev/sked/wire"
)

// TestWorkers_AddWarnsUnserved: sked add warns on stderr when no worker
// has claimed the job's type lately, and not once one has; sked workers
// lists the worker with its types and when it was last seen, says when it
// holds nothing and has been silent too long, and says so when there is
// none.
func TestWorkers_AddWarnsUnserved(t *testing.T) {
	clock := dbtest.NewClock(time.Now().Truncate(time.Second))
	s := sqlitetest.Open(t)
	s.NowFunc = clock.Now
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	run := func(args ...string) (stdout, stderr string) {
		t.Helper()
		code, stdout, stderr := mainOf(append(args, "--server", srv.URL)...)
		if code != 0 {
			t.Fatalf("sked %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return stdout, stderr
	}
	warning := `warning: no worker has claimed type "thumb" in the last ` + wire.SilentAfter.String()

	if out, _ := run("workers"); !strings.Contains(out, "no worker has claimed in the last hour") {
		t.Errorf("sked workers with none:\n%s", out)
	}
	if _, stderr := run("add", "--type", "thumb"); !strings.Contains(stderr, warning) {
		t.Errorf("sked add of a type nobody serves: stderr %q, want %q", stderr, warning)
	}
	claim := func(worker string, types ...string) {
		t.Helper()
		if _, err := s.RunClaim(context.Background(), db.RunClaimParams{WorkerID: worker, Types: types, Max: 1, Lease: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	claim("box/1", "thumb", "mail") // takes the first job
	clock.Advance(10 * time.Second)
	if _, stderr := run("add", "--type", "thumb"); stderr != "" {
		t.Errorf("sked add of a type box/1 claimed 10 s ago: stderr %q, want none", stderr)
	}
	if _, stderr := run("add", "--type", "video", "--json"); !strings.Contains(stderr, `type "video"`) {
		t.Errorf("sked add of a type box/1 does not claim: stderr %q, want the warning", stderr)
	}
	out, _ := run("workers")
	if !regexp.MustCompile(`(?m)^box/1\s+mail,thumb\s+10s ago\s+1\s+`).MatchString(out) {
		t.Errorf("sked workers:\n%s\nwant box/1 claiming mail,thumb, seen 10s ago, running 1", out)
	}
	// A worker that says it stopped no longer counts.
	claim("box/2", "audio") // finds nothing
	if err := s.WorkerStopped(context.Background(), "box/2"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(3 * time.Second)
	if _, stderr := run("add", "--type", "audio"); !strings.Contains(stderr, `type "audio"`) {
		t.Errorf("sked add of a type only a stopped worker claimed: stderr %q, want the warning", stderr)
	}
	if out, _ := run("workers"); !regexp.MustCompile(`(?m)^box/2\s+audio\s+stopped 3s ago\s+`).MatchString(out) {
		t.Errorf("sked workers:\n%s\nwant box/2 stopped 3s ago", out)
	}
	// It holds a job: still serving however long ago it claimed.
	clock.Advance(10 * time.Minute)
	if _, stderr := run("add", "--type", "thumb"); stderr != "" {
		t.Errorf("sked add of a type whose worker holds a job: stderr %q, want none", stderr)
	}
	// Holding nothing and silent for minutes: not serving.
	jobs, _, err := s.JobList(context.Background(), db.JobListParams{State: db.StateRunning})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("running jobs %v, %v; want box/1's", jobs, err)
	}
	if _, err := s.RunFinish(context.Background(), db.RunFinishParams{JobID: jobs[0].ID, Generation: jobs[0].LeaseGeneration, Outcome: db.OutcomeSucceeded}); err != nil {
		t.Fatal(err)
	}
	if _, stderr := run("add", "--type", "thumb"); !strings.Contains(stderr, warning) {
		t.Errorf("sked add after box/1 went silent: stderr %q, want %q", stderr, warning)
	}
	if out, _ := run("workers"); !regexp.MustCompile(`(?m)^box/1\s+mail,thumb\s+10m13s ago, silent\s+0\s+`).MatchString(out) {
		t.Errorf("sked workers:\n%s\nwant box/1 seen 10m13s ago, silent, running 0", out)
	}
}
