package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/handlers"
)

// finishSoon claims the job of type typ once it is there (the wait has
// begun polling by then, or the job is yet to be created by the command
// under test), as a worker would, and reports its run ended with outcome.
func finishSoon(t *testing.T, s *sqlite.Store, typ string, outcome db.Outcome, errText string) {
	t.Helper()
	finishSoonAll(t, s, typ, errText, outcome)
}

// finishSoonAll is finishSoon for as many claims as outcomes, one after
// the other, each ended with its outcome.
func finishSoonAll(t *testing.T, s *sqlite.Store, typ string, errText string, outcomes ...db.Outcome) {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		ctx := context.Background()
		for _, outcome := range outcomes {
			var c []db.Claim
			for deadline := time.Now().Add(20 * time.Second); len(c) == 0; {
				time.Sleep(300 * time.Millisecond)
				var err error
				if c, err = s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{typ}, Max: 1}); err != nil || len(c) == 0 && time.Now().After(deadline) {
					t.Errorf("claim of a %s job: %v, %v", typ, c, err)
					return
				}
			}
			if _, err := s.RunFinish(ctx, db.RunFinishParams{JobID: c[0].Job.ID, Generation: c[0].Job.LeaseGeneration, Outcome: outcome, Error: errText}); err != nil {
				t.Errorf("finish: %v", err)
			}
		}
	}()
}

// TestWait: sked wait and sked add --wait wait until a one-off job ends and
// exit by how it ended: 0 done, 1 dead (with its last error), 124 when the
// wait runs out, 130 when it is interrupted; a recurring job is refused,
// as --wait with --schedule is.
func TestWait(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	ctx := context.Background()

	t.Run("Done", func(t *testing.T) {
		j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "ok", Name: "build"})
		if err != nil {
			t.Fatal(err)
		}
		finishSoon(t, s, "ok", db.OutcomeSucceeded, "")
		code, stdout, stderr := mainOf("wait", "build", "--timeout", "30s", "--server", srv.URL)
		if code != 0 || stdout != "job build ("+j.ID+") done after 1 attempt\n" {
			t.Errorf("sked wait of a job done: exit %d, %q %q", code, stdout, stderr)
		}
	})
	t.Run("Dead", func(t *testing.T) {
		if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "bad", Name: "lint", MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		finishSoon(t, s, "bad", db.OutcomeFailed, "exit status 3")
		code, _, stderr := mainOf("wait", "lint", "--timeout", "30s", "--server", srv.URL)
		if code != 1 || !strings.Contains(stderr, "is dead after 1 attempt: exit status 3") {
			t.Errorf("sked wait of a job gone dead: exit %d, %q", code, stderr)
		}
	})
	t.Run("AddWaitJSON", func(t *testing.T) {
		finishSoon(t, s, "ok2", db.OutcomeSucceeded, "")
		// Bounded by its context, since --wait waits as long as it takes.
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var stdout, stderr strings.Builder
		code := Main(wctx, []string{"add", "--type", "ok2", "--wait", "--json", "--server", srv.URL}, Env{Getenv: func(string) string { return "" }, Stdout: &stdout, Stderr: &stderr})
		var job db.Job
		if err := json.Unmarshal([]byte(stdout.String()), &job); code != 0 || err != nil || job.State != db.StateDone {
			t.Errorf("sked add --wait --json: exit %d, %q %q; want the job as it ended, done", code, stdout.String(), stderr.String())
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "nobody", Name: "stuck"}); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := mainOf("wait", "stuck", "--timeout", "1s", "--server", srv.URL)
		if code != ExitTimedOut || !strings.Contains(stderr, "has not ended after 1s (it is ready): sked wait stuck waits again") {
			t.Errorf("sked wait --timeout 1s of a job nobody runs: exit %d, %q", code, stderr)
		}
		// With --json, the job as last read, so that a script reads one
		// document whatever happened.
		code, stdout, stderr := mainOf("wait", "stuck", "--timeout", "1s", "--json", "--server", srv.URL)
		var job db.Job
		if err := json.Unmarshal([]byte(stdout), &job); code != ExitTimedOut || err != nil || job.Name != "stuck" || job.State != db.StateReady {
			t.Errorf("sked wait --timeout 1s --json: exit %d, %q %q; want the job as last read, ready", code, stdout, stderr)
		}
		// sked add --wait-timeout bounds the wait; --timeout is the job's.
		code, _, stderr = mainOf("add", "--type", "nobody", "--wait", "--wait-timeout", "1s", "--server", srv.URL)
		if code != ExitTimedOut || !strings.Contains(stderr, "has not ended after 1s (it is ready)") {
			t.Errorf("sked add --wait --wait-timeout 1s of a job nobody runs: exit %d, %q", code, stderr)
		}
		if code, _, stderr := mainOf("add", "--type", "nobody", "--wait-timeout", "1s", "--server", srv.URL); code != 2 || !strings.Contains(stderr, "add --wait") {
			t.Errorf("sked add --wait-timeout without --wait: exit %d, %q; want a usage error", code, stderr)
		}
	})
	t.Run("Interrupted", func(t *testing.T) {
		// Ctrl-C ends the command's context: the wait says the job goes on.
		ictx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		var stdout, stderr strings.Builder
		code := Main(ictx, []string{"wait", "stuck", "--server", srv.URL}, Env{Getenv: func(string) string { return "" }, Stdout: &stdout, Stderr: &stderr})
		if code != ExitInterrupted || !strings.Contains(stderr.String(), "stopped waiting for job stuck") || !strings.Contains(stderr.String(), "(it is ready)") {
			t.Errorf("sked wait interrupted: exit %d, %q; want it to say the job is still ready", code, stderr.String())
		}
	})
	t.Run("Recurring", func(t *testing.T) {
		if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "nightly", Name: "nightly", Schedule: "0 3 * * *"}); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := mainOf("wait", "nightly", "--server", srv.URL); code != 2 || !strings.Contains(stderr, "is recurring: it ends only when cancelled") {
			t.Errorf("sked wait of a schedule: exit %d, %q; want exit 2, as sked add --wait --schedule (1 would say a job failed)", code, stderr)
		}
		if code, _, stderr := mainOf("add", "--type", "t", "--schedule", "@hourly", "--wait", "--server", srv.URL); code != 2 || !strings.Contains(stderr, "--wait waits for a one-off job") {
			t.Errorf("sked add --wait --schedule: exit %d, %q", code, stderr)
		}
	})
}

// TestTrigger_ScheduleKeepsSlot: sked trigger of a schedule says that it
// made an extra run now and that the schedule's slot stays, rather than
// "next run" at the trigger's moment, which reads as if the schedule moved.
func TestTrigger_ScheduleKeepsSlot(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	j, _, err := s.JobCreate(context.Background(), db.JobCreateParams{Type: "report", Name: "nightly", Schedule: "30 2 * * *", Timezone: "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := mainOf("trigger", "nightly", "--server", srv.URL)
	want := "triggered job nightly (an extra run now; the schedule's next slot stays " + inZone(j.Slot, "Europe/Berlin") + ")\n"
	if code != 0 || stdout != want {
		t.Errorf("sked trigger of a schedule: exit %d, %q %q; want %q", code, stdout, stderr, want)
	}
}

// TestTriggerWait: sked trigger --wait waits for the run it started and
// exits by how that run ended, as sked wait does by how a job ended: not
// by an earlier operator's run, nor by a run handed back unstarted, which
// runs again; a run that a pause drops exits 1, a wait that runs out 124.
func TestTriggerWait(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	nightly := func(t *testing.T, typ string) db.Job {
		t.Helper()
		j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: typ, Name: typ, Schedule: "0 3 * * *"})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}

	t.Run("Succeeded", func(t *testing.T) {
		j := nightly(t, "report")
		// An earlier trigger's run failed: the wait is not for it.
		if _, err := s.JobTrigger(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		finishSoon(t, s, "report", db.OutcomeFailed, "exit status 3")
		waitUntil(t, "the earlier triggered run to fail", func() bool {
			runs, _, _ := s.RunList(ctx, db.RunListParams{JobID: j.ID})
			return len(runs) == 1 && runs[0].Outcome == db.OutcomeFailed
		})
		// This one is handed back unstarted first, then runs again.
		finishSoonAll(t, s, "report", "", db.OutcomeReleased, db.OutcomeSucceeded)
		code, stdout, stderr := mainOf("trigger", "report", "--wait", "--wait-timeout", "30s", "--server", srv.URL)
		if code != 0 || !strings.HasPrefix(stdout, "triggered job report (an extra run now") || !regexp.MustCompile(`\nrun 3 of job report \(`+j.ID+`\) succeeded after \S+\n$`).MatchString(stdout) {
			t.Errorf("sked trigger --wait of a run that succeeds: exit %d, %q %q", code, stdout, stderr)
		}
	})
	t.Run("FailedJSON", func(t *testing.T) {
		j := nightly(t, "export")
		finishSoon(t, s, "export", db.OutcomeFailed, "disk full")
		code, stdout, stderr := mainOf("trigger", j.ID, "--wait", "--json", "--server", srv.URL)
		var run db.Run
		if err := json.Unmarshal([]byte(stdout), &run); code != ExitFailed || err != nil || run.Outcome != db.OutcomeFailed || run.Reason != db.ReasonManual ||
			!strings.Contains(stderr, "of job export ("+j.ID+") failed") || !strings.Contains(stderr, ": disk full (sked runs "+j.ID+" --output shows its output)") {
			t.Errorf("sked trigger --wait --json of a run that fails: exit %d, %q %q; want exit 1, the run as it ended and its error", code, stdout, stderr)
		}
	})
	t.Run("TimedOut", func(t *testing.T) {
		nightly(t, "nobody")
		code, stdout, stderr := mainOf("trigger", "nobody", "--wait", "--wait-timeout", "1s", "--server", srv.URL)
		if code != ExitTimedOut || !strings.Contains(stderr, "the triggered run of job nobody") || !strings.Contains(stderr, "has not ended after 1s (not started yet): it goes on") {
			t.Errorf("sked trigger --wait --wait-timeout 1s of a run nobody claims: exit %d, %q %q", code, stdout, stderr)
		}
		if code, _, stderr := mainOf("trigger", "nobody", "--wait-timeout", "1s", "--server", srv.URL); code != ExitUsage || !strings.Contains(stderr, "add --wait") {
			t.Errorf("sked trigger --wait-timeout without --wait: exit %d, %q; want a usage error", code, stderr)
		}
	})
	t.Run("Dropped", func(t *testing.T) {
		j := nightly(t, "paused")
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Once triggered (the wait begins then), before a worker
			// claims its run: none serves the type.
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if got, err := s.JobGet(ctx, j.ID); err == nil && got.Triggered {
					if _, err := s.JobPause(ctx, j.ID); err != nil {
						t.Errorf("pause: %v", err)
					}
					return
				}
			}
			t.Errorf("job %s was not triggered within 20s", j.ID)
		}()
		code, _, stderr := mainOf("trigger", "paused", "--wait", "--wait-timeout", "30s", "--server", srv.URL)
		<-done
		if code != ExitFailed || !strings.Contains(stderr, "is paused and its trigger is gone") {
			t.Errorf("sked trigger --wait of a run a pause drops: exit %d, %q; want exit 1 saying so", code, stderr)
		}
	})
	t.Run("OneOff", func(t *testing.T) {
		later := time.Now().Add(time.Hour)
		if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "once", Name: "once", RunAt: later}); err != nil {
			t.Fatal(err)
		}
		finishSoon(t, s, "once", db.OutcomeSucceeded, "")
		code, stdout, stderr := mainOf("trigger", "once", "--wait", "--wait-timeout", "30s", "--server", srv.URL)
		if code != 0 || !strings.Contains(stdout, "job once (") || !strings.HasSuffix(stdout, ") done after 1 attempt\n") {
			t.Errorf("sked trigger --wait of a one-off job: exit %d, %q %q; want it waited for as sked wait does", code, stdout, stderr)
		}
	})
}

// TestWaitTimeout_BothNames: the limit of a wait is --wait-timeout on sked
// wait, sked add and sked trigger, as help shows; --timeout, sked wait's
// older name of it, is taken for it on sked wait and sked trigger (sked
// add's --timeout is the job's own).
func TestWaitTimeout_BothNames(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "nobody", Name: "stuck"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nightly", "hourly"} { // a job triggered once is due: no second trigger
		if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "nobody", Name: name, Schedule: "0 3 * * *"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"wait", "stuck", "--wait-timeout", "1s"},
		{"wait", "stuck", "--timeout", "1s"},
		{"wait", "stuck", "--timeout=1s"},
		{"trigger", "nightly", "--wait", "--wait-timeout", "1s"},
		{"trigger", "hourly", "--wait", "--timeout", "1s"},
	} {
		if code, _, stderr := mainOf(append(args, "--server", srv.URL)...); code != ExitTimedOut || !strings.Contains(stderr, "has not ended after 1s") {
			t.Errorf("sked %q: exit %d, %q; want exit %d, the wait run out after 1s", args, code, stderr, ExitTimedOut)
		}
	}
	for _, args := range [][]string{{"wait", "stuck", "--timeout", "-1s"}, {"trigger", "nightly", "--wait", "--timeout", "-1s"}} {
		if code, _, stderr := mainOf(append(args, "--server", srv.URL)...); code != ExitUsage || !strings.Contains(stderr, "--wait-timeout -1s: give how long to wait at most") {
			t.Errorf("sked %q: exit %d, %q; want a usage error naming --wait-timeout", args, code, stderr)
		}
	}
	if code, _, stderr := mainOf("trigger", "nightly", "--timeout", "1s", "--server", srv.URL); code != ExitUsage || !strings.Contains(stderr, "--wait-timeout is how long --wait waits; add --wait") {
		t.Errorf("sked trigger --timeout without --wait: exit %d, %q; want a usage error", code, stderr)
	}
	for _, cmd := range []string{"wait", "trigger", "add"} {
		_, help, _ := mainOf(cmd, "--help")
		if !strings.Contains(help, "--wait-timeout duration") || cmd != "add" && strings.Contains(help, "--timeout duration") {
			t.Errorf("sked %s --help shows the wait's limit as other than --wait-timeout alone:\n%s", cmd, help)
		}
	}
}

// TestWait_ServerStopsAnswering: a server that stops answering while sked
// wait waits is asked again, then said so, exit 3 (no answer), with the
// job going on there and how to wait again, where the wait asked for ever
// without a word. The client gives up after 1ms without an answer here,
// not sked wait's minute (client's TestPollUntil_NoAnswer checks that).
func TestWait_ServerStopsAnswering(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	var reads atomic.Int32
	h := handlers.New(handlers.Config{Store: s})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	j, _, err := s.JobCreate(context.Background(), db.JobCreateParams{Type: "nobody", Name: "build"})
	if err != nil {
		t.Fatal(err)
	}
	a := &api{env: Env{Getenv: func(string) string { return "" }, Stdout: io.Discard, Stderr: io.Discard}, server: srv.URL}
	if err := a.connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.c.NoAnswerLimit = time.Millisecond
	// Bounded, so that a wait that asks for ever ends (interrupted).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.apiError(a.wait(ctx, "build", 0)) }()
	waitUntil(t, "the wait to poll", func() bool { return reads.Load() >= 3 })
	srv.Close()
	err = <-done
	var stderr strings.Builder
	printError(&stderr, err)
	want := regexp.MustCompile(`^sked: server at ` + regexp.QuoteMeta(srv.URL) + ` stopped answering: dial tcp \S+: connect: connection refused; ` +
		`job build \(` + j.ID + `\) goes on there: sked wait build waits again once the server is back\n$`)
	if code := ExitCode(err); code != ExitUnreachable || !want.MatchString(stderr.String()) {
		t.Errorf("sked wait of a server that stopped answering: exit %d, %q; want exit %d and %s", code, stderr.String(), ExitUnreachable, want)
	}
}

// TestWait_NodeStopsAnswering: sked wait given several nodes of one
// database (--server a,b) asks another of them when the one it talks to
// stops answering, and waits there until the job ends, where it kept asking
// the node that was gone and, after a minute, exited 3 though the other
// node served the same jobs. Its reads are safe to send again anywhere.
// Here the two nodes are two HTTP servers of the API on one store.
func TestWait_NodeStopsAnswering(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	h := handlers.New(handlers.Config{Store: s})
	var firstReads atomic.Int32
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		firstReads.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(first.Close)
	second := httptest.NewServer(h)
	t.Cleanup(second.Close)
	ctx := context.Background()
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "slow", Name: "build"})
	if err != nil {
		t.Fatal(err)
	}
	a := &api{env: Env{Getenv: func(string) string { return "" }, Stdout: io.Discard, Stderr: io.Discard}, server: first.URL + "," + second.URL}
	if err := a.connect(ctx); err != nil {
		t.Fatal(err)
	}
	if a.server != first.URL {
		t.Fatalf("picked %s; want the first node, %s", a.server, first.URL)
	}
	a.c.NoAnswerLimit = 2 * time.Second // not sked wait's minute
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.apiError(a.wait(wctx, "build", 0)) }()
	waitUntil(t, "the wait to poll the first node", func() bool { return firstReads.Load() >= 3 })
	first.Close()
	finishSoon(t, s, "slow", db.OutcomeSucceeded, "")
	if err := <-done; err != nil {
		var stderr strings.Builder
		printError(&stderr, err)
		t.Errorf("sked wait --server a,b with a stopped: exit %d, %q; want it to wait on b until job %s is done", ExitCode(err), stderr.String(), j.ID)
	}
}

// TestWait_DatabaseDownAtStart: sked wait begun while its server's
// PostgreSQL is out of reach (503) asks again until it is back, as a wait
// under way does, and then waits for the job to end, where it exited 3 at
// its first read.
func TestWait_DatabaseDownAtStart(t *testing.T) {
	t.Parallel()
	u := postgrestest.URL(t)
	proxy := postgrestest.NewProxy(t, u)
	s := postgrestest.OpenURL(t, proxy.URL(u))
	var unavailable atomic.Int32
	api := handlers.New(handlers.Config{Store: s})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, r)
		if rec.Code == http.StatusServiceUnavailable {
			unavailable.Add(1)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "nobody", Name: "build"})
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	var stdout, stderr strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"wait", "build", "--server", srv.URL}, Env{Getenv: func(string) string { return "" }, Stdout: &stdout, Stderr: &stderr})
	}()
	waitUntil(t, "the wait to be answered 503 twice, or to end", func() bool { return unavailable.Load() >= 2 || len(done) > 0 })
	select {
	case code := <-done:
		t.Fatalf("sked wait begun while the database is down: exit %d, %q; want it to ask again until it is back", code, stderr.String())
	default:
	}
	proxy.Restore()
	if _, err := s.JobCancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != ExitFailed || !strings.Contains(stderr.String(), "job build ("+j.ID+") was cancelled") {
		t.Errorf("sked wait once the database is back and the job cancelled: exit %d, %q; want exit %d saying it was cancelled", code, stderr.String(), ExitFailed)
	}
}

// waitUntil polls cond until it holds, failing the test after 20s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
