package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// mainOf runs args as the sked binary does, with an empty environment, and
// returns its exit status and what it wrote.
func mainOf(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, Env{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// TestMain_ValueFromEnv: a refused value read from a SKED_… variable says
// so, for no flag on the command line shows it; one given as a flag does
// not.
func TestMain_ValueFromEnv(t *testing.T) {
	env := map[string]string{"SKED_SERVER": "localhost:1", "SKED_WORKERS": "0", "SKED_NOTIFY_WORKERS": "0", "SKED_LEASE": "10ms"}
	run := func(args ...string) string {
		var errOut bytes.Buffer
		if code := Main(context.Background(), args, Env{Getenv: func(k string) string { return env[k] }, Stdout: io.Discard, Stderr: &errOut}); code != 2 {
			t.Errorf("sked %q: exit %d, want 2", args, code)
		}
		return errOut.String()
	}
	if msg := run("ls"); !strings.HasPrefix(msg, `sked: --server "localhost:1" (from SKED_SERVER): give an http:// or https:// URL`) {
		t.Errorf("ls with SKED_SERVER=localhost:1 said %q", msg)
	}
	msg := run("serve", "--lease", "20ms")
	for _, want := range []string{"sked: --workers 0 (from SKED_WORKERS): must be at least 1\n",
		"sked: --notify-workers 0 (from SKED_NOTIFY_WORKERS): must be at least 1\n", "sked: --lease 20ms: must be from 300ms to 24h0m0s"} {
		if !strings.Contains(msg, want) {
			t.Errorf("serve said %q, want %q", msg, want)
		}
	}
}

// TestMain_JoinedUsageErrors: a command line with several faults says each
// on a line of its own, each after "sked:" as every other error, and then
// where the help is.
func TestMain_JoinedUsageErrors(t *testing.T) {
	code, _, stderr := mainOf("work", "--concurrency", "0")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != 2 || len(lines) < 3 || lines[len(lines)-1] != "Run 'sked work --help' for usage." {
		t.Fatalf("sked work --concurrency 0: exit %d, stderr:\n%s", code, stderr)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "sked: ") {
			t.Errorf("line %q of the joined errors lacks the sked: prefix; stderr:\n%s", l, stderr)
		}
	}
}

// TestMain_BadValues: a flag given a value it does not take is said in one
// form whatever the command, "--flag VALUE: what to give", and exits 2.
func TestMain_BadValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "--type", "t", "--at", "tomorrow"}, `--at "tomorrow": give an RFC 3339 time such as 2026-12-01T06:00:00Z`},
		{[]string{"pause", "j", "--until", "noon"}, `--until "noon": give an RFC 3339 time such as 2026-12-01T06:00:00Z, or a duration from now such as 2h`},
		{[]string{"pause", "j", "--until", "-2h"}, `--until "-2h": give an RFC 3339 time such as 2026-12-01T06:00:00Z, or a duration from now such as 2h`},
		{[]string{"backfill", "j", "--from", "2026-11-26", "--to", "2026-11-27T00:00:00Z"}, `--from "2026-11-26": give an RFC 3339 time`},
		{[]string{"check", "--db", "x.db", "--end", "12:10"}, `--end "12:10": give an RFC 3339 time`},
		{[]string{"serve", "--test-clock=monday"}, `--test-clock "monday": give an RFC 3339 time such as 2026-12-01T06:00:00Z, or no value to start now`},
		{[]string{"serve", "--test-clock", "2026-13-01"}, `--test-clock "2026-13-01": give an RFC 3339 time such as 2026-12-01T06:00:00Z, or no value to start now`},
		{[]string{"serve", "--db", "postgres://sked@127.0.0.1:1/sked", "--test-clock", "2026-03-01T00:00:00Z"}, `--test-clock needs a SQLite --db`},
		{[]string{"add", "--type", "t", "--in", "-5m"}, "--in -5m0s: must not be negative"},
		{[]string{"serve", "--retention", "30d"}, `--retention "30d": give a duration such as 30s, 1m30s or 2h (a duration has no days: 30d is 720h)`},
		{[]string{"add", "--type", "t", "--in", "1d12h"}, `--in "1d12h": give a duration such as 30s, 1m30s or 2h (a duration has no days: 1d12h is 36h)`},
		{[]string{"pause", "j", "--until", "2w"}, `--until "2w": give an RFC 3339 time such as 2026-12-01T06:00:00Z, or a duration from now such as 2h (a duration has no days: 2w is 336h)`},
		{[]string{"add", "--type", "t", "--payload", "{nope"}, `--payload "{nope": give valid JSON`},
		{[]string{"add", "--type", "t", "--payload", "@cli_test.go"}, `--payload @cli_test.go: cli_test.go holds no valid JSON (invalid character 'p' looking for beginning of value)`},
		{[]string{"ls", "--server", "localhost:8080"}, `--server "localhost:8080": give an http:// or https:// URL`},
		{[]string{"ls", "--server", "http://a:8080,b:8080"}, `--server "b:8080": give an http:// or https:// URL`},
		{[]string{"ls", "--server", " , "}, `--server is empty: give the URL of a sked server`},
		{[]string{"ls", "--server", "http://127.0.0.1:8080/#/jobs"}, `--server "http://127.0.0.1:8080/#/jobs": give the address sked answers at, without a ?… or #… part: http://127.0.0.1:8080/`},
		{[]string{"work", "--type", "t", "--server", "http://a:8080,http://b:8080/?x=1", "--", "true"}, `--server "http://b:8080/?x=1": give the address sked answers at, without a ?… or #… part: http://b:8080/`},
		{[]string{"ls", "--limit", "many"}, `--limit "many": give a whole number`},
		{[]string{"migrate", "--db", "postgres://sked:hunter2@127.0.0.1:1/sked?sslmode=sometimes"}, `--db: failed to configure TLS (sslmode is invalid); mend the URL`},
		{[]string{"serve", "--db-wait", "-1s"}, `--db-wait "-1s": must not be negative (0: do not wait)`},
		{[]string{"serve", "--db-wait", "soon"}, `--db-wait "soon": give a duration such as 30s, 1m30s or 2h`},
		{[]string{"work", "--type", "t", "--lease", "48h", "--", "true"}, `--lease 48h0m0s: must be from 300ms to 24h0m0s`},
		{[]string{"serve", "--lease", "25h"}, `--lease 25h0m0s: must be from 300ms to 24h0m0s`},
		{[]string{"completion", "nope"}, `unknown shell "nope": sked completion bash, zsh, fish or powershell`},
		{[]string{"backup", "--db", "/nonexistent/sked.db", "copy.db"}, `back up /nonexistent/sked.db: there is no such file; give the database sked serve uses with --db`},
		{[]string{"backup", "--db", "cli_test.go", "cli.go"}, `cli.go exists; pass --force to replace it`},
		{[]string{"backup", "--db", "cli_test.go", "/nonexistent/copy.db"}, `directory /nonexistent does not exist; create it (mkdir -p /nonexistent)`},
		{[]string{"serve", "--token", "t1", "--read-token", "t1"}, `a token is given both in --token (SKED_TOKEN) and in --read-token (SKED_READ_TOKEN)`},
	} {
		code, _, stderr := mainOf(c.args...)
		if code != 2 || !strings.HasPrefix(stderr, "sked: "+c.want) {
			t.Errorf("sked %q: exit %d, said %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
	}
	if code, _, stderr := mainOf("backfill", "j", "--from", "2026-11-26T00:00:00Z"); code != 2 || !strings.Contains(stderr, "--from and --to are required") {
		t.Errorf("backfill without --to: exit %d, said %q", code, stderr)
	}
}

// TestMain_Mistyped: a mistyped command is called one, flags and all, and a
// mistyped flag or command is answered with the nearest one.
func TestMain_Mistyped(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ad", "--type", "x"}, `unknown command "ad"; did you mean add?`},
		{[]string{"serv"}, `unknown command "serv"; did you mean serve?`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"add", "--type", "x", "--max-attemps", "3"}, "unknown flag: --max-attemps; did you mean --max-attempts?"},
		{[]string{"serve", "--enable-exce"}, "unknown flag: --enable-exce; did you mean --enable-exec?"},
		{[]string{"add", "--zzzzzz"}, "unknown flag: --zzzzzz"},
		{[]string{"lsit"}, `unknown command "lsit"; did you mean edit or ls or wait?`},
		{[]string{"shwo", "x"}, `unknown command "shwo"; did you mean show?`},
		{[]string{"retyr", "x"}, `unknown command "retyr"; did you mean retry?`},
		{[]string{"list"}, `unknown command "list"; did you mean ls?`},
		{[]string{"wor"}, `unknown command "wor"; did you mean work or workers?`},
		{[]string{"add", "--exec", "--cron", "* * * * *"}, "unknown flag: --cron; did you mean --schedule?"},
		{[]string{"add", "--type", "t", "--retries", "3"}, "unknown flag: --retries; did you mean --max-attempts?"},
		{[]string{"add", "--http", "https://example.com/hook"}, "unknown flag: --http; did you mean --url?"},
		{[]string{"edit", "x", "--in", "5m"}, "unknown flag: --in: a one-off job's due time cannot change; cancel the job and add it again (sked cancel ID|NAME, then sked add)"},
		{[]string{"edit", "x", "--type", "y"}, "unknown flag: --type: a job's type cannot change; cancel the job and add it again"},
		{[]string{"healthcheck", "--server", "http://127.0.0.1:8080"}, "unknown flag: --server; did you mean --addr?"},
		{[]string{"serve", "--port", "8080"}, "unknown flag: --port; did you mean --addr?"},
		{[]string{"serve", "--database", "x.db"}, "unknown flag: --database; did you mean --db?"},
		{[]string{"serve", "--concurrency", "4"}, "unknown flag: --concurrency; did you mean --workers?"},
		{[]string{"work", "--workers", "4"}, "unknown flag: --workers; did you mean --concurrency?"},
		{[]string{"add", "--exec", "sh", "-c", "echo hi"}, "unknown shorthand flag: 'c' in -c; a command and its own flags go after --, as in sked add --exec -- sh -c 'date'"},
	} {
		code, _, stderr := mainOf(c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("sked %s: exit %d, %q; want exit 2 and %q", strings.Join(c.args, " "), code, stderr, c.want)
		}
		if !strings.Contains(c.want, "did you mean") && strings.Contains(stderr, "did you mean") {
			t.Errorf("sked %s: %q suggests something far from it", strings.Join(c.args, " "), stderr)
		}
	}
}

// TestTimeFlag_Forms: a time flag takes RFC 3339 as date(1) writes it (a
// space for the T, lower case t and z, an offset without its colon), each
// the same instant; a time without an offset, or a date alone, is refused
// with the fix.
func TestTimeFlag_Forms(t *testing.T) {
	want := time.Date(2026, 12, 2, 8, 53, 13, 0, time.UTC)
	for _, v := range []string{"2026-12-02T08:53:13Z", "2026-12-02 08:53:13+00:00", "2026-12-02t08:53:13z",
		"2026-12-02T09:53:13+0100", "2026-12-02 09:53:13+01:00", "2026-12-02T08:53:13.000Z"} {
		var at rfc3339Value
		if err := at.Set(v); err != nil || !time.Time(at).Equal(want) {
			t.Errorf("--at %q: %v, %v; want %v", v, time.Time(at), err, want)
		}
	}
	var at rfc3339Value
	if err := at.Set("2026-12-02 08:53:13"); err == nil || !strings.Contains(err.Error(), "has no zone offset") {
		t.Errorf("--at without an offset: %v; want the offset's hint", err)
	}
	if err := at.Set("2026-11-26"); err == nil || !strings.Contains(err.Error(), "such as 2026-11-26T00:00:00Z") {
		t.Errorf("--at with a date alone: %v; want the time to add", err)
	}
}

// TestMain_AddUsage: sked add's usage line names sked in each of its
// forms, each a command line to type.
func TestMain_AddUsage(t *testing.T) {
	code, stdout, _ := mainOf("add", "--help")
	want := "Usage:\n  sked add --type T [flags] | sked add --exec [flags] -- CMD ARGS… | sked add --url URL [flags]\n"
	if code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("sked add --help: exit %d, %q; want %q", code, stdout, want)
	}
	if code, _, stderr := mainOf("add", "--bogus"); code != ExitUsage || !strings.Contains(stderr, "Run 'sked add --help' for usage.") {
		t.Errorf("sked add --bogus: exit %d, %q", code, stderr)
	}
}
