package cli

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"os/user"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/handlers"
	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/wire"
	"github.com/sked-dev/sked/worker"
)

// TestConnect_Actor: changes are signed USER@HOST, and with USER unset (in
// a container, under cron) by the account's name, not left anonymous.
func TestConnect_Actor(t *testing.T) {
	host, _ := os.Hostname()
	me, err := user.Current()
	if err != nil {
		t.Skipf("no current user: %v", err)
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"USER": "alice"}, "alice@" + host},
		{map[string]string{}, me.Username + "@" + host},
	} {
		a := &api{env: Env{Getenv: func(k string) string { return c.env[k] }}, server: "http://127.0.0.1:8080"}
		if err := a.connect(context.Background()); err != nil {
			t.Fatal(err)
		}
		if a.c.Actor != c.want {
			t.Errorf("USER %q: actor %q, want %q", c.env["USER"], a.c.Actor, c.want)
		}
	}
}

func TestOverdue(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, c := range []struct {
		job  db.Job
		want string
	}{
		{db.Job{Type: "thumb", State: db.StateReady, NextRunAt: at(-5 * time.Minute)}, `due 5m0s ago and not started: no worker serving type "thumb"`},
		{db.Job{Type: "thumb", State: db.StateReady, NextRunAt: at(-59 * time.Second)}, ""},
		{db.Job{Type: "thumb", State: db.StateReady, NextRunAt: at(time.Hour)}, ""},
		{db.Job{Type: "thumb", State: db.StateRunning, NextRunAt: at(-time.Hour)}, ""},
		{db.Job{Type: "thumb", State: db.StatePaused, NextRunAt: at(-time.Hour)}, ""},
	} {
		if got := overdue(c.job, now); !strings.HasPrefix(got, c.want) || (c.want == "") != (got == "") {
			t.Errorf("overdue(%s, due %v) = %q, want %q…", c.job.State, c.job.NextRunAt.Sub(now), got, c.want)
		}
	}
}

// TestShow_WaitingByServerClock: sked show says a job waits by the
// server's clock, whatever the CLI's says. The server's runs three hours
// behind this machine's: a job just due there is not overdue, however late
// it looks here; one due there five minutes ago is, although it looks three
// hours early here.
func TestShow_WaitingByServerClock(t *testing.T) {
	clock := dbtest.NewClock(time.Now().Add(-3 * time.Hour).Truncate(time.Second))
	s := sqlitetest.Open(t)
	s.NowFunc = clock.Now
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	j, _, err := s.JobCreate(context.Background(), db.JobCreateParams{Type: "thumb"})
	if err != nil {
		t.Fatal(err)
	}
	show := func() string {
		t.Helper()
		code, stdout, stderr := mainOf("show", j.ID, "--server", srv.URL)
		if code != 0 {
			t.Fatalf("sked show: exit %d: %s", code, stderr)
		}
		return stdout
	}
	if out := show(); strings.Contains(out, " ago and not started") {
		t.Errorf("a job due now by the server's clock, 3 h ago by the CLI's, shown as waiting long:\n%s", out)
	} else if !regexp.MustCompile(`Waiting:\s+no worker has claimed type "thumb" in the last ` + wire.SilentAfter.String()).MatchString(out) {
		t.Errorf("a job due now of a type no worker serves, not shown as waiting for one:\n%s", out)
	}
	clock.Advance(5 * time.Minute)
	if out := show(); !regexp.MustCompile(`Waiting:\s+due 5m0s ago and not started: no worker serving type "thumb"`).MatchString(out) {
		t.Errorf("a job due 5 min ago by the server's clock, in 2 h 55 min by the CLI's, not shown as waiting 5 min:\n%s", out)
	}
}

// TestAdd_ZoneFromEnv: sked add's --tz defaults to SKED_TZ, so that the
// lines of a crontab moved over keep their machine's zone; --tz wins.
func TestAdd_ZoneFromEnv(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "Europe/Berlin"},
		{[]string{"--tz", "Asia/Tokyo"}, "Asia/Tokyo"},
	} {
		var out, errOut strings.Builder
		args := append([]string{"add", "--type", "t", "--schedule", "30 2 * * *", "--server", srv.URL, "--json"}, c.args...)
		env := Env{Getenv: func(k string) string { return map[string]string{"SKED_TZ": "Europe/Berlin"}[k] }, Stdout: &out, Stderr: &errOut}
		if code := Main(context.Background(), args, env); code != 0 {
			t.Fatalf("sked %v: exit %d: %s", args, code, errOut.String())
		}
		if !strings.Contains(out.String(), `"timezone": "`+c.want+`"`) {
			t.Errorf("sked %v with SKED_TZ=Europe/Berlin: %s; want timezone %s", args, out.String(), c.want)
		}
	}
	// A one-off job has no zone: SKED_TZ leaves it be (it was refused as
	// a --tz without --schedule); a --tz given is still refused.
	for _, c := range []struct {
		args []string
		code int
	}{{nil, 0}, {[]string{"--in", "5m"}, 0}, {[]string{"--tz", "Asia/Tokyo"}, 2}} {
		var out, errOut strings.Builder
		args := append([]string{"add", "--type", "t", "--server", srv.URL}, c.args...)
		env := Env{Getenv: func(k string) string { return map[string]string{"SKED_TZ": "Europe/Berlin"}[k] }, Stdout: &out, Stderr: &errOut}
		if code := Main(context.Background(), args, env); code != c.code {
			t.Errorf("sked %v with SKED_TZ=Europe/Berlin: exit %d, %s; want %d", args, code, errOut.String(), c.code)
		}
	}
}

// TestAdd_EmptyNameOrKey: an empty --name or --key (a script's unset
// variable) is a usage error, not a job without one.
func TestAdd_EmptyNameOrKey(t *testing.T) {
	for _, flag := range []string{"--name", "--key"} {
		code, _, stderr := mainOf("add", "--type", "t", flag, "", "--server", "http://127.0.0.1:1")
		if code != 2 || !strings.Contains(stderr, flag+" is empty") {
			t.Errorf("sked add %s '': exit %d, %q; want a usage error", flag, code, stderr)
		}
	}
}

// TestClient_RequestTimeout: a server that takes the connection and never
// answers fails a client command after --request-timeout, saying what to
// look at, instead of holding a script for ever.
func TestClient_RequestTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	var conns []net.Conn // held open, never answered
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepted
		for _, c := range conns {
			c.Close()
		}
	})
	done := make(chan struct{})
	var (
		code   int
		stderr string
	)
	go func() {
		defer close(done)
		code, _, stderr = mainOf("ls", "--request-timeout", "300ms", "--server", "http://"+ln.Addr().String())
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("sked ls --request-timeout 300ms against a server that never answers: still waiting after 30s")
	}
	if code != ExitUnreachable || !strings.Contains(stderr, "did not answer in time") || !strings.Contains(stderr, "now 300ms") || !strings.Contains(stderr, "--request-timeout") {
		t.Errorf("sked ls against a server that never answers: exit %d, %q", code, stderr)
	}
}

// TestAdd_ExecEnvDir: sked add --exec --env NAME=value --dir DIR puts the
// variables and the directory into the exec payload; a malformed --env, or
// either flag without --exec, is refused with nothing created.
func TestAdd_ExecEnvDir(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s, ValidatePayload: worker.ValidatePayload}))
	t.Cleanup(srv.Close)
	code, stdout, stderr := mainOf("add", "--server", srv.URL, "--json", "--exec", "--env", "BACKUP_DIR=/mnt/b",
		"--env", "GREETING=a=b c", "--dir", "/srv", "--", "/path/x.sh")
	if code != 0 {
		t.Fatalf("sked add --exec --env --dir: exit %d: %s", code, stderr)
	}
	for _, want := range []string{`"BACKUP_DIR": "/mnt/b"`, `"GREETING": "a=b c"`, `"dir": "/srv"`, `"command": [`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("payload without %s:\n%s", want, stdout)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--exec", "--env", "BACKUP_DIR", "--", "/path/x.sh"}, `--env "BACKUP_DIR": give NAME=value`},
		{[]string{"--type", "t", "--env", "A=1"}, "add --exec"},
		{[]string{"--url", "http://127.0.0.1:1/", "--dir", "/srv"}, "add --exec"},
		{[]string{"--exec", "--dir", "srv", "--", "/path/x.sh"}, "must be an absolute path"},
		{[]string{"--exec", "--env", "SKED_JOB=1", "--", "/path/x.sh"}, "set by sked"},
	} {
		code, _, stderr := mainOf(append([]string{"add", "--server", srv.URL}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("sked add %q: exit %d, %q; want a refusal with %q", c.args, code, stderr, c.want)
		}
	}
	if st, err := s.Stats(context.Background(), time.Now()); err != nil || st.JobsByState[db.StateReady] != 1 {
		t.Errorf("ready jobs %v, %v: want only the one job created", st.JobsByState, err)
	}
}

// claimedJob creates a job of type thumb on s and claims it for worker w,
// with lease (0: the store's default).
func claimedJob(t *testing.T, s *sqlite.Store, lease time.Duration) db.Claim {
	t.Helper()
	ctx := context.Background()
	if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "thumb"}); err != nil {
		t.Fatal(err)
	}
	c, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"thumb"}, Max: 1, Lease: lease})
	if err != nil || len(c) != 1 {
		t.Fatalf("claim: %v, %v", c, err)
	}
	return c[0]
}

// TestRuns_Output: sked runs shows the last line of each run's output, and
// with --output its whole error and all the output the run kept.
func TestRuns_Output(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	c := claimedJob(t, s, 0)
	j := c.Job
	if _, err := s.RunFinish(ctx, db.RunFinishParams{JobID: j.ID, Generation: c.Job.LeaseGeneration,
		Outcome: db.OutcomeFailed, Error: "exit status 4", Output: "resizing 1.jpg\nbad header\n\n"}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := mainOf("runs", j.ID, "--server", srv.URL)
	if code != 0 || !regexp.MustCompile(`exit status 4\s+bad header\n`).MatchString(out) {
		t.Errorf("sked runs: exit %d, %q %q; want the error and the output's last line", code, out, stderr)
	}
	code, out, _ = mainOf("runs", j.ID, "--output", "--server", srv.URL)
	if code != 0 || !strings.Contains(out, "── run 1, attempt 1, failed ──\nerror: exit status 4\nresizing 1.jpg\nbad header\n") {
		t.Errorf("sked runs --output: exit %d, %q; want the whole error and output under its run", code, out)
	}
}

// TestRuns_LateOutcome: a run whose lease was taken back shows how its
// execution said it ended, reported late, in the runs table (sked runs,
// sked show) and under --output, where only --json had it.
func TestRuns_LateOutcome(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	c := claimedJob(t, s, time.Second)
	j := c.Job
	s.NowFunc = func() time.Time { return time.Now().Add(time.Hour) } // past the lease
	if n, err := s.RunReapExpired(ctx); err != nil || n != 1 {
		t.Fatalf("reap: %d, %v", n, err)
	}
	if _, err := s.RunFinish(ctx, db.RunFinishParams{JobID: j.ID, Generation: c.Job.LeaseGeneration,
		Outcome: db.OutcomeFailed, Error: "stopped: lease lost"}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("late report: %v, want ErrStale", err)
	}
	code, out, stderr := mainOf("runs", j.ID, "--output", "--server", srv.URL)
	if code != 0 || !strings.Contains(out, "lease_expired, reported failed late") || !regexp.MustCompile(`reported late, at \S+: failed: stopped: lease lost\n`).MatchString(out) {
		t.Errorf("sked runs --output of a run reaped, then reported: exit %d, %q %q; want its late outcome in the table and under the run", code, out, stderr)
	}
}

// TestListName: sked ls names the jobs that deliver a notification or a
// ping, which have no name, by what they are (their keys as the notifier
// makes them), and other jobs by their name or "-".
func TestListName(t *testing.T) {
	s := sqlitetest.Open(t)
	ctx := context.Background()
	sink, err := notify.ParseSink("webhook:https://hooks.example/sked")
	if err != nil {
		t.Fatal(err)
	}
	n := &notify.Notifier{Store: s, Sinks: []notify.Sink{sink}}
	now := s.Now()
	if err := n.Notify(ctx, notify.ClockStep(now, now.Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := n.Ping(ctx, "https://hc.example/abc", notify.PingStart, db.Job{ID: "01JOB"}, db.Run{ID: 1, StartedAt: &now}); err != nil {
		t.Fatal(err)
	}
	named, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t", Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	plain, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t"})
	if err != nil {
		t.Fatal(err)
	}
	jobs, _, err := s.JobList(ctx, db.JobListParams{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, j := range jobs {
		got[listName(j)]++
	}
	want := map[string]int{"(notification)": 1, "(ping)": 1, "nightly": 1, "-": 1}
	if len(got) != len(want) || got["(notification)"] != 1 || got["(ping)"] != 1 || got[named.Name] != 1 || got["-"] != 1 {
		t.Errorf("names listed %v; want %v (plain job %s)", got, want, plain.ID)
	}
}

// TestInZone: a time of a job in another zone than UTC reads as its clock
// there too, with the day when it is another.
func TestInZone(t *testing.T) {
	at := time.Date(2026, 12, 2, 2, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		zone, want string
	}{
		{"", "2026-12-02T02:30:00Z"},
		{"UTC", "2026-12-02T02:30:00Z"},
		{"Europe/Berlin", "2026-12-02T02:30:00Z (03:30 in Europe/Berlin)"},
		{"America/New_York", "2026-12-02T02:30:00Z (Tue 1 Dec 21:30 in America/New_York)"},
	} {
		if got := inZone(&at, tc.zone); got != tc.want {
			t.Errorf("inZone(%s) = %q, want %q", tc.zone, got, tc.want)
		}
	}
	if got := inZone(nil, "Europe/Berlin"); got != "" {
		t.Errorf("inZone(nil) = %q, want empty", got)
	}
}

// TestCheckExecCommand: sked add --exec refuses a command only a shell
// would read as meant (an exec job runs none), saying to use sh -c or
// env, and takes commands that are a program and its arguments.
func TestCheckExecCommand(t *testing.T) {
	for _, c := range []struct {
		command []string
		want    string // part of the refusal; "" to accept
	}{
		{[]string{"./backup.sh", "--to", "/mnt/b"}, ""},
		{[]string{"/opt/My Scripts/run.sh"}, ""},
		{[]string{"curl", "-fsS", "https://hc.example/ping?a=1&b=2"}, ""},
		{[]string{"sh", "-c", "backup.sh >> /var/log/b.log 2>&1"}, ""},
		{[]string{"env", "BACKUP_DIR=/mnt/b", "/path/x.sh"}, ""},
		{[]string{"env", "X=1", "/bin/bash", "-c", "a | b"}, ""},
		{[]string{"backup.sh --full"}, "is one argument"},
		{[]string{"BACKUP_DIR=/mnt/b", "/path/x.sh"}, `set it with --env BACKUP_DIR=/mnt/b`},
		{[]string{"/path/backup.sh >> /log 2>&1"}, `has "/path/backup.sh >> /log 2>&1" in it`},
		{[]string{"/path/backup.sh", ">>", "/log"}, `has ">>" in it`},
		{[]string{"/path/backup.sh", "2>&1"}, `sh -c "/path/backup.sh 2>&1"`},
		{[]string{"pg_dump", "db", "|", "gzip"}, `has "|" in it`},
		{[]string{"make", "&&", "make", "install"}, `has "&&" in it`},
	} {
		err := checkExecCommand(c.command)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v; want it taken", c.command, err)
		case c.want != "" && (err == nil || ExitCode(err) != 2 || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v; want a usage error with %q", c.command, err, c.want)
		}
	}
}

// TestClient_TokenLineEnd: a token read with its line end (an
// EnvironmentFile, a here-string) is sent without it; it failed before the
// request was sent, with net/http's "invalid header field value".
func TestClient_TokenLineEnd(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s, Tokens: []string{"tok"}}))
	t.Cleanup(srv.Close)
	var out, errOut strings.Builder
	env := Env{Getenv: func(k string) string { return map[string]string{"SKED_TOKEN": "tok\n"}[k] }, Stdout: &out, Stderr: &errOut}
	if code := Main(context.Background(), []string{"ls", "--server", srv.URL}, env); code != 0 {
		t.Errorf("sked ls with SKED_TOKEN=\"tok\\n\": exit %d, %s", code, errOut.String())
	}
}

// TestAPIError_HostNotFound: a --server whose host name does not resolve
// is said so, with what to check, not as Go's dial error; it could not
// reach the server (exit 3). A DNS server that does not answer in time is
// not told as sked not answering.
func TestAPIError_HostNotFound(t *testing.T) {
	a := &api{server: "http://sked.example.invalid:8080"}
	for _, dnsErr := range []*net.DNSError{
		{Err: "no such host", Name: "sked.example.invalid", IsNotFound: true},
		{Err: "i/o timeout", Name: "sked.example.invalid", IsTimeout: true},
	} {
		// The shape net/http's client returns for a lookup that failed.
		err := a.apiError(&url.Error{Op: "Get", URL: a.server + "/jobs", Err: &net.OpError{Op: "dial", Net: "tcp", Err: dnsErr}})
		want := "cannot find the host sked.example.invalid of http://sked.example.invalid:8080: " + dnsErr.Err +
			"; check the host name in --server (SKED_SERVER), and this machine's DNS"
		if err == nil || err.Error() != want || ExitCode(err) != ExitUnreachable {
			t.Errorf("apiError of a lookup that failed (%s): %v (exit %d); want %q (exit %d)", dnsErr.Err, err, ExitCode(err), want, ExitUnreachable)
		}
	}
}

// TestLs_Empty: sked ls that lists no job says why, not a bare header
// that reads as a listing that failed: no jobs yet, or none that match
// the filters given.
func TestLs_Empty(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	if code, stdout, stderr := mainOf("ls", "--server", srv.URL); code != 0 || stdout != "no jobs yet: sked add creates one (sked add --help)\n" {
		t.Errorf("sked ls of no jobs: exit %d, %q, %q", code, stdout, stderr)
	}
	if _, _, err := s.JobCreate(context.Background(), db.JobCreateParams{Type: "t", Name: "nightly"}); err != nil {
		t.Fatal(err)
	}
	for _, filter := range [][]string{{"--state", "dead"}, {"--type", "other"}, {"--name", "weekly"}, {"--health", "quiet"}} {
		code, stdout, stderr := mainOf(append([]string{"ls", "--server", srv.URL}, filter...)...)
		if code != 0 || !strings.HasPrefix(stdout, "no jobs match: sked ls without --state, --type, --name") {
			t.Errorf("sked ls %q matching none: exit %d, %q, %q", filter, code, stdout, stderr)
		}
	}
	if code, stdout, _ := mainOf("ls", "--server", srv.URL); code != 0 || !strings.Contains(stdout, "nightly") || !strings.HasPrefix(stdout, "NAME") {
		t.Errorf("sked ls of one job: exit %d, %q; want the table", code, stdout)
	}
}

// TestEdit_EmptyValue: sked edit refuses a flag given empty (a script's
// unset variable), as sked add does, rather than removing the job's name
// or resetting its zone; --unset is the way to do that.
func TestEdit_EmptyValue(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t", Name: "nightly", Schedule: "0 3 * * *", Timezone: "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ flag, field string }{{"--name", "name"}, {"--tz", "timezone"}, {"--schedule", "schedule"}, {"--overlap", "overlap"}} {
		code, _, stderr := mainOf("edit", "nightly", c.flag, "", "--server", srv.URL)
		if want := c.flag + " is empty: give a value, or --unset " + c.field; code != ExitUsage || !strings.Contains(stderr, want) {
			t.Errorf("sked edit %s '': exit %d, %q; want exit 2 and %q", c.flag, code, stderr, want)
		}
	}
	if got, err := s.JobGet(ctx, j.ID); err != nil || got.Name != "nightly" || got.Timezone != "Europe/Berlin" {
		t.Errorf("job after the refused edits: %+v, %v; want it unchanged", got, err)
	}
	if code, _, stderr := mainOf("edit", "nightly", "--unset", "name", "--server", srv.URL); code != 0 {
		t.Errorf("sked edit --unset name: exit %d, %q", code, stderr)
	}
}

// TestAdd_CreatedLine: sked add says the job it created in one pair of
// parentheses, its id among them when it has a name.
func TestAdd_CreatedLine(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		args []string
		want *regexp.Regexp
	}{
		{nil, regexp.MustCompile(`^created job [0-9A-Z]{26} \(t, ready, next run [^()]+\)\n$`)},
		{[]string{"--name", "nightly"}, regexp.MustCompile(`^created job nightly \([0-9A-Z]{26}, t, ready, next run [^()]+\)\n$`)},
		// A schedule's next run as its zone's clock reads it too, as sked
		// show says it.
		{[]string{"--name", "berlin", "--schedule", "30 2 * * *", "--tz", "Europe/Berlin"},
			regexp.MustCompile(`^created job berlin \([0-9A-Z]{26}, t, ready, next run \S+Z \((\w{3} \d+ \w{3} )?02:30 in Europe/Berlin\)\)\n$`)},
	} {
		code, out, stderr := mainOf(append([]string{"add", "--type", "t", "--server", srv.URL}, c.args...)...)
		if code != 0 || !c.want.MatchString(out) {
			t.Errorf("sked add %v: exit %d, %q (%s); want %s", c.args, code, out, stderr, c.want)
		}
	}
}

// TestAdd_PastAt: sked add --at a time that has passed by the server's
// clock makes the job (it is due at once) and warns, naming both times
// and how to cancel it (by its name when it has one); a time to come does
// not.
func TestAdd_PastAt(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	past, later := time.Now().Add(-48*time.Hour).UTC().Format(time.RFC3339), time.Now().Add(48*time.Hour).UTC().Format(time.RFC3339)
	code, _, stderr := mainOf("add", "--type", "t", "--at", past, "--server", srv.URL)
	if code != 0 || !strings.Contains(stderr, "warning: --at "+past+" has passed (the server's time is ") || !strings.Contains(stderr, "the job is due at once") {
		t.Errorf("sked add --at %s (past): exit %d, %q; want the job made and a warning", past, code, stderr)
	}
	// A named job is cancelled by its name, as it was made.
	if code, _, stderr := mainOf("add", "--type", "t", "--name", "report", "--at", past, "--server", srv.URL); code != 0 || !strings.Contains(stderr, "sked cancel report if that is not what you meant") {
		t.Errorf("sked add --name report --at %s (past): exit %d, %q; want the warning to say sked cancel report", past, code, stderr)
	}
	if code, _, stderr := mainOf("add", "--type", "t", "--at", later, "--server", srv.URL); code != 0 || strings.Contains(stderr, "has passed") {
		t.Errorf("sked add --at %s (to come): exit %d, %q; want no warning", later, code, stderr)
	}
}

// TestEdit_Zero: sked edit --timeout 0 (--backoff, --max-attempts) is
// refused before anything is sent, saying to --unset the field for its
// default, which the server's own refusal names in the API's words.
func TestEdit_Zero(t *testing.T) {
	for _, c := range []struct{ flag, value, field string }{{"--timeout", "0s", "timeout"}, {"--backoff", "0", "backoff"}, {"--max-attempts", "0", "maxAttempts"}} {
		code, _, stderr := mainOf("edit", "nightly", c.flag, c.value, "--server", "http://127.0.0.1:1")
		if code != ExitUsage || !strings.Contains(stderr, "give a value above zero, or --unset "+c.field+" for the default") {
			t.Errorf("sked edit %s %s: exit %d, %q; want a usage error naming --unset %s", c.flag, c.value, code, stderr, c.field)
		}
	}
}

// TestClient_NameBeginsWithDash: a name that begins with '-', which a
// command line reads as a flag, is refused by the server as sked add sends
// it (exit 4, saying why); a job named so before is still shown and
// cancelled by its name, given after --.
func TestClient_NameBeginsWithDash(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	for _, args := range [][]string{{"add", "--type", "noop", "--name", "-nightly"}, {"add", "--type", "noop", "--name=-x"}} {
		code, _, stderr := mainOf(append(args, "--server", srv.URL)...)
		if code != ExitRefused || !strings.Contains(stderr, "begins with '-': names may not begin with '-', which a command line reads as a flag") {
			t.Errorf("sked %q: exit %d, %q; want exit %d saying names may not begin with '-'", args, code, stderr, ExitRefused)
		}
	}
	if jobs, _, err := s.JobList(context.Background(), db.JobListParams{}); err != nil || len(jobs) != 0 {
		t.Fatalf("refused names created %d jobs, %v", len(jobs), err)
	}
	old, _, err := s.JobCreate(context.Background(), db.JobCreateParams{Name: "-legacy", Type: "noop", RunAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := mainOf("show", "--server", srv.URL, "--", "-legacy"); code != 0 || !strings.Contains(stdout, old.ID) {
		t.Errorf("sked show -- -legacy: exit %d, %q %q; want the job", code, stdout, stderr)
	}
	if code, _, stderr := mainOf("cancel", "--server", srv.URL, "--", "-legacy"); code != 0 {
		t.Errorf("sked cancel -- -legacy: exit %d, %q", code, stderr)
	}
	if got, err := s.JobGet(context.Background(), old.ID); err != nil || got.State != db.StateCancelled {
		t.Errorf("sked cancel -- -legacy left the job %s, %v; want it cancelled", got.State, err)
	}
	renamed, _, err := s.JobCreate(context.Background(), db.JobCreateParams{Name: "-old", Type: "noop", Schedule: "@hourly"})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := mainOf("edit", "--name", "old", "--server", srv.URL, "--", "-old"); code != 0 {
		t.Errorf("sked edit --name old -- -old: exit %d, %q", code, stderr)
	}
	if got, err := s.JobGet(context.Background(), renamed.ID); err != nil || got.Name != "old" {
		t.Errorf("sked edit --name old -- -old left the job named %q, %v", got.Name, err)
	}
}
