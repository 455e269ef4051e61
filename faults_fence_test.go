//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sked-dev/sked/checker"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// fenceLease is the lease of the processes under fence faults. A frozen
// process stays frozen for twice that.
const fenceLease = 2 * time.Second

// fenceJobs is how many jobs a cycle creates: as many as the rig's slots
// (8 in sked serve, 2×4 in sked work), so that reruns take one round.
const fenceJobs = 16

// fenceTicks is how many tenths of a second a rerun (generation 2 or later)
// runs: twice the lease, so that it still runs when a stale execution of an
// earlier generation would wake up, or start late, after a freeze.
const fenceTicks = 2 * fenceLease / (100 * time.Millisecond)

// fenceScript is the command of the jobs under fence faults, after issue
// 13's: generation 1 runs a tenth of a second, a later one $1 tenths. It
// appends checker.ExecRecord lines to $FENCE_LOG (or the payload's "log"):
// its start, a mark after every tenth, its end. A signal ends it without an
// end line; its last mark says when it was last seen running.
const fenceScript = `[ -n "$FENCE_LOG" ] || FENCE_LOG=$(sed -n 's/.*"log":"\([^"]*\)".*/\1/p')
log() { printf '{"jobId":"%s","generation":%s,"%s":%s}\n' "$SKED_JOB_ID" "$SKED_GENERATION" "$1" "$(date +%s%N)" >> "$FENCE_LOG"; }
log start
n=1
if [ "$SKED_GENERATION" -gt 1 ]; then n=$1; fi
i=0
while [ $i -lt $n ]; do sleep 0.1; log mark; i=$((i+1)); done
log end`

// fenceProc is one sked process under fence faults, its output appended to
// a log file.
type fenceProc struct {
	name string
	args []string // after the binary
	addr string   // what it serves on; "" for sked work
	log  string
	cmd  *exec.Cmd
}

func (p *fenceProc) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p.cmd = exec.Command(skedBin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = append(os.Environ(), "SKED_DB=")
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if p.addr == "" {
		return
	}
	waitLong(t, p.name+" to listen", 30*time.Second, func() bool {
		conn, err := net.Dial("tcp", p.addr)
		if err == nil {
			conn.Close()
		}
		return err == nil || p.cmd.ProcessState != nil
	})
}

func (p *fenceProc) signal(sig syscall.Signal) { p.cmd.Process.Signal(sig) }

// stop ends p for good: SIGCONT (it may be frozen) and SIGTERM, after
// which it stops its commands and waits until they are gone, so that
// nothing writes to the test's directory after it is removed; SIGKILL if
// it takes longer than 30 s.
func (p *fenceProc) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	t := time.AfterFunc(30*time.Second, func() { p.signal(syscall.SIGKILL) })
	defer t.Stop()
	p.cmd.Wait()
}

// fenceRig is a set of sked processes over one database and the faults
// done to them.
type fenceRig struct {
	t      *testing.T
	name   string
	dir    string
	serves []*fenceProc
	works  []*fenceProc
	types  []string // job types a cycle creates, in turn: exec runs in sked serve, fence in sked work
	kinds  []fenceFault
	killed map[string]bool // pids of processes killed with SIGKILL, as worker ids end
}

// fenceFault is one kind of fault: do breaks the rig and returns when it is
// back (restarted, continued).
type fenceFault struct {
	name string
	do   func(r *fenceRig)
}

func newFenceRig(t *testing.T, name, dsn string, serves, works int) *fenceRig {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &fenceRig{t: t, name: name, dir: dir, types: []string{"exec"}, killed: map[string]bool{}}
	lease := fenceLease.String()
	for i := range serves {
		addr := freeAddr(t)
		r.serves = append(r.serves, &fenceProc{name: fmt.Sprintf("sked serve %d", i), addr: addr, log: filepath.Join(dir, fmt.Sprintf("serve%d.log", i)),
			args: []string{"serve", "--db", dsn, "--addr", addr, "--enable-exec", "--lease", lease, "--workers", "8", "--grace", "1s", "--log-format", "json"}})
	}
	for i := range works {
		r.works = append(r.works, &fenceProc{name: fmt.Sprintf("sked work %d", i), log: filepath.Join(dir, fmt.Sprintf("work%d.log", i)),
			args: []string{"work", "--server", "http://" + r.serves[0].addr, "--type", "fence", "--lease", lease, "--concurrency", "4",
				"--grace", "1s", "--log-format", "json", "--", "sh", "-c", fenceScript, "sh", strconv.Itoa(int(fenceTicks))}})
	}
	if works > 0 {
		r.types = append(r.types, "fence")
	}
	t.Cleanup(func() {
		for _, p := range append(r.serves, r.works...) {
			p.stop()
		}
		if t.Failed() {
			for _, p := range append(r.serves, r.works...) {
				b, _ := os.ReadFile(p.log)
				t.Logf("%s: %s log (tail):\n%s", r.name, p.name, tailOf(string(b), 20))
			}
		}
	})
	for _, p := range append(r.serves, r.works...) {
		p.start(t)
	}
	return r
}

// tailOf is the last n lines of s.
func tailOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// api sends a request to a random sked serve that is not frozen or down
// and decodes a 2xx answer into out.
func (r *fenceRig) api(method, path string, body, out any) int {
	r.t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	for _, i := range rand.Perm(len(r.serves)) {
		req, _ := http.NewRequest(method, "http://"+r.serves[i].addr+path, strings.NewReader(string(b)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			continue // this one is down or frozen: another may answer
		}
		defer resp.Body.Close()
		if out != nil && resp.StatusCode < 300 {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				r.t.Fatalf("%s %s: decode: %v", method, path, err)
			}
		}
		return resp.StatusCode
	}
	return 0
}

// enqueue creates n jobs, taking the rig's types in turn, whose executions
// append to log.
func (r *fenceRig) enqueue(n int, log string) []string {
	r.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		body := map[string]any{"type": "fence", "maxAttempts": 100, "backoff": "100ms", "payload": map[string]any{"log": log}}
		if r.types[i%len(r.types)] == "exec" {
			body = map[string]any{"type": "exec", "maxAttempts": 100, "backoff": "100ms", "payload": map[string]any{
				"command": []string{"sh", "-c", fenceScript, "sh", strconv.Itoa(int(fenceTicks))}, "env": map[string]string{"FENCE_LOG": log}}}
		}
		var j db.Job
		if code := r.api("POST", "/jobs", body, &j); code != http.StatusCreated {
			r.t.Fatalf("%s: create: %d", r.name, code)
		}
		ids[i] = j.ID
	}
	return ids
}

// done reports whether every job of ids is done.
func (r *fenceRig) done(ids []string) bool {
	for _, id := range ids {
		var j db.Job
		if r.api("GET", "/jobs/"+id, nil, &j) != http.StatusOK || j.State != db.StateDone {
			return false
		}
	}
	return true
}

// killAndRestart is a fault: SIGKILL, then start again at once.
func killAndRestart(p *fenceProc, r *fenceRig) {
	r.killed["/"+strconv.Itoa(p.cmd.Process.Pid)] = true
	p.signal(syscall.SIGKILL)
	p.cmd.Wait()
	p.start(r.t)
}

// freeze is a fault: SIGSTOP for twice the lease, then SIGCONT.
func freeze(p *fenceProc) {
	p.signal(syscall.SIGSTOP)
	time.Sleep(2 * fenceLease) // the fault's length, not a wait for a condition
	p.signal(syscall.SIGCONT)
}

// fenceStats is what the cycles found.
type fenceStats struct {
	cycles      map[string]int
	overlaps    int
	executions  int
	reruns      int
	maxRecovery time.Duration // from the end of a fault to every job of its cycle done
	maxKind     string
	maxResume   time.Duration // from the end of a fault to the next start of an execution
}

// cycle creates jobs, waits until a third of them ended (the rest run or
// wait), does fault f, and waits until every job is done; then it judges
// the cycle from its executions log (see judge). It counts the recovery
// time: from the end of the fault (restarted, continued) to every job done.
func (r *fenceRig) cycle(n int, f fenceFault, st *fenceStats) {
	r.t.Helper()
	log := filepath.Join(r.dir, fmt.Sprintf("executions-%04d.log", n))
	ids := r.enqueue(fenceJobs, log)
	// The bounds are generous: a 2 s lease on a machine loaded far past
	// its cores (a load of 20 on 2) loses runs to slow writes for a while.
	waitLong(r.t, "a third of the cycle's jobs to end", 3*time.Minute, func() bool {
		execs, _, err := checker.ReadExecutions(log)
		ended := 0
		for _, x := range execs {
			if x.End != 0 {
				ended++
			}
		}
		return err == nil && ended >= len(ids)/3
	})
	f.do(r)
	back := time.Now()
	waitLong(r.t, "every job of the cycle to be done", 5*time.Minute, func() bool { return r.done(ids) })
	recovery := time.Since(back)
	st.cycles[r.name+": "+f.name]++
	if recovery > st.maxRecovery {
		st.maxRecovery, st.maxKind = recovery, r.name+": "+f.name
	}
	execs := r.judge(ids, log, st)
	resume := time.Duration(-1)
	for _, x := range execs {
		if d := time.Unix(0, x.Start).Sub(back); d >= 0 && (resume < 0 || d < resume) {
			resume = d
		}
	}
	st.maxResume = max(st.maxResume, resume)
	r.t.Logf("cycle %d: %s: %s; the next execution started %s after, every job done %s after",
		n, r.name, f.name, resume.Round(time.Millisecond), recovery.Round(time.Millisecond))
}

// judge checks a cycle's executions log: no two executions of one job
// overlap (one is live from its start to its last line), every job ran to
// its end at least once, and every execution has its run in the ledger; one
// that ran to its end has the outcome its worker reported there (late, when
// its completion was refused as stale), not only lease_expired, unless its
// worker was killed before it could report.
func (r *fenceRig) judge(ids []string, log string, st *fenceStats) []checker.Execution {
	r.t.Helper()
	execs, violations, err := checker.ReadExecutions(log)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, v := range violations {
		r.t.Errorf("%s: %s", r.name, v)
	}
	st.executions += len(execs)
	st.reruns += len(execs) - len(ids)
	for _, id := range ids {
		var runs []map[string]any
		if code := r.api("GET", "/jobs/"+id+"/runs?limit=500", nil, &runs); code != http.StatusOK {
			r.t.Fatalf("%s: runs of %s: %d", r.name, id, code)
		}
		ended := false
		for _, x := range execs {
			if x.JobID != id {
				continue
			}
			ended = ended || x.End != 0
			i := slices.IndexFunc(runs, func(run map[string]any) bool { return run["generation"] == float64(x.Generation) })
			switch {
			case i < 0:
				r.t.Errorf("%s: job %s: generation %d ran, but the ledger has no run of it", r.name, id, x.Generation)
			case x.End != 0 && runs[i]["outcome"] == string(db.OutcomeLeaseExpired) && runs[i]["lateOutcome"] == nil &&
				!r.killed[workerPID(runs[i]["workerId"])]:
				r.t.Errorf("%s: job %s: generation %d ran to its end, but the ledger says only %v", r.name, id, x.Generation, runs[i])
			}
		}
		if !ended {
			r.t.Errorf("%s: job %s is done but no execution of it ran to its end", r.name, id)
		}
	}
	return execs
}

// workerPID is the "/pid" of a worker id (see r.killed): its end, or
// before the random part of sked serve's.
func workerPID(id any) string {
	s, _ := id.(string)
	s = s[max(strings.LastIndexByte(s, '/'), 0):]
	pid, _, _ := strings.Cut(s, "-") // sked serve's ids end in -RANDOM after the pid
	return pid
}

// rejudge judges every executions log of the rig again at the end, and
// counts the overlaps: a late line of an execution (a stale one still
// running) shows in its cycle's log after that cycle was judged.
func (r *fenceRig) rejudge(st *fenceStats) {
	logs, _ := filepath.Glob(filepath.Join(r.dir, "executions-*.log"))
	for _, log := range logs {
		_, violations, err := checker.ReadExecutions(log)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, v := range violations {
			if v.Rule == checker.RuleOverlap {
				st.overlaps++
			}
			r.t.Errorf("%s (at the end): %s", r.name, v)
		}
	}
	// How the fence acted, from the processes' logs.
	counts := map[string]int{}
	for _, p := range append(r.serves, r.works...) {
		b, _ := os.ReadFile(p.log)
		for _, msg := range []string{"handed back unrun", "lease may lapse before a renewal", "lease lost: another worker",
			"giving the run up", "run outcome refused", "commands it started are still being stopped"} {
			counts[msg] += strings.Count(string(b), msg)
		}
	}
	r.t.Logf("%s: log lines: %v", r.name, counts)
}

// TestFaults_Fence breaks sked, cycle after cycle, in each way that once let
// a job run twice at once (issue 13), while it runs generation-dependent
// exec jobs: generation 1 runs a tenth of a second, later generations
// twice the lease (4 s), so that a stale execution that outlived its lease
// or started after it overlaps the rerun. The kinds, in turn:
//
//   - kill -9 of sked serve (SQLite), restarted at once: its commands must
//     die with it (their supervisors see it die) before the new process,
//     which waits for the lock they hold, hands their jobs back;
//   - kill -9 of a sked work, restarted: its commands die with it;
//   - SIGSTOP of sked serve, or of a sked work, for twice the lease, then
//     SIGCONT: the supervisors kill the frozen process's commands before
//     the lease can lapse, and the woken process starts nothing it no
//     longer holds;
//   - SIGSTOP of one of three sked serve nodes on PostgreSQL (when
//     SKED_TEST_POSTGRES names a server; skipped otherwise), the others
//     taking its jobs over.
//
// Every cycle creates 16 jobs (on SQLite half for sked serve, half for two
// sked work), breaks the rig once a third of them have ended, and waits
// until all are done. Run: one cycle of each kind in CI; SKED_FAULT_CYCLES
// sets the count across the kinds (the long tier runs at least 200). Pass,
// judged from each cycle's executions log (checker.ReadExecutions; an
// execution is live from its start to its last line, and each marks every
// tenth of a second that it still runs): no two executions of one job
// overlap, every job is done and ran to its end once, every execution has
// its run in the ledger. The log reports the cycles of each kind, the
// overlaps and the longest recovery (end of the fault to every job done).
func TestFaults_Fence(t *testing.T) {
	var rigs []func() *fenceRig
	rigs = append(rigs, func() *fenceRig {
		r := newFenceRig(t, "sqlite", filepath.Join(t.TempDir(), "sked.db"), 1, 2)
		r.kinds = []fenceFault{
			{"kill -9 sked serve", func(r *fenceRig) { killAndRestart(r.serves[0], r) }},
			{"kill -9 sked work", func(r *fenceRig) { killAndRestart(r.works[rand.IntN(len(r.works))], r) }},
			{"SIGSTOP sked serve", func(r *fenceRig) { freeze(r.serves[0]) }},
			{"SIGSTOP sked work", func(r *fenceRig) { freeze(r.works[rand.IntN(len(r.works))]) }},
		}
		return r
	})
	if os.Getenv(postgrestest.EnvURL) != "" {
		rigs = append(rigs, func() *fenceRig {
			r := newFenceRig(t, "postgres", postgrestest.URL(t), 3, 0)
			r.kinds = []fenceFault{{"SIGSTOP one of three nodes", func(r *fenceRig) { freeze(r.serves[rand.IntN(len(r.serves))]) }}}
			return r
		})
	} else {
		t.Logf("the PostgreSQL kind is skipped: %s is not set", postgrestest.EnvURL)
	}
	kinds := 4 + 1*(len(rigs)-1)
	cycles := faultCycles(t, kinds)
	st := &fenceStats{cycles: map[string]int{}}
	began := time.Now()
	n := 0
	for i, mk := range rigs {
		r := mk()
		share := cycles * len(r.kinds) / kinds
		if i == len(rigs)-1 {
			share = cycles - n
		}
		for c := range share {
			n++
			r.cycle(n, r.kinds[c%len(r.kinds)], st)
		}
		r.rejudge(st)
	}
	t.Logf("%d fault cycles in %s %v: %d overlaps, %d executions (%d reruns); longest wait for the next start after a fault %s; longest recovery (every job done) %s (%s)",
		n, time.Since(began).Round(time.Second), st.cycles, st.overlaps, st.executions, st.reruns,
		st.maxResume.Round(time.Millisecond), st.maxRecovery.Round(time.Millisecond), st.maxKind)
}
