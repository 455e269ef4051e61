package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/cli"
)

// TestCLI_ApplyExport applies examples/schedules.yaml to a live sked serve:
// the dry run prints the plan and changes nothing, the apply creates the
// jobs, a second apply and the apply of its export change nothing, and a
// changed file with --prune changes one job in place and cancels the one
// it no longer names.
func TestCLI_ApplyExport(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startServe(t, filepath.Join(dir, "sked.db"), addr, "--enable-exec")
	srv := "http://" + addr
	example, err := os.ReadFile("examples/schedules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "schedules.yaml")
	os.WriteFile(file, example, 0o600)
	named := func() map[string]db.Job {
		jobs := map[string]db.Job{}
		for _, j := range okJSON[struct{ Jobs []db.Job }](t, srv, "ls", "--all").Jobs {
			if j.State != db.StateCancelled {
				jobs[j.Name] = j
			}
		}
		return jobs
	}

	plan := ok(t, srv, "apply", "-f", file, "--dry-run")
	for _, want := range []string{"+ nightly-backup: create", `+ schedule: "30 2 * * *"`, "+ cert-renewal: create", "+ hourly-report: create",
		"3 jobs: 3 would be created", "dry run: nothing was changed"} {
		if !strings.Contains(plan, want) {
			t.Errorf("dry run lacks %q:\n%s", want, plan)
		}
	}
	if jobs := named(); len(jobs) != 0 {
		t.Fatalf("the dry run created %d jobs", len(jobs))
	}

	if out := ok(t, srv, "apply", "-f", file); !strings.Contains(out, "3 jobs: 3 created, 0 changed, 0 unchanged") {
		t.Fatalf("apply printed %q", out)
	}
	jobs := named()
	backup := jobs["nightly-backup"]
	if len(jobs) != 3 || backup.Schedule != "30 2 * * *" || backup.Timezone != "Europe/Berlin" || backup.MaxAttempts != 3 ||
		backup.ExpectSuccessWithin != db.Duration(26*time.Hour) || jobs["hourly-report"].Type != "http" {
		t.Fatalf("applied jobs = %+v", jobs)
	}
	if out := ok(t, srv, "apply", "-f", file); !strings.Contains(out, "nothing to change") {
		t.Fatalf("the second apply printed %q", out)
	}

	// A named one-off job that is done is not exported: applied to
	// another server it would run again.
	once := okJSON[db.Job](t, srv, "add", "--name", "one-shot", "--exec", "--", "true")
	waitFor(t, "the one-off job to be done", func() bool {
		return okJSON[struct{ Job db.Job }](t, srv, "show", once.ID).Job.State == db.StateDone
	})
	exported := ok(t, srv, "export")
	if strings.Contains(exported, "name: one-shot") {
		t.Fatalf("export has the done one-off job one-shot:\n%s", exported)
	}
	exportFile := filepath.Join(dir, "export.yaml")
	os.WriteFile(exportFile, []byte(exported), 0o600)
	if out := ok(t, srv, "apply", "-f", exportFile, "--prune"); !strings.Contains(out, "nothing to change") {
		t.Fatalf("applying the export printed %q\nexport:\n%s", out, exported)
	}
	if again := ok(t, srv, "export"); again != exported {
		t.Fatalf("export changed:\n%s\nthen\n%s", exported, again)
	}
	if asJSON := okJSON[[]map[string]any](t, srv, "export"); len(asJSON) != 3 || asJSON[0]["name"] != "cert-renewal" {
		t.Fatalf("export --json = %v", asJSON)
	}

	changed := strings.Replace(string(example), `schedule: "0 3,15 * * *"`, `schedule: "0 4,16 * * *"`, 1)
	changed = changed[:strings.Index(changed, "# Tell a webhook")]
	os.WriteFile(file, []byte(changed), 0o600)
	plan = ok(t, srv, "apply", "-f", file, "--prune", "--dry-run")
	for _, want := range []string{"~ cert-renewal (" + jobs["cert-renewal"].ID + ")", `- schedule: "0 3,15 * * *"`, `+ schedule: "0 4,16 * * *"`,
		"- hourly-report (" + jobs["hourly-report"].ID + "): cancel", "1 would be cancelled"} {
		if !strings.Contains(plan, want) {
			t.Errorf("dry run of the changed file lacks %q:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, "nightly-backup") {
		t.Errorf("dry run names the unchanged job:\n%s", plan)
	}
	if j := named()["cert-renewal"]; j.Schedule != "0 3,15 * * *" {
		t.Fatalf("the dry run changed the schedule to %q", j.Schedule)
	}
	// A dead-man's switch taken away shows as none, not as a window of 0s.
	unwatched := filepath.Join(dir, "unwatched.yaml")
	os.WriteFile(unwatched, []byte(strings.Replace(string(example), "  expectSuccessWithin: 26h\n", "", 1)), 0o600)
	if plan := ok(t, srv, "apply", "-f", unwatched, "--dry-run"); !strings.Contains(plan, "- expectSuccessWithin: \"26h0m0s\"\n    + expectSuccessWithin: null\n") {
		t.Errorf("dry run without expectSuccessWithin:\n%s", plan)
	}
	// --prune cancels every named job the file does not name, one made by
	// hand too: without --yes it names them and changes nothing.
	handmade := okJSON[db.Job](t, srv, "add", "--type", "noop", "--name", "handmade", "--in", "1h")
	msg := fails(t, srv, 2, "apply", "-f", file, "--prune")
	for _, want := range []string{"--prune would cancel 2 named jobs that " + file + " does not name: handmade, hourly-report.", "add --yes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("apply --prune without --yes said no %q:\n%s", want, msg)
		}
	}
	if jobs := named(); jobs["cert-renewal"].Schedule != "0 3,15 * * *" || jobs["handmade"].ID != handmade.ID || jobs["hourly-report"].ID == "" {
		t.Fatalf("apply --prune without --yes changed the jobs: %+v", jobs)
	}
	if plan := ok(t, srv, "apply", "-f", file, "--prune", "--dry-run"); !strings.Contains(plan, "- handmade ("+handmade.ID+"): cancel") ||
		!strings.Contains(plan, "(--prune cancels only with --yes)") {
		t.Errorf("dry run with a job made by hand:\n%s", plan)
	}
	ok(t, srv, "cancel", "handmade")
	if out := ok(t, srv, "apply", "-f", file, "--prune", "--yes"); !strings.Contains(out, "2 jobs: 0 created, 1 changed, 1 unchanged, 1 cancelled") {
		t.Fatalf("apply --prune --yes printed %q", out)
	}
	after := named()
	if j := after["cert-renewal"]; j.ID != jobs["cert-renewal"].ID || j.Schedule != "0 4,16 * * *" {
		t.Fatalf("cert-renewal after the change = %+v, want the same job with the new schedule", j)
	}
	if _, ok := after["hourly-report"]; ok {
		t.Fatalf("hourly-report is still there after --prune")
	}
	if show := ok(t, srv, "show", "cert-renewal"); !strings.Contains(show, "Timeline") || !strings.Contains(show, "changed") {
		t.Fatalf("show of the changed job has no timeline:\n%s", show)
	}

	for _, tc := range []struct{ yaml, want string }{
		{"- name: x\n  type: noop\n  schedul: '@hourly'\n", `line 3 (job 1): unknown field "schedul"; a job's fields are name, type, payload, runAt, runIn, schedule,`},
		{"- name: x\n  type: noop\n  maxAttempts: three\n", "line 3 (job 1): maxAttempts must be a whole number, not text"},
		{"- name: x\n  type: noop\n  runAt: tomorrow\n", `line 3 (job 1): runAt "tomorrow" is not an RFC 3339 time`},
		{"- x\n", "line 1 (job 1): a job is a mapping of its fields"},
		{"- type: noop\n", "has no name"},
		{"- {name: x, type: noop}\n- {name: x, type: noop}\n", `the name "x" is given twice`},
		{"- {name: x, type: noop, idempotencyKey: k}\n- {name: y, type: noop, idempotencyKey: k}\n", `job 2 (line 2): the idempotencyKey "k" is given twice (first on line 1)`},
		{"name: x\n", "give a list of jobs"},
	} {
		os.WriteFile(file, []byte(tc.yaml), 0o600)
		if msg := fails(t, srv, 2, "apply", "-f", file); !strings.Contains(msg, tc.want) {
			t.Errorf("apply of %q said %q, want %q", tc.yaml, msg, tc.want)
		}
	}

	// A job the server refuses is told, and nothing is changed: not the
	// good job, nor the change to cert-renewal.
	exported = strings.Replace(ok(t, srv, "export"), "0 4,16 * * *", "0 5,17 * * *", 1)
	os.WriteFile(file, []byte(exported+"- {name: good, type: noop, schedule: '@hourly'}\n- {name: bad, type: noop, schedule: '0 25 * * *'}\n"), 0o600)
	r := skedCLI(t, srv, "apply", "-f", file)
	if r.code != cli.ExitRefused || !strings.Contains(r.stdout, "4 jobs: 1 refused (below); nothing was changed: mend "+file+" and apply it again") ||
		!strings.Contains(r.stderr, `job bad: schedule: "0 25 * * *" is not a cron expression: its hour field "25" is not valid`) ||
		strings.Contains(r.stderr, "job good") {
		t.Errorf("apply of a good and a bad job exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if now := named(); now["good"].ID != "" || now["cert-renewal"].Schedule != "0 4,16 * * *" {
		t.Errorf("after a refused apply: good %+v, cert-renewal's schedule %q; want none and the old one", now["good"], now["cert-renewal"].Schedule)
	}
	// With --dry-run the refusal is part of the plan.
	r = skedCLI(t, srv, "apply", "-f", file, "--dry-run")
	if r.code != cli.ExitRefused || !strings.Contains(r.stdout, "4 jobs: 1 would be created, 1 would be changed, 1 unchanged, 1 refused (below)") {
		t.Errorf("apply --dry-run of a good and a bad job exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A YAML true meant as a command is a boolean: the refusal says to quote it.
	os.WriteFile(file, []byte("- {name: yes-man, type: exec, schedule: '@hourly', payload: {command: [true]}}\n"), 0o600)
	if r := skedCLI(t, srv, "apply", "-f", file); r.code != cli.ExitRefused || !strings.Contains(r.stderr, "not a JSON bool") ||
		!strings.Contains(r.stderr, `in YAML, quote a value meant as text ("true", "0755")`) {
		t.Errorf("apply of command: [true] exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	// No server: one error, not one per job.
	os.WriteFile(file, []byte("- {name: good, type: noop, schedule: '@hourly'}\n- {name: bad, type: noop, schedule: '0 25 * * *'}\n"), 0o600)
	r = skedCLI(t, "http://"+freeAddr(t), "apply", "-f", file)
	if r.code != cli.ExitUnreachable || r.stdout != "" || strings.Count(r.stderr, "cannot connect") != 1 || strings.Contains(r.stderr, "job good") {
		t.Errorf("apply with no server exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestCLI_ApplyOneOff: apply says what a put leaves of a one-off job the
// file means to change: another runAt (kept), and a run that is over (not
// run again).
func TestCLI_ApplyOneOff(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startServe(t, filepath.Join(dir, "sked.db"), addr, "--enable-exec")
	srv := "http://" + addr
	file := filepath.Join(dir, "once.yaml")
	write := func(runAt string) {
		os.WriteFile(file, []byte("- name: maint\n  type: noop\n  jitter: 5m\n  runAt: \""+runAt+"\"\n"+
			"- name: ping\n  type: exec\n  payload: {command: [\"true\"]}\n"), 0o600)
	}
	write("2030-01-02T10:00:00Z")
	ok(t, srv, "apply", "-f", file)
	if out := ok(t, srv, "apply", "-f", file); strings.Contains(out, "keeps its time") {
		t.Errorf("apply of the same file again printed\n%s\nwith a note on maint's time (its jitter puts its due time after its runAt)", out)
	}
	waitFor(t, "the exec job done", func() bool { return okJSON[struct{ Job db.Job }](t, srv, "show", "ping").Job.State == db.StateDone })
	write("2030-01-03T10:00:00Z")
	out := ok(t, srv, "apply", "-f", file)
	for _, want := range []string{
		"= maint keeps its time 2030-01-02T10:00:00Z, not the file's runAt 2030-01-03T10:00:00Z",
		"= ping is done: apply does not run a one-off job again",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply printed\n%s\nwithout %q", out, want)
		}
	}
}

// TestCLI_ApplyPruneRunning: --prune of a schedule whose run is going
// cannot cancel it (409); the plan says so before, and the summary counts
// it as not cancelled, with how to finish the prune, rather than reading
// "0 cancelled" beside the server's refusal.
func TestCLI_ApplyPruneRunning(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startServe(t, filepath.Join(dir, "sked.db"), addr, "--enable-exec")
	srv := "http://" + addr
	file := filepath.Join(dir, "run.yaml")
	os.WriteFile(file, []byte("- name: slow\n  type: exec\n  schedule: \"0 3 * * *\"\n  payload: {command: [sleep, \"30\"]}\n"), 0o600)
	ok(t, srv, "apply", "-f", file)
	ok(t, srv, "trigger", "slow")
	waitFor(t, "slow running", func() bool { return okJSON[struct{ Job db.Job }](t, srv, "show", "slow").Job.State == db.StateRunning })
	empty := filepath.Join(dir, "empty.yaml")
	os.WriteFile(empty, []byte("[]\n"), 0o600)

	plan := ok(t, srv, "apply", "-f", empty, "--prune", "--dry-run")
	if !strings.Contains(plan, "- slow (") || !strings.Contains(plan, "running now") {
		t.Errorf("the plan of --prune says nothing of slow's run going on:\n%s", plan)
	}
	r := skedCLI(t, srv, "apply", "-f", empty, "--prune", "--yes")
	if r.code != 4 {
		t.Fatalf("apply --prune --yes of a running job exited %d, want 4:\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"0 cancelled (not in " + empty + "), 1 not cancelled (below)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("apply --prune --yes printed\n%s\nwithout %q", r.stdout, want)
		}
	}
	if !strings.Contains(r.stderr, "apply again once its run has ended") {
		t.Errorf("apply --prune --yes said\n%s\nnot how to finish the prune", r.stderr)
	}
}

// TestCLI_ExportToAnotherServer carries jobs from one server to another
// with export and apply: a named one-off job keeps its due time there
// rather than running at once, and export says on stderr what the file
// does not carry (a paused job, a running one, the jobs without a name).
func TestCLI_ExportToAnotherServer(t *testing.T) {
	dir := t.TempDir()
	from, to := freeAddr(t), freeAddr(t)
	startServe(t, filepath.Join(dir, "from.db"), from, "--enable-exec")
	startServe(t, filepath.Join(dir, "to.db"), to, "--enable-exec")
	src, dst := "http://"+from, "http://"+to
	later := okJSON[db.Job](t, src, "add", "--type", "noop", "--name", "later", "--in", "2h")
	ok(t, src, "add", "--type", "noop", "--name", "nightly", "--schedule", "0 3 * * *")
	ok(t, src, "pause", "nightly")
	ok(t, src, "add", "--type", "noop", "--in", "1h")
	slow := okJSON[db.Job](t, src, "add", "--exec", "--name", "slow", "--", "sleep", "60")
	waitFor(t, "the one-off job slow to run", func() bool {
		return okJSON[struct{ Job db.Job }](t, src, "show", slow.ID).Job.State == db.StateRunning
	})

	r := skedCLI(t, src, "export")
	if r.code != 0 {
		t.Fatalf("export exited %d:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"nightly is paused here; applied elsewhere it is not", "slow is running here; applied elsewhere it runs again",
		"1 job without a name is left out"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("export said no %q on stderr:\n%s", want, r.stderr)
		}
	}
	file := filepath.Join(dir, "jobs.yaml")
	os.WriteFile(file, []byte(r.stdout), 0o600)
	if out := ok(t, src, "apply", "-f", file); !strings.Contains(out, "nothing to change") {
		t.Fatalf("applying the export to its own server printed %q", out)
	}
	ok(t, src, "cancel-run", "slow")
	ok(t, dst, "apply", "-f", file)
	moved := okJSON[struct{ Job db.Job }](t, dst, "show", "later").Job
	if moved.NextRunAt == nil || !moved.NextRunAt.Equal(*later.NextRunAt) {
		t.Fatalf("later on the other server is due at %v, want %v as where it came from", moved.NextRunAt, later.NextRunAt)
	}
}

// TestCLI_Edit changes a job by flags and in an editor.
func TestCLI_Edit(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startServe(t, filepath.Join(dir, "sked.db"), addr)
	srv := "http://" + addr
	j := okJSON[db.Job](t, srv, "add", "--type", "noop", "--name", "report", "--schedule", "0 3 * * *", "--jitter", "5m")

	out := ok(t, srv, "edit", "report", "--schedule", "0 4 * * *", "--payload", `{"n": 2}`, "--unset", "jitter")
	for _, want := range []string{"changed job report (" + j.ID + ")", `- schedule: "0 3 * * *"`, `+ schedule: "0 4 * * *"`, `+ jitter: "0s"`, `+ payload: {"n":2}`} {
		if !strings.Contains(out, want) {
			t.Errorf("edit printed no %q:\n%s", want, out)
		}
	}
	edited := okJSON[struct{ Job db.Job }](t, srv, "show", "report").Job
	if edited.ID != j.ID || edited.Schedule != "0 4 * * *" || edited.Jitter != 0 || compact(t, edited.Payload) != `{"n":2}` {
		t.Fatalf("edited job = %+v", edited)
	}
	if msg := fails(t, srv, cli.ExitRefused, "edit", "report", "--schedule", "every day"); !strings.Contains(msg, "not a cron expression") {
		t.Errorf("edit with a bad schedule said %q", msg)
	}
	if msg := fails(t, srv, 2, "edit", "report", "--unset", "bogus"); !strings.Contains(msg, "--unset bogus: not a field") {
		t.Errorf("edit --unset of an unknown field said %q", msg)
	}

	// An editor that changes maxAttempts and removes the schedule's time
	// zone (back to its default).
	editor := filepath.Join(dir, "editor")
	os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/^maxAttempts: .*/maxAttempts: 9/; /^timezone:/d' \"$1\"\n"), 0o700)
	r := skedCLIEnv(t, []string{"SKED_SERVER=" + srv, "SKED_TOKEN=", "VISUAL=", "EDITOR=" + editor}, "edit", "report")
	if r.code != 0 || !strings.Contains(r.stdout, "+ maxAttempts: 9") || strings.Contains(r.stdout, "timezone") {
		t.Fatalf("edit in an editor: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if j := okJSON[struct{ Job db.Job }](t, srv, "show", "report").Job; j.MaxAttempts != 9 || j.Schedule != "0 4 * * *" {
		t.Fatalf("job after the editor = %+v", j)
	}
	r = skedCLIEnv(t, []string{"SKED_SERVER=" + srv, "SKED_TOKEN=", "VISUAL=", "EDITOR=true"}, "edit", "report")
	if r.code != 0 || !strings.Contains(r.stdout, "no change to job report") {
		t.Fatalf("edit with nothing changed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// No editor named and no terminal (standard input a pipe, or
	// /dev/null): vi would not work; say what to do instead.
	for _, stdin := range []io.Reader{strings.NewReader(""), nil} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // vi with no terminal waits for ever
		defer cancel()
		cmd := exec.CommandContext(ctx, skedBin, "edit", "report")
		cmd.Env = append(os.Environ(), "SKED_SERVER="+srv, "SKED_TOKEN=", "VISUAL=", "EDITOR=")
		cmd.Stdin, cmd.WaitDelay = stdin, time.Second // and its editor keeps the output open
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "opens the job in vi, which needs a terminal") || !strings.Contains(string(out), "-f FILE") {
			t.Fatalf("edit without an editor or a terminal: exit %d\n%s", code, out)
		}
	}

	// An edit the server refuses is kept, with the way to send it again
	// once mended.
	os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/^schedule: .*/schedule: every day/; s/^maxAttempts: .*/maxAttempts: 4/' \"$1\"\n"), 0o700)
	r = skedCLIEnv(t, []string{"SKED_SERVER=" + srv, "SKED_TOKEN=", "VISUAL=", "EDITOR=" + editor}, "edit", "report")
	m := regexp.MustCompile("(?m)^sked: your edit is kept in (\\S+): fix it there and send it with `sked edit report -f (\\S+)`$").FindStringSubmatch(r.stderr)
	if r.code != cli.ExitRefused || !strings.Contains(r.stderr, "not a cron expression") || m == nil || m[1] != m[2] {
		t.Fatalf("a refused edit: exit %d, want 4, the server's refusal and where the edit is kept:\n%s%s", r.code, r.stdout, r.stderr)
	}
	kept, err := os.ReadFile(m[1])
	if err != nil || !strings.Contains(string(kept), "schedule: every day") || !strings.Contains(string(kept), "maxAttempts: 4") {
		t.Fatalf("the kept edit %s: %v\n%s", m[1], err, kept)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(m[1])) })
	os.WriteFile(m[1], []byte(strings.Replace(string(kept), "schedule: every day", "schedule: 0 5 * * *", 1)), 0o600)
	if msg := fails(t, srv, 2, "edit", "report", "-f", m[1], "--jitter", "1m"); !strings.Contains(msg, "leave out the flags that set fields") {
		t.Errorf("edit -f with a field flag said %q", msg)
	}
	// A file without the type, which cannot change, says to keep it.
	untyped := filepath.Join(t.TempDir(), "untyped.yaml")
	os.WriteFile(untyped, []byte("schedule: 0 6 * * *\n"), 0o600)
	if msg := fails(t, srv, 2, "edit", "report", "-f", untyped); !strings.Contains(msg, "has no type: a job's type cannot change; keep the line `type: ") {
		t.Errorf("edit -f of a file without the type said %q", msg)
	}
	out = ok(t, srv, "edit", "report", "-f", m[1])
	if !strings.Contains(out, `+ schedule: "0 5 * * *"`) || !strings.Contains(out, "+ maxAttempts: 4") {
		t.Errorf("edit -f of the mended edit printed:\n%s", out)
	}
	if j := okJSON[struct{ Job db.Job }](t, srv, "show", "report").Job; j.Schedule != "0 5 * * *" || j.MaxAttempts != 4 {
		t.Fatalf("job after edit -f = %+v", j)
	}
}

// TestCLI_ShellCharacters: a command with && and < reads as written, not
// as encoding/json's HTML escapes (\u0026, \u003c), in what the CLI prints
// and what it sends, also for a job that another client stored with those
// escapes.
func TestCLI_ShellCharacters(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startServe(t, filepath.Join(dir, "sked.db"), addr, "--enable-exec")
	srv := "http://" + addr
	api := client{t, srv}
	const cmd = `test -r /etc/hostname && wc -l < /etc/hostname`
	literal := func(what, out string) {
		t.Helper()
		if !strings.Contains(out, cmd) || strings.Contains(out, `\u00`) {
			t.Errorf("%s does not have %q as written:\n%s", what, cmd, out)
		}
	}
	file := filepath.Join(dir, "jobs.yaml")
	os.WriteFile(file, []byte("- name: lines\n  type: exec\n  schedule: '0 3 1 1 *'\n  payload:\n    command: [sh, -c, '"+cmd+"']\n"), 0o600)
	literal("apply --dry-run", ok(t, srv, "apply", "-f", file, "--dry-run"))
	literal("apply --dry-run --json", ok(t, srv, "apply", "--json", "-f", file, "--dry-run"))
	ok(t, srv, "apply", "-f", file)
	_, stored := api.do("GET", "/jobs/lines", nil)
	literal("the job as the CLI sent it", string(stored))
	literal("show", ok(t, srv, "show", "lines"))
	literal("show --json", ok(t, srv, "show", "--json", "lines"))
	literal("export", ok(t, srv, "export"))
	literal("export --json", ok(t, srv, "export", "--json"))
	literal("edit", ok(t, srv, "edit", "lines", "--payload", `{"command":["true"]}`)) // - payload: the old command
	if show := ok(t, srv, "show", "lines"); !strings.Contains(show, `"test -r /etc/hostname && wc -l <`) || strings.Contains(show, `\u00`) {
		t.Errorf("the timeline of show does not have the old command as written:\n%s", show)
	}

	// json.Marshal, as many clients encode, stores the escapes.
	api.create(map[string]any{"name": "escaped", "type": "exec", "schedule": "0 3 1 1 *", "payload": map[string]any{"command": []string{"sh", "-c", cmd}}})
	if _, stored := api.do("GET", "/jobs/escaped", nil); !strings.Contains(string(stored), `\u0026\u0026`) {
		t.Fatalf("a job sent with json.Marshal is stored without its escapes, so this test tests nothing:\n%s", stored)
	}
	literal("show of an escaped job", ok(t, srv, "show", "escaped"))
	literal("show --json of an escaped job", ok(t, srv, "show", "--json", "escaped"))
	r := skedCLIEnv(t, []string{"SKED_SERVER=" + srv, "SKED_TOKEN=", "VISUAL=", "EDITOR=true"}, "edit", "escaped")
	if r.code != 0 || !strings.Contains(r.stdout, "no change to job escaped") {
		t.Fatalf("edit of an escaped job with nothing changed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
