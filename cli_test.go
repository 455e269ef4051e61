package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/cli"
	"github.com/sked-dev/sked/internal/testnet"
)

// cliRun is one run of the sked binary as a client.
type cliRun struct {
	stdout, stderr string
	code           int
}

// skedCLI runs the built binary with args against server (SKED_SERVER).
func skedCLI(t *testing.T, server string, args ...string) cliRun {
	t.Helper()
	return skedCLIEnv(t, []string{"SKED_SERVER=" + server, "SKED_TOKEN="}, args...)
}

// skedCLIEnv runs the built binary with args and env added to this
// process's environment.
func skedCLIEnv(t *testing.T, env []string, args ...string) cliRun {
	t.Helper()
	cmd := exec.Command(skedBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("sked %q: %v", args, err)
	}
	return cliRun{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// ok runs the CLI and fails the test unless it exits 0.
func ok(t *testing.T, server string, args ...string) string {
	t.Helper()
	r := skedCLI(t, server, args...)
	if r.code != 0 {
		t.Fatalf("sked %q exited %d:\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fails runs the CLI, expects exit code want and returns stderr.
func fails(t *testing.T, server string, want int, args ...string) string {
	t.Helper()
	r := skedCLI(t, server, args...)
	if r.code != want {
		t.Fatalf("sked %q exited %d, want %d:\n%s%s", args, r.code, want, r.stdout, r.stderr)
	}
	return r.stderr
}

// okJSON runs the CLI with --json and decodes its output into v.
func okJSON[T any](t *testing.T, server string, args ...string) T {
	t.Helper()
	var v T
	out := ok(t, server, append([]string{args[0], "--json"}, args[1:]...)...)
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("sked %q --json printed no %T: %v\n%s", args, v, err, out)
	}
	return v
}

// compact is raw without white space, as the server stores it.
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestCLI_Jobs drives every client command against a live sked serve.
func TestCLI_Jobs(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startServe(t, filepath.Join(dir, "sked.db"), addr, "--enable-exec", "--lease", "2s")
	srv := "http://" + addr

	// A one-off job of a type nothing serves stays ready; its payload
	// comes from a file.
	payloadFile := filepath.Join(dir, "payload.json")
	os.WriteFile(payloadFile, []byte(`{"n": 1}`), 0o600)
	oneOff := okJSON[db.Job](t, srv, "add", "--type", "noop", "--payload", "@"+payloadFile, "--in", "1h", "--key", "k1")
	if oneOff.State != db.StateReady || compact(t, oneOff.Payload) != `{"n":1}` || oneOff.NextRunAt == nil {
		t.Fatalf("one-off job = %+v", oneOff)
	}
	if out := ok(t, srv, "add", "--type", "noop", "--payload", "@"+payloadFile, "--in", "2h", "--key", "k1"); !strings.Contains(out, "job "+oneOff.ID+" already exists") ||
		!strings.Contains(out, "next run "+oneOff.NextRunAt.UTC().Format(time.RFC3339)+"); nothing created, and its time is kept") {
		t.Fatalf("add repeated with its key printed %q", out)
	}
	if out := fails(t, srv, cli.ExitRefused, "add", "--type", "noop", "--key", "k1"); !strings.Contains(out, "different request") {
		t.Fatalf("add of another job with a known key printed %q; want that the key was used by a different request", out)
	}

	for _, flag := range []string{"--max-attempts=0", "--timeout=0s", "--backoff=0"} {
		if out := fails(t, srv, 2, "add", "--type", "noop", flag); !strings.Contains(out, "give a value above zero") {
			t.Errorf("add %s printed %q; want that zero is refused", flag, out)
		}
	}

	out := ok(t, srv, "add", "--exec", "--schedule", "0 3 * * *", "--tz", "Europe/Berlin", "--max-attempts", "2", "--expect-success-within", "26h", "--", "sh", "-c", "echo nightly")
	if !strings.HasPrefix(out, "created job ") {
		t.Fatalf("add printed %q", out)
	}
	var rec db.Job
	for _, j := range okJSON[struct{ Jobs []db.Job }](t, srv, "ls", "--type", "exec").Jobs {
		rec = j
	}
	if rec.Schedule != "0 3 * * *" || rec.Timezone != "Europe/Berlin" || rec.MaxAttempts != 2 || rec.ExpectSuccessWithin != db.Duration(26*time.Hour) ||
		compact(t, rec.Payload) != `{"command":["sh","-c","echo nightly"]}` {
		t.Fatalf("recurring job = %+v", rec)
	}
	if rec.WatchFrom == nil {
		t.Fatalf("recurring job with a switch has no watchFrom: %+v", rec)
	}
	quietAt := rec.WatchFrom.Add(26 * time.Hour).UTC().Format(time.RFC3339)
	if show := ok(t, srv, "show", rec.ID); !strings.Contains(show, "quiet unless a run succeeds by "+quietAt) {
		t.Errorf("show of a watched schedule does not say when it goes quiet (%s):\n%s", quietAt, show)
	}

	hook := okJSON[db.Job](t, srv, "add", "--url", "https://example.com/hook", "--payload", `{"hello":"world"}`, "--at", "2099-01-01T00:00:00Z")
	if hook.Type != "http" || compact(t, hook.Payload) != `{"body":{"hello":"world"},"url":"https://example.com/hook"}` {
		t.Fatalf("http job = %+v", hook)
	}

	t.Run("Ls", func(t *testing.T) {
		table := ok(t, srv, "ls")
		for _, want := range []string{"ID", "STATE", "SCHEDULE", oneOff.ID, rec.ID, hook.ID, "0 3 * * *"} {
			if !strings.Contains(table, want) {
				t.Errorf("ls table lacks %q:\n%s", want, table)
			}
		}
		if all := okJSON[struct{ Jobs []db.Job }](t, srv, "ls", "--limit", "1", "--all"); len(all.Jobs) != 3 {
			t.Errorf("ls --limit 1 --all found %d jobs, want 3", len(all.Jobs))
		}
		if page := ok(t, srv, "ls", "--limit", "1"); !strings.Contains(page, "more: sked ls --cursor ") {
			t.Errorf("ls --limit 1 does not say there is more:\n%s", page)
		}
	})

	t.Run("ShowPauseResume", func(t *testing.T) {
		show := ok(t, srv, "show", oneOff.ID)
		for _, want := range []string{"State:", "ready", "Idempotency key:", "k1", `{"n":1}`, "no runs yet"} {
			if !strings.Contains(show, want) {
				t.Errorf("show lacks %q:\n%s", want, show)
			}
		}
		if out := ok(t, srv, "runs", oneOff.ID); !strings.HasPrefix(out, "no runs recorded") {
			t.Errorf("runs of a job that has not run printed %q; want it to say there are none", out)
		}
		if out := ok(t, srv, "pause", oneOff.ID); out != "paused job "+oneOff.ID+" (now paused until resumed)\n" {
			t.Errorf("pause printed %q", out)
		}
		// A pause of a paused job, and a resume of a ready one, change
		// nothing and say so, where they read as if they had paused or
		// resumed it.
		if out := ok(t, srv, "pause", oneOff.ID); out != "job "+oneOff.ID+" is already paused until resumed: nothing to do\n" {
			t.Errorf("pause of a paused job printed %q", out)
		}
		if paused := okJSON[struct{ Jobs []db.Job }](t, srv, "ls", "--state", "paused"); len(paused.Jobs) != 1 || paused.Jobs[0].ID != oneOff.ID {
			t.Errorf("ls --state paused = %+v", paused.Jobs)
		}
		// NAME ID TYPE STATE SCHEDULE NEXT-RUN …: a paused job runs at no time.
		if lines := strings.Split(ok(t, srv, "ls", "--state", "paused"), "\n"); len(lines) < 2 || strings.Fields(lines[1])[5] != "-" {
			t.Errorf("ls of a paused job shows a next run:\n%s", strings.Join(lines, "\n"))
		}
		if j := okJSON[db.Job](t, srv, "resume", oneOff.ID); j.State != db.StateReady {
			t.Errorf("resume --json = %+v", j)
		}
		if out := ok(t, srv, "resume", oneOff.ID); out != "job "+oneOff.ID+" is not paused (it is ready): nothing to do\n" {
			t.Errorf("resume of a ready job printed %q", out)
		}
	})

	t.Run("RunsAndRetry", func(t *testing.T) {
		j := okJSON[db.Job](t, srv, "add", "--exec", "--max-attempts", "1", "--", "sh", "-c", "echo out of luck; exit 3")
		var shown struct {
			Job  db.Job
			Runs []db.Run
		}
		waitFor(t, "the failing job to go dead", func() bool {
			shown = okJSON[struct {
				Job  db.Job
				Runs []db.Run
			}](t, srv, "show", j.ID)
			return shown.Job.State == db.StateDead
		})
		if len(shown.Runs) != 1 || shown.Runs[0].Outcome != db.OutcomeFailed {
			t.Fatalf("show --json runs = %+v", shown.Runs)
		}
		table := ok(t, srv, "runs", j.ID)
		if !strings.Contains(table, "OUTCOME") || !strings.Contains(table, "failed") {
			t.Errorf("runs table:\n%s", table)
		}
		if out := ok(t, srv, "retry", j.ID); !strings.Contains(out, "retried job "+j.ID) {
			t.Errorf("retry printed %q", out)
		}
		waitFor(t, "the retried job to run again", func() bool {
			return len(okJSON[[]db.Run](t, srv, "runs", j.ID, "--all")) == 2
		})
		msg := fails(t, srv, cli.ExitRefused, "retry", oneOff.ID)
		if !strings.Contains(msg, "only dead jobs can be retried") {
			t.Errorf("retry of a ready job said %q", msg)
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		if out := ok(t, srv, "cancel", oneOff.ID); out != "cancelled job "+oneOff.ID+" (now cancelled)\n" {
			t.Errorf("cancel printed %q", out)
		}
		// A job a worker holds: 409, its detail, exit 4.
		stop := filepath.Join(dir, "stop")
		held := okJSON[db.Job](t, srv, "add", "--exec", "--", "sh", "-c", "while [ ! -e "+stop+" ]; do sleep 0.05; done")
		waitFor(t, "the job to run", func() bool { return okJSON[struct{ Job db.Job }](t, srv, "show", held.ID).Job.State == db.StateRunning })
		msg := fails(t, srv, cli.ExitRefused, "cancel", held.ID)
		if !strings.Contains(msg, "job "+held.ID+" is running on worker") || !strings.Contains(msg, "`sked cancel-run "+held.ID+"`") {
			t.Errorf("cancel of a held job said %q", msg)
		}
		os.WriteFile(stop, nil, 0o600)
	})

	t.Run("Errors", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"show", "nosuchjob"}, cli.ExitRefused, `job "nosuchjob" does not exist`},
			{[]string{"add", "--type", "noop", "--schedule", "every tuesday"}, cli.ExitRefused, "schedule"},
			{[]string{"add", "--exec", "--", "true"}, 0, ""},
			{[]string{"add", "--exec", "--", "echo hi there"}, 2, `run it through a shell (-- sh -c "echo hi there")`},
			{[]string{"add"}, 2, "--type is required"},
			{[]string{"add", "--url", "https://example.com/hook", "--type", "exec"}, 2, "--url makes an http job; --type exec contradicts it"},
			{[]string{"add", "--type", "noop", "--in", "soon"}, 2, "--in"},
			{[]string{"add", "--type", "noop", "--payload", "{nope"}, 2, `--payload "{nope": give valid JSON`},
			{[]string{"add", "--type", "noop", "--at", "2030-01-01T00:00:00Z", "--in", "1m"}, 2, "give only one of --at (one run at that time), --in (one run after that long) and --schedule"},
			{[]string{"add", "--type", "noop", "--at", "2030-01-01 09:00"}, 2, `"2030-01-01 09:00" has no zone offset: write 2030-01-01T09:00:00Z for UTC`},
			{[]string{"show"}, 2, "sked show takes one job id"},
			{[]string{"cancel", "a", "b"}, 2, "sked cancel takes one job id"},
			{[]string{"ls", "--state", "sleeping"}, cli.ExitRefused, `state "sleeping" is not a job state`},
			{[]string{"ls", "--server", strings.Replace(srv, "http:", "https:", 1)}, cli.ExitUnreachable,
				strings.Replace(srv, "http:", "https:", 1) + " answers plain HTTP, not HTTPS: give --server (SKED_SERVER) as " + srv},
		} {
			r := skedCLI(t, srv, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("sked %q: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
			}
		}
		// With --json, the error is a JSON document on stdout too.
		r := skedCLI(t, srv, "show", "nosuchjob", "--json")
		var doc struct {
			Error struct{ Status, ExitCode int }
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != cli.ExitRefused || doc.Error.Status != 404 || doc.Error.ExitCode != cli.ExitRefused {
			t.Errorf("sked show nosuchjob --json: exit %d, stdout %q (%v); want {\"error\": …} of a 404", r.code, r.stdout, err)
		}
		// A name in use is changed with sked edit, not an API route.
		named := okJSON[db.Job](t, srv, "add", "--type", "noop", "--name", "taken", "--in", "1h")
		if msg := fails(t, srv, cli.ExitRefused, "add", "--type", "noop", "--name", "taken"); !strings.Contains(msg, "belongs to job "+named.ID+" (ready); change that job (`sked edit taken`), or cancel it first") {
			t.Errorf("add with a name in use said %q; want the sked edit to use", msg)
		}
	})
}

// TestCLI_ServerDown checks the message when nothing listens at --server.
func TestCLI_ServerDown(t *testing.T) {
	srv := "http://" + freeAddr(t)
	msg := fails(t, srv, cli.ExitUnreachable, "ls")
	if !strings.Contains(msg, "is sked serve running at "+srv+"?") || !strings.Contains(msg, "--server") {
		t.Fatalf("ls with no server said %q", msg)
	}
	msg = fails(t, "localhost:8080", 2, "ls", "--server", "localhost:8080")
	if !strings.Contains(msg, "--server") {
		t.Fatalf("a bad --server said %q", msg)
	}
	// A port whose service hangs up on HTTP (PostgreSQL's does).
	hangsUp := "http://" + testnet.Answering(t, "")
	if msg := fails(t, hangsUp, cli.ExitUnreachable, "ls"); !strings.Contains(msg, "closed the connection without an HTTP answer") || !strings.Contains(msg, "PostgreSQL") {
		t.Fatalf("ls against a port that hangs up said %q", msg)
	}
}

// TestCLI_Token checks that --token and SKED_TOKEN reach a server that
// requires one, and what a missing or wrong token prints.
func TestCLI_Token(t *testing.T) {
	addr := freeAddr(t)
	startServe(t, filepath.Join(t.TempDir(), "sked.db"), addr, "--token", "s3cret")
	srv := "http://" + addr
	const fix = "give sked one of the server's tokens with SKED_TOKEN or --token"
	if msg := fails(t, srv, cli.ExitRefused, "ls"); !strings.Contains(msg, "requires a bearer token") || !strings.Contains(msg, "401") || !strings.Contains(msg, fix) {
		t.Errorf("ls without a token said %q", msg)
	}
	if msg := fails(t, srv, cli.ExitRefused, "ls", "--token", "wrong"); !strings.Contains(msg, "not one this server accepts") || !strings.Contains(msg, fix) {
		t.Errorf("ls with a wrong token said %q", msg)
	}
	ok(t, srv, "ls", "--token", "s3cret")
	if r := skedCLIEnv(t, []string{"SKED_SERVER=" + srv, "SKED_TOKEN=s3cret"}, "add", "--type", "noop", "--in", "1h"); r.code != 0 {
		t.Errorf("add with SKED_TOKEN exited %d: %s", r.code, r.stderr)
	}
}

// TestCLI_ScheduleControls drives pause with a reason and an end, trigger,
// skip, backfill and cancel-run from the command line.
func TestCLI_ScheduleControls(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startServe(t, filepath.Join(dir, "sked.db"), addr, "--enable-exec", "--lease", "1500ms")
	srv := "http://" + addr

	hourly := okJSON[db.Job](t, srv, "add", "--exec", "--schedule", "0 * * * *", "--", "true")
	until := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	paused := okJSON[db.Job](t, srv, "pause", hourly.ID, "--reason", "db upgrade", "--until", until.Format(time.RFC3339))
	if paused.State != db.StatePaused || paused.PauseReason != "db upgrade" || paused.PauseUntil == nil || !paused.PauseUntil.Equal(until) {
		t.Fatalf("paused job = %+v", paused)
	}
	if out := ok(t, srv, "show", hourly.ID); !regexp.MustCompile(`(?m)^Paused: +db upgrade, until ` + until.Format(time.RFC3339) + `$`).MatchString(out) {
		t.Errorf("show of a paused job printed\n%s\nwant its pause reason and end", out)
	}
	// A paused schedule is not watched: it has no window until its resume.
	watched := okJSON[db.Job](t, srv, "add", "--exec", "--schedule", "0 * * * *", "--expect-success-within", "2h", "--", "true")
	ok(t, srv, "pause", watched.ID)
	if out := ok(t, srv, "show", watched.ID); !regexp.MustCompile(`(?m)^Window: +none while paused`).MatchString(out) || strings.Contains(out, "quiet unless") {
		t.Errorf("show of a paused watched schedule printed\n%s\nwant no window while paused", out)
	}
	if msg := fails(t, srv, 2, "pause", hourly.ID, "--until", "tomorrow"); !strings.Contains(msg, "RFC 3339") {
		t.Fatalf("bad --until: %q", msg)
	}
	ok(t, srv, "resume", hourly.ID)
	// --until a duration: that long from now.
	before := time.Now().Truncate(time.Second)
	paused = okJSON[db.Job](t, srv, "pause", hourly.ID, "--until", "2h")
	if after := time.Now(); paused.PauseUntil == nil || paused.PauseUntil.Before(before.Add(2*time.Hour)) || paused.PauseUntil.After(after.Add(2*time.Hour)) {
		t.Fatalf("pause --until 2h between %v and %v paused until %v", before, after, paused.PauseUntil)
	}
	ok(t, srv, "resume", hourly.ID)
	// Paused, it runs at none of its times: pause says until when, not
	// the next run.
	out := ok(t, srv, "pause", hourly.ID, "--until", until.Format(time.RFC3339), "--reason", "db upgrade")
	if want := "paused job " + hourly.ID + " (now paused until " + until.Format(time.RFC3339) + ": db upgrade)\n"; out != want {
		t.Errorf("pause --until printed %q, want %q", out, want)
	}
	if out := ok(t, srv, "edit", hourly.ID, "--jitter", "1s"); !strings.HasSuffix(out, "\npaused until "+until.Format(time.RFC3339)+"\n") {
		t.Errorf("edit of a paused job printed %q, want it to end saying until when it is paused", out)
	}
	ok(t, srv, "resume", hourly.ID)

	slot := *okJSON[struct{ Job db.Job }](t, srv, "show", hourly.ID).Job.Slot
	skipped := okJSON[db.Job](t, srv, "skip", hourly.ID)
	if !skipped.Slot.Equal(slot.Add(time.Hour)) {
		t.Fatalf("slot after skip = %v, want %v", skipped.Slot, slot.Add(time.Hour))
	}

	ok(t, srv, "trigger", hourly.ID)
	waitFor(t, "the manual run", func() bool {
		runs := okJSON[[]db.Run](t, srv, "runs", hourly.ID)
		return len(runs) >= 2 && runs[0].Reason == db.ReasonManual && runs[0].Outcome == db.OutcomeSucceeded
	})
	// With --wait, a CI step has the triggered run's outcome as its exit
	// status, and with --json the run as it ended.
	if run := okJSON[db.Run](t, srv, "trigger", hourly.ID, "--wait", "--wait-timeout", "1m"); run.Reason != db.ReasonManual || run.Outcome != db.OutcomeSucceeded {
		t.Errorf("trigger --wait --json printed run %+v; want the manual run, succeeded", run)
	}
	failing := okJSON[db.Job](t, srv, "add", "--exec", "--name", "failing-nightly", "--schedule", "0 3 * * *", "--", "sh", "-c", "echo no disk; exit 3")
	if msg := fails(t, srv, cli.ExitFailed, "trigger", "failing-nightly", "--wait", "--wait-timeout", "1m"); !strings.Contains(msg, "of job failing-nightly ("+failing.ID+") failed after") ||
		!strings.Contains(msg, "exit status 3") {
		t.Errorf("trigger --wait of a run that fails said %q", msg)
	}

	from := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Hour)
	to := from.Add(2 * time.Hour)
	out = ok(t, srv, "backfill", hourly.ID, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339))
	if !strings.Contains(out, "3 slots, 3 jobs created") {
		t.Fatalf("backfill printed %q", out)
	}
	if again := ok(t, srv, "backfill", hourly.ID, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339)); !strings.Contains(again, "0 jobs created, 3 in all") {
		t.Fatalf("repeated backfill printed %q", again)
	}
	one := from.Add(-time.Hour).Format(time.RFC3339)
	if out := ok(t, srv, "backfill", hourly.ID, "--from", one, "--to", one); !strings.Contains(out, ": 1 slot, 1 job created, 1 in all\n") {
		t.Fatalf("backfill of one slot printed %q", out)
	}

	long := okJSON[db.Job](t, srv, "add", "--exec", "--", "sleep", "30")
	waitFor(t, "the long job to run", func() bool { return okJSON[struct{ Job db.Job }](t, srv, "show", long.ID).Job.State == db.StateRunning })
	// The job runs its slot, which is past: no "next run" beside it.
	if out := ok(t, srv, "cancel-run", long.ID); !strings.HasPrefix(out, "asked to stop the run of job "+long.ID+" (now running)\n(a worker in this server's own pool stops it at once;") {
		t.Errorf("cancel-run printed %q", out)
	}
	waitFor(t, "the run to stop", func() bool {
		return okJSON[struct{ Job db.Job }](t, srv, "show", long.ID).Job.State == db.StateCancelled
	})
	if msg := fails(t, srv, cli.ExitRefused, "cancel-run", long.ID); !strings.Contains(msg, "409") {
		t.Fatalf("cancel-run of a cancelled job: %q", msg)
	}
}
