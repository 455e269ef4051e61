package cli

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/handlers"
)

// TestParseJobs: YAML and JSON read alike, payload keys keep their order
// and numbers their text, so that a payload applied as exported is the
// same JSON.
func TestParseJobs(t *testing.T) {
	for _, src := range []string{
		"- name: a\n  type: http\n  payload: {url: 'https://x.example', body: {z: 1, a: 2.50, n: null, t: true}}\n  timeout: 90s\n",
		`[{"name": "a", "type": "http", "payload": {"url": "https://x.example", "body": {"z": 1, "a": 2.50, "n": null, "t": true}}, "timeout": "90s"}]`,
	} {
		jobs, err := parseJobs([]byte(src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if len(jobs) != 1 || string(jobs[0].Payload) != `{"url":"https://x.example","body":{"z":1,"a":2.50,"n":null,"t":true}}` ||
			time.Duration(jobs[0].Timeout) != 90*time.Second {
			t.Errorf("%s: read %+v (payload %s)", src, jobs, jobs[0].Payload)
		}
	}
	if _, err := parseJobs([]byte("- name: a\n  type: noop\n  timeout: soon\n")); err == nil || !strings.Contains(err.Error(), "not a duration") {
		t.Errorf("a bad duration: %v", err)
	}
}

// TestApply_StandardInput: a file read from standard input (-f -) is
// called so in what apply says, not "-".
func TestApply_StandardInput(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	stdinFrom := func(t *testing.T, text string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "jobs.yaml")
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		stdin := os.Stdin
		os.Stdin = f
		t.Cleanup(func() { os.Stdin = stdin; f.Close() })
	}
	jobs := "- {name: nightly, type: noop, schedule: '@daily'}\n"
	for i, want := range []string{"1 job: 1 created", "nothing to change: the server has the 1 job of standard input as they are"} {
		stdinFrom(t, jobs)
		if code, stdout, stderr := mainOf("apply", "-f", "-", "--server", srv.URL); code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("apply %d of standard input: exit %d, %q, %q; want %q", i+1, code, stdout, stderr, want)
		}
	}
	stdinFrom(t, "name: x\n")
	if code, _, stderr := mainOf("apply", "-f", "-", "--server", srv.URL); code != ExitUsage || !strings.HasPrefix(stderr, "sked: standard input: line 1:") {
		t.Errorf("apply of a bad standard input: exit %d, %q; want it named standard input", code, stderr)
	}
}

// TestApply_RunAtPassed: a file whose one-off job's runAt has passed by the
// server's clock (a year mistyped) makes a job due at once; sked apply
// warns of it, as sked add --at does, in its plan (--dry-run) and when it
// creates the job, and not for a job it had created already. It used to
// say nothing.
func TestApply_RunAtPassed(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(file, []byte("- {name: report, type: noop, runAt: '2006-01-02T15:04:05Z'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const warning = "warning: the runAt of report 2006-01-02T15:04:05Z has passed (the server's time is "
	for _, c := range []struct {
		args []string
		want string // at the end of the warning; "" for none
	}{
		{[]string{"--dry-run"}, "the job is due at once; mend its runAt in " + file + " if that is not what you meant\n"},
		{nil, "the job is due at once; sked cancel report if that is not what you meant\n"},
		{nil, ""}, // the job is there already: nothing created
	} {
		code, stdout, stderr := mainOf(append([]string{"apply", "-f", file, "--server", srv.URL}, c.args...)...)
		if code != 0 {
			t.Fatalf("apply %v: exit %d, %q, %q", c.args, code, stdout, stderr)
		}
		if got := strings.HasPrefix(stderr, warning) && strings.HasSuffix(stderr, c.want); c.want != "" && !got || c.want == "" && stderr != "" {
			t.Errorf("apply %v said on stderr %q; want a warning ending %q", c.args, stderr, c.want)
		}
	}
}
