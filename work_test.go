package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/cli"
	"github.com/sked-dev/sked/wire"
)

// evidenceScript is the command the workers under test run. It appends
// "start <job> <gen> <unixnano> <worker pid>" when it starts and
// "end <job> <gen> <unixnano> <worker pid> ok|term" when it ends (term: it
// was stopped by SIGTERM), sleeping in between for the payload's "sleep"
// seconds. The worker is its parent's parent: its parent is the supervisor.
func evidenceScript(path string) []string {
	// The command sleeps the payload's "sleep" in tenths of a second and
	// writes a mark after each: when it is killed (SIGKILL, no end line),
	// the last mark says it still ran then, which the account of its end
	// must not contradict (see checkEvidence).
	// now retries date: on a machine short of processes a command
	// substitution can come back empty, and a line without its time is
	// not evidence. A stop's SIGTERM goes to the whole process group, so
	// it can kill the subshell of $(now) too: then the line is not
	// written and the trap writes the end (of a start that was written).
	return []string{"sh", "-c", `
w=$(cut -d' ' -f4 /proc/$PPID/stat)
now() { t=; while [ -z "$t" ]; do t=$(date +%s%N); done; echo "$t"; }
trap '[ -z "$started" ] || echo "end $SKED_JOB_ID $SKED_GENERATION $(now) $w term" >> ` + path + `; exit 143' TERM
d=$(sed -n 's/.*"sleep":"\([0-9.]*\)".*/\1/p')
t=$(now) && echo "start $SKED_JOB_ID $SKED_GENERATION $t $w" >> ` + path + ` && started=1
case "$d" in *.*) i=$(echo "$d" | sed 's/\.\(.\).*/\1/; s/^0*//') ;; *) i=$((${d:-0} * 10)) ;; esac
while [ "${i:-0}" -gt 0 ]; do
	sleep 0.1 & wait $!
	t=$(now) && echo "mark $SKED_JOB_ID $SKED_GENERATION $t $w" >> ` + path + `
	i=$((i - 1))
done
t=$(now) && echo "end $SKED_JOB_ID $SKED_GENERATION $t $w ok" >> ` + path + ` || kill -TERM $$`}
}

// workProc is a `sked work` process under test.
type workProc struct {
	*proc
	out *syncWriter // its logs, safe to read while it runs
}

// log returns what the worker has logged so far.
func (w *workProc) log() string {
	w.out.mu.Lock()
	defer w.out.mu.Unlock()
	return w.logs.String()
}

// startWork starts `sked work` against addr for type typ running the
// evidence script; extra flags go before "--".
func startWork(t *testing.T, addr, typ, ev string, extra ...string) *workProc {
	t.Helper()
	args := append([]string{"work", "--server", "http://" + addr, "--type", typ}, extra...)
	cmd := exec.Command(skedBin, append(append(args, "--"), evidenceScript(ev)...)...)
	logs := &bytes.Buffer{}
	out := &syncWriter{w: logs}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &workProc{&proc{cmd, logs}, out}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	return p
}

// kill9 kills p with SIGKILL and returns when it is gone, with the time by
// which every execution it ran was over (its commands die with it).
func kill9(p *workProc) time.Time {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	return time.Now()
}

// stopGracefully sends SIGTERM and wants a clean exit.
func stopGracefully(t *testing.T, p *proc) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("sked exited with %v after SIGTERM:\n%s", err, p.logs)
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("sked did not exit after SIGTERM:\n%s", p.logs)
	}
}

// execution is one run of the evidence script.
type execution struct {
	job        string
	gen        int64
	pid        int       // the worker process that ran it
	start, end time.Time // end: its end line, else when it was killed (see checkEvidence)
	mark       time.Time // its last mark, when it wrote one
	ended      string    // "ok", "term", or "" when the script never wrote its end
}

// readExecutions parses the evidence file into executions, in start order.
func readExecutions(t testing.TB, path string) []*execution {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	byKey := map[string]*execution{}
	var all []*execution
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		gen, _ := strconv.ParseInt(f[2], 10, 64)
		nanos, _ := strconv.ParseInt(f[3], 10, 64)
		pid, _ := strconv.Atoi(f[4])
		key := f[1] + "/" + f[2]
		switch f[0] {
		case "start":
			if byKey[key] != nil {
				t.Errorf("evidence: generation %d of job %s started twice", gen, f[1])
			}
			e := &execution{job: f[1], gen: gen, pid: pid, start: time.Unix(0, nanos)}
			byKey[key] = e
			all = append(all, e)
		case "end":
			e := byKey[key]
			if e == nil || len(f) < 6 {
				t.Errorf("evidence: %q without its start", line)
				continue
			}
			e.end, e.ended = time.Unix(0, nanos), f[5]
		case "mark":
			if e := byKey[key]; e != nil {
				e.mark = time.Unix(0, nanos)
			}
		}
	}
	slices.SortFunc(all, func(a, b *execution) int { return a.start.Compare(b.start) })
	return all
}

// workerEnds reads, from the logs of workers started with --log-format
// json, when each of their runs ended ("ended" of its outcome line: its
// command was over by then, whoever stopped it), keyed "job/generation".
func workerEnds(workers []*workProc) map[string]time.Time {
	ends := map[string]time.Time{}
	for _, w := range workers {
		for line := range strings.Lines(w.log()) {
			var l struct {
				JobID      string    `json:"job_id"`
				Generation int64     `json:"generation"`
				Ended      time.Time `json:"ended"`
			}
			if json.Unmarshal([]byte(line), &l) != nil || l.JobID == "" || l.Ended.IsZero() {
				continue
			}
			ends[l.JobID+"/"+strconv.FormatInt(l.Generation, 10)] = l.Ended
		}
	}
	return ends
}

// checkEvidence fails the test when the evidence shows a job of jobs that
// never ran to success (lost), or two executions of one job overlapping in
// time. An execution without an end line was killed: it lasted until its
// worker logged that the run ended (ends, from workerEnds), which its last
// mark must not follow; or, its worker killed first, until deaths[pid],
// when the worker and its command died. One with neither an end, nor a
// logged end, nor a dead worker is a fault. It returns the executions.
func checkEvidence(t testing.TB, path string, jobs []string, ends map[string]time.Time, deaths map[int]time.Time) []*execution {
	t.Helper()
	all := readExecutions(t, path)
	byJob := map[string][]*execution{}
	for _, e := range all {
		if e.ended == "" {
			end, logged := ends[e.job+"/"+strconv.FormatInt(e.gen, 10)]
			death, died := deaths[e.pid]
			switch {
			case logged:
				e.end = end
				if e.mark.After(end) {
					t.Errorf("job %s generation %d (worker %d) still ran at %s, after its worker logged it ended at %s",
						e.job, e.gen, e.pid, e.mark.Format(time.StampMicro), end.Format(time.StampMicro))
				}
			case died:
				e.end = death
			default:
				t.Errorf("job %s generation %d started on live worker %d and never ended", e.job, e.gen, e.pid)
				continue
			}
		}
		byJob[e.job] = append(byJob[e.job], e)
	}
	for _, id := range jobs {
		execs := byJob[id]
		if !slices.ContainsFunc(execs, func(e *execution) bool { return e.ended == "ok" }) {
			t.Errorf("job %s never ran to success: executions %v", id, execs)
		}
		for i := 1; i < len(execs); i++ {
			for _, prev := range execs[:i] {
				if execs[i].start.Before(prev.end) {
					t.Errorf("job %s: generation %d (worker %d, %s..%s) overlaps generation %d (worker %d, %s..%s)",
						id, execs[i].gen, execs[i].pid, execs[i].start.Format(time.StampMicro), execs[i].end.Format(time.StampMicro),
						prev.gen, prev.pid, prev.start.Format(time.StampMicro), prev.end.Format(time.StampMicro))
				}
			}
		}
	}
	return all
}

func (e *execution) String() string {
	return fmt.Sprintf("gen %d on %d %s", e.gen, e.pid, cmp.Or(e.ended, "killed"))
}

// waitLong is waitFor with its own deadline.
func waitLong(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// createEvidenceJobs creates n jobs of typ whose scripts sleep from lo to
// hi seconds, with attempts to spare for the kills to come.
func createEvidenceJobs(c client, typ string, n int, lo, hi float64) []string {
	ids := make([]string, n)
	for i := range ids {
		sleep := strconv.FormatFloat(lo+rand.Float64()*(hi-lo), 'f', 2, 64)
		ids[i] = c.create(map[string]any{"type": typ, "payload": map[string]any{"sleep": sleep},
			"maxAttempts": 1000, "backoff": "100ms"}).ID
	}
	return ids
}

// allDone reports whether every job of ids is done, asking the server.
func allDone(c client, ids []string) bool {
	for _, id := range ids {
		if c.job(id).State != db.StateDone {
			return false
		}
	}
	return true
}

// TestWork_RunsJobAndCancel runs a job on `sked work` (payload on stdin,
// SKED_* environment, output in the run) and stops a second one with
// cancel-run: SIGTERM reaches the command and the run ends cancelled.
func TestWork_RunsJobAndCancel(t *testing.T) {
	dir := t.TempDir()
	addr, ev := freeAddr(t), filepath.Join(dir, "evidence")
	startServe(t, filepath.Join(dir, "sked.db"), addr)
	c := client{t, "http://" + addr}
	w := startWork(t, addr, "evid", ev, "--lease", "1s")

	quick := createEvidenceJobs(c, "evid", 1, 0, 0)[0]
	c.waitState(quick, db.StateDone)
	runs := c.runs(quick)
	if len(runs) != 1 || runs[0].Outcome != db.OutcomeSucceeded || runs[0].Generation != 1 || !strings.Contains(runs[0].WorkerID, "/") {
		t.Fatalf("runs = %+v", runs)
	}

	slow := c.create(map[string]any{"type": "evid", "payload": map[string]any{"sleep": "60"}}).ID
	waitFor(t, "the slow job to start", func() bool { return len(readExecutions(t, ev)) == 2 })
	if code, b := c.do("POST", "/jobs/"+slow+"/cancel-run", nil); code != http.StatusOK {
		t.Fatalf("cancel-run: %d %s", code, b)
	}
	c.waitState(slow, db.StateCancelled)
	if r := c.runs(slow); len(r) != 1 || r[0].Outcome != db.OutcomeCancelled {
		t.Fatalf("runs of the cancelled job = %+v", r)
	}
	execs := checkEvidence(t, ev, []string{quick}, nil, nil)
	if len(execs) != 2 || execs[1].ended != "term" {
		t.Fatalf("executions = %v, want the slow one ended by SIGTERM", execs)
	}
	stopGracefully(t, w.proc)
}

// TestWork_ServeDrainsOnSIGTERM: a node stopped with SIGTERM keeps serving,
// within --grace, the remote worker whose run it leased: the worker renews
// its lease through it (a 1 s lease, a 4 s run) and reports, and the run is
// recorded succeeded, not reaped. Meanwhile a new claim is refused, 503
// with Retry-After as problem+json; the node exits once the run is in.
func TestWork_ServeDrainsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	dbPath, addr, ev := filepath.Join(dir, "sked.db"), freeAddr(t), filepath.Join(dir, "evidence")
	node := startServe(t, dbPath, addr, "--grace", "30s")
	c := client{t, "http://" + addr}
	startWork(t, addr, "evid", ev, "--lease", "1s")
	id := createEvidenceJobs(c, "evid", 1, 4, 4)[0]
	waitFor(t, "the job to start on the worker", func() bool { return len(readExecutions(t, ev)) == 1 })

	node.cmd.Process.Signal(syscall.SIGTERM)
	var refused *http.Response
	waitFor(t, "a claim to be refused", func() bool {
		resp, err := http.Post(c.base+"/claims", "application/json",
			strings.NewReader(`{"workerId": "test", "types": ["other"], "wait": "0s"}`))
		if err != nil {
			t.Fatalf("claim while the node shuts down: %v (it stopped answering with a run of its remote worker held)", err)
		}
		resp.Body.Close()
		refused = resp
		return resp.StatusCode != http.StatusOK
	})
	if refused.StatusCode != http.StatusServiceUnavailable || refused.Header.Get("Retry-After") == "" ||
		refused.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a claim while the node shuts down answered %d, Retry-After %q, %s; want 503 with Retry-After, problem+json",
			refused.StatusCode, refused.Header.Get("Retry-After"), refused.Header.Get("Content-Type"))
	}
	stopGracefully(t, node)

	startServe(t, dbPath, addr)
	if runs := c.runs(id); len(runs) != 1 || runs[0].Outcome != db.OutcomeSucceeded {
		t.Fatalf("runs = %+v, want one, succeeded", runs)
	}
	if execs := checkEvidence(t, ev, []string{id}, nil, nil); len(execs) != 1 {
		t.Fatalf("executions = %v, want one", execs)
	}
}

// TestWork_ClaimsFullBacksOff: of two workers on a server that lets one
// claim wait (--max-claim-waits 1), one waits and the other's claims are
// refused, 503 with Retry-After: it says so and waits at least the
// Retry-After, 5 s, before each next claim instead of claiming again at
// once; the waiting one runs the job that comes.
func TestWork_ClaimsFullBacksOff(t *testing.T) {
	dir := t.TempDir()
	addr, ev := freeAddr(t), filepath.Join(dir, "evidence")
	startServe(t, filepath.Join(dir, "sked.db"), addr, "--max-claim-waits", "1")
	c := client{t, "http://" + addr}
	workers := []*workProc{startWork(t, addr, "evid", ev), startWork(t, addr, "evid", ev)}
	refusals := func(w *workProc) []string {
		var lines []string
		for line := range strings.Lines(w.log()) {
			if strings.Contains(line, "claim failed; retrying") {
				lines = append(lines, line)
			}
		}
		return lines
	}
	waitLong(t, "a worker's claim refused", 30*time.Second, func() bool {
		return len(refusals(workers[0]))+len(refusals(workers[1])) > 0
	})
	for _, w := range workers {
		for _, line := range refusals(w) {
			_, after, _ := strings.Cut(line, "retry_in=")
			wait, err := time.ParseDuration(strings.Fields(after + " ")[0])
			if !strings.Contains(line, "503 Service Unavailable") || !strings.Contains(line, "--max-claim-waits") || err != nil || wait < 5*time.Second {
				t.Errorf("a refused claim was logged as %q; want a 503 naming --max-claim-waits and a retry in 5s or more", line)
			}
		}
	}
	id := createEvidenceJobs(c, "evid", 1, 0, 0)[0]
	c.waitState(id, db.StateDone)
	checkEvidence(t, ev, []string{id}, nil, nil)
	for _, w := range workers {
		stopGracefully(t, w.proc)
	}
}

// TestWork_RefusedStops: a worker whose token the server refuses, or whose
// claims it refuses as such (a type that is no job type), stops at once,
// exiting 1 with a message that says what to mend, instead of retrying
// forever, and without a warning that it could not say it stopped (it was
// never seen).
func TestWork_RefusedStops(t *testing.T) {
	for _, c := range []struct {
		name        string
		serve, work []string
		says        []string
	}{
		{"token", []string{"--token", "s3cret"}, []string{"--token", "wrong"}, []string{"401", "--token"}},
		{"type", nil, []string{"--type", "no type"}, []string{"422", "--type", `"no type"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			addr := freeAddr(t)
			startServe(t, filepath.Join(dir, "sked.db"), addr, c.serve...)
			w := startWork(t, addr, "evid", filepath.Join(dir, "evidence"), c.work...)
			done := make(chan error, 1)
			go func() { done <- w.cmd.Wait() }()
			select {
			case err := <-done:
				if w.cmd.ProcessState.ExitCode() != 1 {
					t.Fatalf("sked work %q exited with %v, want 1:\n%s", c.work, err, w.log())
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("sked work %q still runs after 20 s:\n%s", c.work, w.log())
			}
			log := w.log()
			for _, want := range append([]string{"refused this worker"}, c.says...) {
				if !strings.Contains(log, want) {
					t.Fatalf("sked work %q said, without %q:\n%s", c.work, want, log)
				}
			}
			if strings.Contains(log, "level=WARN") {
				t.Errorf("sked work %q warned:\n%s", c.work, log)
			}
		})
	}
}

// TestWork_HostNotFoundStops: a worker whose --server host does not
// resolve, before it ever reached a server (a mistyped name), stops once
// --server-wait is over, saying which host and what to check (exit 3, as a
// client command's), where it retried for ever; it warns while it waits.
func TestWork_HostNotFoundStops(t *testing.T) {
	const host = "sked.example.invalid" // RFC 6761: never resolves
	var dnsErr *net.DNSError
	if _, err := net.LookupHost(host); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Skipf("this machine's resolver does not answer that %s does not exist: %v", host, err)
	}
	w := startWork(t, host+":8080", "evid", filepath.Join(t.TempDir(), "evidence"), "--server-wait", "2s")
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	select {
	case err := <-done:
		if w.cmd.ProcessState.ExitCode() != cli.ExitUnreachable {
			t.Fatalf("sked work --server http://%s:8080 exited with %v, want %d:\n%s", host, err, cli.ExitUnreachable, w.log())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("sked work --server http://%s:8080 still runs after 20 s:\n%s", host, w.log())
	}
	notFound := "cannot find the host " + host + " of http://" + host + ":8080: no such host; check the host name in --server (SKED_SERVER), and this machine's DNS"
	log := w.log()
	if want := "sked: " + notFound + "\n"; !strings.HasSuffix(log, want) {
		t.Fatalf("sked work with a host that does not resolve said, without %q at its end:\n%s", want, log)
	}
	if want := `level=WARN msg="` + notFound + `" stops_in=`; !strings.Contains(log, want) {
		t.Fatalf("sked work with a host that does not resolve did not warn %q while it waited:\n%s", want, log)
	}
}

// TestWork_StoppedInItsFirstWait: a worker stopped with SIGTERM while its
// first claim waits on the server for a job (an empty queue) was recorded
// by that claim, and is listed stopped.
func TestWork_StoppedInItsFirstWait(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startServe(t, filepath.Join(dir, "sked.db"), addr)
	srv := "http://" + addr
	w := startWork(t, addr, "evid", filepath.Join(dir, "evidence"), "--worker-id", "box/1")
	listed := func() (wire.Worker, bool) {
		for _, wk := range okJSON[wire.WorkersResponse](t, srv, "workers").Workers {
			if wk.WorkerID == "box/1" {
				return wk, true
			}
		}
		return wire.Worker{}, false
	}
	waitFor(t, "the worker's claim to be recorded", func() bool { _, ok := listed(); return ok })
	stopGracefully(t, w.proc)
	if wk, _ := listed(); wk.StoppedAt == nil {
		t.Fatalf("a worker stopped in its first wait is listed %+v, not stopped:\n%s", wk, w.log())
	}
}

// TestWork_StopRacesClaim: a worker stopped with SIGTERM just as its
// waiting claim takes a job of one attempt. The claim's answer must not be
// lost on the way (the job would stay leased to a worker that never heard
// of it, and its lease run out as a spent attempt: dead, never run). Each
// job is either run by the worker or handed back unrun (released, no
// attempt spent), and a worker started afterwards runs every one.
func TestWork_StopRacesClaim(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startServe(t, filepath.Join(dir, "sked.db"), addr)
	srv := "http://" + addr
	c := client{t, srv}
	ev := filepath.Join(dir, "evidence")
	var ids []string
	for round := range 20 {
		id := "box/" + strconv.Itoa(round)
		w := startWork(t, addr, "stoprace", ev, "--worker-id", id, "--lease", "2s")
		waitFor(t, "the worker's claim to wait", func() bool {
			for _, wk := range okJSON[wire.WorkersResponse](t, srv, "workers").Workers {
				if wk.WorkerID == id {
					return true
				}
			}
			return false
		})
		ids = append(ids, c.create(map[string]any{"type": "stoprace", "maxAttempts": 1}).ID)
		time.Sleep(time.Duration(rand.IntN(6000)) * time.Microsecond)
		stopGracefully(t, w.proc)
		j := c.job(ids[round])
		if j.State != db.StateDone && (j.State != db.StateReady || j.Attempt != 0) {
			t.Fatalf("round %d: after the worker stopped its job is %s, attempt %d, leased to %q; want done, or ready and no attempt spent; runs %+v\n%s",
				round, j.State, j.Attempt, j.LeaseOwner, c.runs(j.ID), w.log())
		}
	}
	startWork(t, addr, "stoprace", ev)
	waitLong(t, "every job done", 60*time.Second, func() bool { return allDone(c, ids) })
	checkEvidence(t, ev, ids, nil, nil)
}

// TestWork_WorkerToken: a worker given a worker token (--worker-token) runs
// jobs, and that token can do nothing else; a read token (--read-token)
// lists jobs and can change none. Each refusal says which token it was.
func TestWork_WorkerToken(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startServe(t, filepath.Join(dir, "sked.db"), addr, "--token", "admin-token", "--worker-token", "worker-token", "--read-token", "read-token")
	srv := "http://" + addr
	as := func(token string, args ...string) cliRun {
		return skedCLIEnv(t, []string{"SKED_SERVER=" + srv, "SKED_TOKEN=" + token}, args...)
	}
	r := as("admin-token", "add", "--type", "evid", "--json", "--payload", `{"sleep": "0"}`)
	var j db.Job
	if err := json.Unmarshal([]byte(r.stdout), &j); r.code != 0 || err != nil {
		t.Fatalf("add with the full token: exit %d, %v:\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	w := startWork(t, addr, "evid", filepath.Join(dir, "evidence"), "--token", "worker-token")
	waitFor(t, "the job to run on the worker", func() bool {
		r := as("read-token", "show", j.ID, "--json")
		return r.code == 0 && strings.Contains(r.stdout, `"state": "done"`)
	})
	for _, c := range []struct {
		token  string
		args   []string
		detail string
	}{
		{"worker-token", []string{"add", "--type", "evid"}, "worker token"},
		{"worker-token", []string{"ls"}, "worker token"},
		{"read-token", []string{"add", "--type", "evid"}, "read-only token"},
		{"read-token", []string{"cancel", j.ID}, "read-only token"},
	} {
		r := as(c.token, c.args...)
		if r.code != cli.ExitRefused || !strings.Contains(r.stderr, "403") || !strings.Contains(r.stderr, c.detail) {
			t.Errorf("sked %q with the %s: exit %d, said %q; want 4 and a 403 naming the %s", c.args, c.token, r.code, r.stderr, c.detail)
		}
	}
	if r := as("read-token", "ls"); r.code != 0 || !strings.Contains(r.stdout, j.ID) {
		t.Errorf("ls with the read token: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The plan of sked apply (a CI step, say) needs no more than a read
	// token; applying it does.
	plan := filepath.Join(dir, "schedules.yaml")
	os.WriteFile(plan, []byte("- name: nightly\n  type: evid\n  schedule: \"0 3 * * *\"\n"), 0o600)
	if r := as("read-token", "apply", "-f", plan, "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "1 would be created") {
		t.Errorf("apply --dry-run with the read token: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := as("read-token", "apply", "-f", plan); r.code != cli.ExitRefused || !strings.Contains(r.stderr, "read-only token") {
		t.Errorf("apply with the read token: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	stopGracefully(t, w.proc)
}

// TestWork_Kill9Workers kills `sked work` processes with SIGKILL at random
// points, restarting each, for at least 20 cycles, while they run jobs.
// Afterwards every job ran to success, and no two executions of one job
// overlapped (a killed worker's execution ends when it dies).
func TestWork_Kill9Workers(t *testing.T) {
	dir := t.TempDir()
	addr, ev := freeAddr(t), filepath.Join(dir, "evidence")
	startServe(t, filepath.Join(dir, "sked.db"), addr)
	c := client{t, "http://" + addr}
	flags := []string{"--lease", "4s", "--concurrency", "3", "--log-format", "json"}
	workers := []*workProc{startWork(t, addr, "evid", ev, flags...), startWork(t, addr, "evid", ev, flags...)}
	started := slices.Clone(workers)
	ids := createEvidenceJobs(c, "evid", 120, 0.05, 0.5)

	deaths := map[int]time.Time{}
	cycles, killedMidRun := 0, 0
	stopAt := time.Now().Add(40 * time.Second)
	for cycles < 20 && time.Now().Before(stopAt) {
		time.Sleep(time.Duration(100+rand.IntN(900)) * time.Millisecond) // a random point, not a wait
		i := rand.IntN(len(workers))
		pid := workers[i].cmd.Process.Pid
		open := 0
		for _, e := range readExecutions(t, ev) {
			if e.pid == pid && e.ended == "" {
				open++
			}
		}
		deaths[pid] = kill9(workers[i])
		if open > 0 {
			killedMidRun++
		}
		workers[i] = startWork(t, addr, "evid", ev, flags...)
		started = append(started, workers[i])
		cycles++
	}
	waitLong(t, "every job to be done", 60*time.Second, func() bool { return allDone(c, ids) })
	for _, w := range workers {
		stopGracefully(t, w.proc)
	}
	execs := checkEvidence(t, ev, ids, workerEnds(started), deaths)
	t.Logf("%d kill cycles (%d with a run in flight), %d jobs, %d executions", cycles, killedMidRun, len(ids), len(execs))
	if cycles < 20 {
		t.Errorf("only %d kill cycles ran in the time allowed", cycles)
	}
}

// TestWork_ServerRestarts restarts the server while workers hold leases,
// with SIGKILL at random points and with SIGTERM: nothing is lost and no
// job runs twice at once.
func TestWork_ServerRestarts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sig    syscall.Signal
		cycles int
	}{{"SIGKILL", syscall.SIGKILL, 6}, {"SIGTERM", syscall.SIGTERM, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dbPath, addr, ev := filepath.Join(dir, "sked.db"), freeAddr(t), filepath.Join(dir, "evidence")
			srv := startServe(t, dbPath, addr, "--grace", "1s")
			c := client{t, "http://" + addr}
			flags := []string{"--lease", "4s", "--concurrency", "3", "--log-format", "json"}
			workers := []*workProc{startWork(t, addr, "evid", ev, flags...), startWork(t, addr, "evid", ev, flags...)}
			ids := createEvidenceJobs(c, "evid", 40, 0.2, 1.5)

			for i := range tc.cycles {
				waitFor(t, "a run in flight", func() bool {
					return slices.ContainsFunc(readExecutions(t, ev), func(e *execution) bool { return e.ended == "" })
				})
				time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond) // a random point, not a wait
				srv.cmd.Process.Signal(tc.sig)
				srv.cmd.Wait()
				time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond) // down for a random while
				srv = startServe(t, dbPath, addr, "--grace", "1s")
				t.Logf("cycle %d: server restarted", i+1)
			}
			waitLong(t, "every job to be done", 60*time.Second, func() bool { return allDone(c, ids) })
			for _, w := range workers {
				stopGracefully(t, w.proc)
			}
			execs := checkEvidence(t, ev, ids, workerEnds(workers), nil)
			reruns := len(execs) - len(ids)
			killed, unmarked := 0, 0
			for _, e := range execs {
				if e.ended == "" {
					killed++
					if e.mark.IsZero() {
						unmarked++
					}
				}
			}
			t.Logf("%d restarts by %s, %d jobs, %d executions (%d reruns, %d killed, %d of them before their first mark)",
				tc.cycles, tc.name, len(ids), len(execs), reruns, killed, unmarked)
		})
	}
}

// TestWork_SIGSTOPPastLease pauses a worker past its lease; another worker
// takes the job and finishes it; the first, resumed, is refused as stale,
// and its run keeps the outcome it reported late.
func TestWork_SIGSTOPPastLease(t *testing.T) {
	dir := t.TempDir()
	addr, ev := freeAddr(t), filepath.Join(dir, "evidence")
	startServe(t, filepath.Join(dir, "sked.db"), addr)
	c := client{t, "http://" + addr}
	a := startWork(t, addr, "evid", ev, "--lease", "1s", "--worker-id", "worker-a")
	id := c.create(map[string]any{"type": "evid", "payload": map[string]any{"sleep": "0.5"}, "backoff": "100ms"}).ID
	waitFor(t, "worker a to start the job", func() bool { return len(readExecutions(t, ev)) == 1 })
	a.cmd.Process.Signal(syscall.SIGSTOP)

	b := startWork(t, addr, "evid", ev, "--lease", "1s", "--worker-id", "worker-b")
	c.waitState(id, db.StateDone)
	stopGracefully(t, b.proc)

	// Worker a's own writes, and a stale write straight over HTTP.
	a.cmd.Process.Signal(syscall.SIGCONT)
	waitFor(t, "worker a to be refused", func() bool {
		return strings.Contains(a.log(), "run outcome refused")
	})
	for path, body := range map[string]any{
		"/heartbeat": map[string]any{"generation": 1},
		"/complete":  map[string]any{"generation": 1, "outcome": "failed"},
	} {
		if code, b := c.do("POST", "/jobs/"+id+path, body); code != http.StatusConflict {
			t.Errorf("stale %s: %d %s, want 409", path, code, b)
		}
	}
	stopGracefully(t, a.proc)

	runs := c.runs(id)
	if len(runs) != 2 {
		t.Fatalf("runs = %+v, want 2", runs)
	}
	first, second := runs[1], runs[0]
	if first.Generation != 1 || first.WorkerID != "worker-a" || first.Outcome != db.OutcomeLeaseExpired || first.LateOutcome == "" {
		t.Errorf("first run = %+v, want generation 1 on worker-a, lease_expired, with the outcome worker-a reported late", first)
	}
	if second.Generation != 2 || second.WorkerID != "worker-b" || second.Outcome != db.OutcomeSucceeded {
		t.Errorf("second run = %+v, want generation 2 on worker-b, succeeded", second)
	}
	if j := c.job(id); j.State != db.StateDone || j.LeaseGeneration != 2 {
		t.Errorf("job = %s generation %d, want done at generation 2", j.State, j.LeaseGeneration)
	}
}

// TestWork_CancelRacesClaim races DELETE against POST /claims on the same
// due jobs over HTTP: each job is either cancelled (and never claimed, with
// no runs) or claimed once (and every cancel after it got 409), never both.
func TestWork_CancelRacesClaim(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startServe(t, filepath.Join(dir, "sked.db"), addr)
	c := client{t, "http://" + addr}
	const n = 150
	ids := make([]string, n)
	for i := range ids {
		ids[i] = c.create(map[string]any{"type": "race"}).ID
	}

	var (
		mu        sync.Mutex
		claimedBy = map[string]int{} // job -> times claimed
		got204    = map[string]bool{}
		got409    = map[string]bool{}
		wg        sync.WaitGroup
		cancelsWG sync.WaitGroup
	)
	cancelsDone := make(chan struct{})
	for g := range 6 {
		cancelsWG.Add(1)
		go func() {
			defer cancelsWG.Done()
			for _, i := range rand.Perm(n) {
				req, _ := http.NewRequest("DELETE", c.base+"/jobs/"+ids[i], nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("canceller %d: %v", g, err)
					return
				}
				resp.Body.Close()
				mu.Lock()
				switch resp.StatusCode {
				case http.StatusNoContent:
					got204[ids[i]] = true
				case http.StatusConflict:
					got409[ids[i]] = true
				default:
					t.Errorf("DELETE %s: %d", ids[i], resp.StatusCode)
				}
				mu.Unlock()
			}
		}()
	}
	go func() { cancelsWG.Wait(); close(cancelsDone) }()
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-cancelsDone:
					return
				default:
				}
				code, b := c.do("POST", "/claims", map[string]any{"workerId": "racer-" + strconv.Itoa(g), "types": []string{"race"}, "max": 3, "wait": "0s"})
				if code != http.StatusOK {
					t.Errorf("claim: %d %s", code, b)
					return
				}
				var resp struct {
					Claims []db.Job `json:"claims"`
				}
				if err := json.Unmarshal(b, &resp); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, j := range resp.Claims {
					claimedBy[j.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	cancelled, claimed := 0, 0
	for _, id := range ids {
		j := c.job(id)
		runs := c.runs(id)
		switch {
		case claimedBy[id] > 1:
			t.Errorf("job %s claimed %d times", id, claimedBy[id])
		case claimedBy[id] == 1 && got204[id]:
			t.Errorf("job %s was claimed and its cancel answered 204", id)
		case claimedBy[id] == 1:
			claimed++
			if j.State != db.StateRunning || len(runs) != 1 {
				t.Errorf("claimed job %s: state %s, %d runs", id, j.State, len(runs))
			}
		case got204[id]:
			cancelled++
			if j.State != db.StateCancelled || len(runs) != 0 || got409[id] {
				t.Errorf("cancelled job %s: state %s, %d runs, some cancel got 409: %v", id, j.State, len(runs), got409[id])
			}
		default:
			t.Errorf("job %s neither claimed nor cancelled: %s", id, j.State)
		}
	}
	t.Logf("%d jobs: %d cancelled, %d claimed", n, cancelled, claimed)
}

// errorRecorder keeps the errors a checker reports instead of failing.
type errorRecorder struct {
	testing.TB
	errs []string
}

func (r *errorRecorder) Helper() {}
func (r *errorRecorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}

// TestCheckEvidence shows the checker catches what it is for: an overlap
// of two live executions, a job that never succeeded, an execution that
// never ended on a worker that did not die, a killed execution whose worker
// logged its end after the next one started, and one that wrote a mark
// after its logged end; and that a killed execution counts as over when its
// worker died or when its worker logged that it ended.
func TestCheckEvidence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evidence")
	lines := []string{
		"start A 1 1000 10", "end A 1 2000 10 ok",
		"start A 2 1500 11", "end A 2 2500 11 ok", // overlaps generation 1
		"start B 1 1000 12", "end B 1 2000 12 term", // never succeeded
		"start C 1 1000 13", // worker 13 lives and logged no end: never ended
		"start D 1 1000 14", // worker 14 died at 1200
		"start D 2 1300 15", "end D 2 1400 15 ok",
		"start E 1 1000 16", "mark E 1 1100 16", // killed; its worker logged the end at 1200
		"start E 2 1300 17", "end E 2 1400 17 ok",
		"start F 1 1000 16",                       // killed; its worker logged the end at 1500
		"start F 2 1300 17", "end F 2 1400 17 ok", // overlaps generation 1
		"start G 1 1000 16", "mark G 1 1300 16", // killed; logged ended at 1200, before its mark
		"start G 2 1400 17", "end G 2 1500 17 ok",
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Worker 16's outcome lines, as the pool writes them with --log-format json.
	logs := &bytes.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	for job, ended := range map[string]int64{"E": 1200, "F": 1500, "G": 1200} {
		log.Warn("run outcome refused: lease no longer held", "job_id", job, "generation", 1, "ended", time.Unix(0, ended))
	}
	w := &workProc{&proc{logs: logs}, &syncWriter{w: logs}}
	r := &errorRecorder{TB: t}
	checkEvidence(r, path, []string{"A", "B", "D", "E", "F", "G"}, workerEnds([]*workProc{w}), map[int]time.Time{14: time.Unix(0, 1200)})
	want := []string{"job C generation 1 started on live worker 13", "job B never ran to success", "job A: generation 2",
		"job F: generation 2", "job G generation 1 (worker 16) still ran at"}
	for _, w := range want {
		if !slices.ContainsFunc(r.errs, func(e string) bool { return strings.Contains(e, w) }) {
			t.Errorf("checker missed %q; it reported %q", w, r.errs)
		}
	}
	if len(r.errs) != len(want) {
		t.Errorf("checker reported %d errors, want %d: %q", len(r.errs), len(want), r.errs)
	}
}

// TestServe_SecondInterruptExits: a second Ctrl-C ends sked serve at once,
// with status 130, while a run drains; also when SIGINT was ignored as it
// started (cmd &, nohup), where putting the signal's default back had kept
// the ignoring.
func TestServe_SecondInterruptExits(t *testing.T) {
	dir := t.TempDir()
	dbPath, addr := filepath.Join(dir, "sked.db"), freeAddr(t)
	cmd := exec.Command("sh", "-c", `trap "" INT; exec "$0" "$@"`, skedBin,
		"serve", "--db", dbPath, "--addr", addr, "--enable-exec", "--grace", "5m")
	logs := &bytes.Buffer{}
	out := &syncWriter{w: logs}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "SKED_DB=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logged := func() string { out.mu.Lock(); defer out.mu.Unlock(); return logs.String() }
	p := &proc{cmd, logs}
	t.Cleanup(func() { p.kill(dbPath) })
	c := client{t, "http://" + addr}
	waitFor(t, "sked to answer", func() bool {
		resp, err := http.Get(c.base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	j := c.create(map[string]any{"type": "exec", "payload": map[string]any{"command": []string{"sleep", "300"}}})
	waitFor(t, "the run to start", func() bool { return c.job(j.ID).State == db.StateRunning })
	cmd.Process.Signal(os.Interrupt)
	waitFor(t, "the drain to begin", func() bool { return strings.Contains(logged(), "shutting down") })
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 130 {
			t.Fatalf("sked serve after a second SIGINT: %v; want exit status 130\n%s", err, logged())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("sked serve still draining 30 s after a second SIGINT (grace 5m)\n%s", logged())
	}
}
