package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/cli"
	"github.com/sked-dev/sked/internal/skedbin"
	"github.com/sked-dev/sked/internal/syncbuf"
)

// skedBin is the sked binary the process tests run, built once by TestMain.
var skedBin string

func TestMain(m *testing.M) { skedbin.Main(m, &skedBin) }

// run runs the command line args in this process, as main does.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return cli.Run(ctx, args, cli.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// client talks to a sked under test.
type client struct {
	t    *testing.T
	base string
}

func (c client) do(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, r)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (c client) create(body any) db.Job {
	c.t.Helper()
	code, b := c.do("POST", "/jobs", body)
	if code != http.StatusCreated {
		c.t.Fatalf("POST /jobs: %d %s", code, b)
	}
	var j db.Job
	json.Unmarshal(b, &j)
	return j
}

func (c client) job(id string) db.Job {
	c.t.Helper()
	code, b := c.do("GET", "/jobs/"+id, nil)
	if code != http.StatusOK {
		c.t.Fatalf("GET /jobs/%s: %d %s", id, code, b)
	}
	var j db.Job
	json.Unmarshal(b, &j)
	return j
}

func (c client) runs(id string) []db.Run {
	c.t.Helper()
	_, b := c.do("GET", "/jobs/"+id+"/runs", nil)
	var r []db.Run
	if err := json.Unmarshal(b, &r); err != nil {
		c.t.Fatalf("runs of %s: %v: %s", id, err, b)
	}
	return r
}

// waitFor polls cond every 20 ms for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c client) waitState(id string, state db.JobState) db.Job {
	c.t.Helper()
	var j db.Job
	waitFor(c.t, fmt.Sprintf("job %s to be %s", id, state), func() bool { j = c.job(id); return j.State == state })
	return j
}

// TestRun_Serve runs the appliance in-process through run(): an http job
// fires on time against a local server, a recurring job fires each slot,
// and cancelling the context shuts it down cleanly.
func TestRun_Serve(t *testing.T) {
	var (
		mu   sync.Mutex
		hits []http.Header
	)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, r.Header.Clone())
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	defer target.Close()

	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logs bytes.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "--db", filepath.Join(t.TempDir(), "sked.db"), "--addr", addr,
			"--allow-private-targets", "--log-format", "json"}, func(string) string { return "" }, io.Discard, &syncWriter{w: &logs})
	}()
	c := client{t, "http://" + addr}
	waitFor(t, "the server to listen", func() bool { _, err := net.Dial("tcp", addr); return err == nil })

	j := c.create(map[string]any{"type": "http", "payload": map[string]any{"url": target.URL}})
	done1 := c.waitState(j.ID, db.StateDone)
	if r := c.runs(j.ID); len(r) != 1 || r[0].Outcome != db.OutcomeSucceeded || r[0].Output != "ok" {
		t.Fatalf("runs = %+v", r)
	}
	mu.Lock()
	if len(hits) != 1 || hits[0].Get("Sked-Job-Id") != j.ID || hits[0].Get("Sked-Generation") != "1" {
		t.Fatalf("target saw %v", hits)
	}
	mu.Unlock()
	if done1.LeaseOwner != "" {
		t.Fatalf("a done job keeps its lease owner")
	}

	rec := c.create(map[string]any{"type": "http", "schedule": "@every 1s", "payload": map[string]any{"url": target.URL}})
	waitFor(t, "two slots of the recurring job", func() bool { return len(c.runs(rec.ID)) >= 2 })
	runs := c.runs(rec.ID)
	if !runs[0].Slot.Equal(runs[1].Slot.Add(time.Second)) {
		t.Fatalf("slots %v and %v are not one second apart", runs[1].Slot, runs[0].Slot)
	}

	code, _ := c.do("DELETE", "/jobs/"+rec.ID, nil)
	if code != http.StatusNoContent && code != http.StatusConflict {
		t.Fatalf("DELETE recurring job: %d", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
	if !strings.Contains(logs.String(), `"msg":"run finished"`) {
		t.Fatalf("no run outcome logged:\n%s", logs.String())
	}
}

// TestRun_ServeLogsDashboardURL: sked serve logs the dashboard's URL at
// start, with the address it listens on (the port it got for :0, not the
// flag's), localhost for a wildcard host (which a browser cannot open),
// and the page is there.
func TestRun_ServeLogsDashboardURL(t *testing.T) {
	for _, c := range []struct{ addr, host string }{
		{"127.0.0.1:0", `127\.0\.0\.1`},
		{":0", "localhost"},
		{"0.0.0.0:0", "localhost"},
	} {
		t.Run(c.addr, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			var logs syncbuf.Buffer
			go func() {
				// Beyond loopback, a token: no other address is served without one.
				done <- run(ctx, []string{"serve", "--db", filepath.Join(t.TempDir(), "sked.db"), "--addr", c.addr, "--token", "t0ken-for-the-test"},
					func(string) string { return "" }, io.Discard, &logs)
			}()
			dashboard := regexp.MustCompile(`level=INFO msg=dashboard url=(http://\S+:(\d+)/)\n`)
			var m []string
			waitFor(t, "the dashboard's URL in the log", func() bool {
				m = dashboard.FindStringSubmatch(logs.String())
				return m != nil
			})
			if !regexp.MustCompile(`^http://` + c.host + `:`).MatchString(m[1]) {
				t.Errorf("--addr %s logged %s; want the host %s", c.addr, m[1], c.host)
			}
			if m[2] == "0" {
				t.Fatalf("logged the flag's port, not the one listened on: %s", m[1])
			}
			resp, err := http.Get(m[1])
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "<html") {
				t.Fatalf("GET %s: %d %.200s", m[1], resp.StatusCode, page)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("run returned %v", err)
			}
		})
	}
}

// syncWriter serialises writes from the server's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestRun_BadFlags: a command line that cannot be run exits 2 with a
// message naming what is wrong; help exits 0.
func TestRun_BadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--workers", "0"}, "--workers 0: must be at least 1"},
		{[]string{"serve", "--workers", "abc"}, `--workers "abc": give a whole number`},
		{[]string{"serve", "--lease", "soon"}, `--lease "soon": give a duration`},
		// A zero that would silently mean the default is refused.
		{[]string{"serve", "--default-max-attempts", "0"}, "--default-max-attempts 0: must be at least 1"},
		{[]string{"serve", "--default-max-attempts", "-2", "--job-defaults", "http=3/5s"}, "--default-max-attempts -2: must be at least 1"},
		{[]string{"serve", "--default-backoff", "0"}, "--default-backoff 0s: must be above zero, such as 30s"},
		{[]string{"serve", "--default-backoff", "500us"}, "--default-backoff 500µs: backoff must be 1ms or more"},
		{[]string{"serve", "--default-max-attempts", "1001"}, "--default-max-attempts 1001: attempts must be from 1 to 1000"},
		{[]string{"serve", "--max-body", "0"}, "--max-body 0: must be at least 1 (bytes); the default is 1048576"},
		{[]string{"serve", "--grace", "0"}, "--grace 0s: must be above zero, such as 1ms to stop running jobs at once; the default is 30s"},
		{[]string{"work", "--grace", "0", "--", "true"}, "--grace 0s: must be above zero"},
		{[]string{"serve", "--enable-exec", "maybe"}, `unexpected argument "maybe"`},
		{[]string{"serve", "--log-format", "xml"}, `--log-format "xml"`},
		{[]string{"serve", "--log-level", "loud"}, `--log-level "loud"`},
		{[]string{"serve", "--nope"}, "--nope"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate": there is no help on it`},
		{[]string{}, "no command given"},
		// A libpq key=value string would be a SQLite file's name.
		{[]string{"migrate", "--db", "host=db.internal dbname=sked"}, "give a URL such as postgres://"},
		{[]string{"serve", "--db", "user=sked password=s3cret host=127.0.0.1"}, "give a URL such as postgres://"},
		// sked check reads SQLite only; a PostgreSQL URL is told so, not stat-ed as a file.
		{[]string{"check", "--db", "postgres://sked:s3cret@127.0.0.1:1/sked"}, "sked check reads a SQLite file"},
		// sked backup too, and it gives the command that backs PostgreSQL up.
		{[]string{"backup", "--db", "postgres://sked:s3cret@127.0.0.1:1/sked", "copy.db"}, "pg_dump --format=custom --file=sked.pgdump URL"},
	} {
		err := run(context.Background(), tc.args, func(string) string { return "" }, io.Discard, io.Discard)
		if cli.ExitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("run(%q) = %v (exit %d), want exit 2 and %q", tc.args, err, cli.ExitCode(err), tc.want)
		}
	}
	err := run(context.Background(), []string{"serve"}, func(k string) string { return map[string]string{"SKED_WORKERS": "many"}[k] }, io.Discard, io.Discard)
	if cli.ExitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), `SKED_WORKERS="many" (for --workers)`) {
		t.Errorf("SKED_WORKERS=many: %v, want exit 2 naming the variable", err)
	}
	err = run(context.Background(), []string{"serve"}, func(k string) string { return map[string]string{"SKED_DEFAULT_MAX_ATTEMPTS": "0"}[k] }, io.Discard, io.Discard)
	if cli.ExitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), "--default-max-attempts 0 (from SKED_DEFAULT_MAX_ATTEMPTS): must be at least 1") {
		t.Errorf("SKED_DEFAULT_MAX_ATTEMPTS=0: %v, want exit 2 naming the flag and the variable", err)
	}
	for _, args := range [][]string{{"serve", "-h"}, {"--help"}, {"add", "--help"}, {"help", "work"}, {"help", "completion", "bash"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, func(string) string { return "" }, &out, io.Discard); err != nil || !strings.Contains(out.String(), "Usage:") {
			t.Errorf("run(%q) = %v, printed %q; want help and exit 0", args, err, out.String())
		}
	}
}

// proc is a sked serve process under test.
type proc struct {
	cmd  *exec.Cmd
	logs *bytes.Buffer
}

func startServe(t *testing.T, dbPath, addr string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve", "--db", dbPath, "--addr", addr}, extra...)
	cmd := exec.Command(skedBin, args...)
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &syncWriter{w: logs}, &syncWriter{w: logs}
	cmd.Env = append(os.Environ(), "SKED_DB=") // flags win; nothing inherited
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd, logs}
	t.Cleanup(func() { p.kill(dbPath) })
	waitFor(t, "sked to listen on "+addr, func() bool {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	return p
}

// kill kills a sked serve on the SQLite file dbPath with SIGKILL and waits,
// up to 10 s, until the commands it started are gone too: their
// supervisors hold its lock on the file until then. A test's temporary
// directory is then no longer written to when it is removed.
func (p *proc) kill(dbPath string) {
	p.cmd.Process.Kill()
	p.cmd.Wait()
	f, err := os.Open(dbPath + ".lock")
	if err != nil {
		return
	}
	defer f.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			return
		}
	}
}

// evidence reads the lines the test jobs appended to path.
func evidence(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// TestServe_Kill9MidRun kills the server with SIGKILL while an exec job
// runs, starts it again on the same file, and checks that the job runs
// again and then succeeds: late, not lost. The lease is the default 30 s
// and the test waits at most 20 s: the new server hands back at once the
// jobs its dead predecessor held, rather than waiting for their leases.
func TestServe_Kill9MidRun(t *testing.T) {
	dir := t.TempDir()
	dbPath, addr, ev := filepath.Join(dir, "sked.db"), freeAddr(t), filepath.Join(dir, "evidence")
	p := startServe(t, dbPath, addr, "--enable-exec")
	c := client{t, "http://" + addr}
	j := c.create(map[string]any{"type": "exec", "payload": map[string]any{"command": []string{"sh", "-c",
		`echo "start:$SKED_GENERATION" >> ` + ev + `; sleep 1; echo "end:$SKED_GENERATION" >> ` + ev}}})
	waitFor(t, "the job to start", func() bool { return len(evidence(t, ev)) == 1 })
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()

	startServe(t, dbPath, addr, "--enable-exec")
	done := c.waitState(j.ID, db.StateDone)
	got := strings.Join(evidence(t, ev), " ")
	// The killed run's child may outlive sked and finish too; the rerun
	// holds the next generation either way.
	if !strings.HasPrefix(got, "start:1") || !strings.Contains(got, "start:2") || !strings.HasSuffix(got, "end:2") {
		t.Fatalf("evidence = %q, want generation 1 started and generation 2 run to the end", got)
	}
	runs := c.runs(j.ID)
	if len(runs) != 2 || runs[1].Outcome != db.OutcomeLeaseExpired || runs[0].Outcome != db.OutcomeSucceeded {
		t.Fatalf("runs = %+v, want lease_expired then succeeded", runs)
	}
	if done.Attempt != 2 {
		t.Fatalf("attempt = %d, want 2", done.Attempt)
	}
}

// TestServe_SIGTERMDrains sends SIGTERM while a job runs: sked stops
// claiming, lets the job finish inside the grace period and exits 0. So
// does SIGHUP (a closed terminal), which killed it at once.
func TestServe_SIGTERMDrains(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) { testServeDrains(t, sig) })
	}
}

func testServeDrains(t *testing.T, sig syscall.Signal) {
	dir := t.TempDir()
	dbPath, addr, ev := filepath.Join(dir, "sked.db"), freeAddr(t), filepath.Join(dir, "evidence")
	p := startServe(t, dbPath, addr, "--enable-exec", "--grace", "20s")
	c := client{t, "http://" + addr}
	j := c.create(map[string]any{"type": "exec", "payload": map[string]any{"command": []string{"sh", "-c",
		`echo start >> ` + ev + `; sleep 1; echo end >> ` + ev}}})
	later := c.create(map[string]any{"type": "exec", "runAt": time.Now().Add(time.Hour).Format(time.RFC3339),
		"payload": map[string]any{"command": []string{"true"}}})
	waitFor(t, "the job to start", func() bool { return len(evidence(t, ev)) == 1 })
	p.cmd.Process.Signal(sig)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("sked exited with %v after %v:\n%s", err, sig, p.logs)
	}
	if got := strings.Join(evidence(t, ev), " "); got != "start end" {
		t.Fatalf("evidence = %q: the running job was not let finish", got)
	}
	startServe(t, dbPath, addr, "--enable-exec")
	if got := c.job(j.ID); got.State != db.StateDone {
		t.Fatalf("drained job is %s, want done", got.State)
	}
	if got := c.job(later.ID); got.State != db.StateReady {
		t.Fatalf("future job is %s, want ready", got.State)
	}
}
