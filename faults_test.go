//go:build linux

package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sked-dev/sked/checker"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/failpoint"
)

// faultCycles is how many cycles a fault test runs: ci by default, or
// SKED_FAULT_CYCLES (the nightly tier sets 100).
func faultCycles(t *testing.T, ci int) int {
	t.Helper()
	v := os.Getenv("SKED_FAULT_CYCLES")
	if v == "" {
		return ci
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("SKED_FAULT_CYCLES=%q: want a positive number", v)
	}
	return n
}

// faultRig is one sked database under fault, with the evidence its run
// leaves: the client log (checker.ClientRecord lines), the jobs log
// (checker.ExecRecord lines, appended by the no-op exec command) and the
// server log (every process's JSON log, appended when it is gone).
type faultRig struct {
	t                                       *testing.T
	dir, db, addr                           string
	clientLog, jobsLog, serverLog           string
	mu                                      sync.Mutex // guards the client log file
	clientFile                              *os.File
	http                                    *http.Client
	acked                                   []string                  // one-off job ids acknowledged; guarded by mu
	keys                                    []string                  // idempotency keys sent; guarded by mu
	bodies                                  map[string]map[string]any // the body sent with each key; guarded by mu
	recurring                               int                       // recurring jobs acknowledged; guarded by mu
	enqueues, unacked, cancels, batchesSent int                       // guarded by mu
}

func newFaultRig(t *testing.T, dir string) *faultRig {
	t.Helper()
	r := &faultRig{t: t, dir: dir, db: filepath.Join(dir, "sked.db"), addr: freeAddr(t),
		clientLog: filepath.Join(dir, "client.log"), jobsLog: filepath.Join(dir, "jobs.log"),
		serverLog: filepath.Join(dir, "server.log"), http: &http.Client{Timeout: 10 * time.Second}, bodies: map[string]map[string]any{}}
	f, err := os.OpenFile(r.clientLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	r.clientFile = f
	t.Cleanup(func() { f.Close() })
	// The jobs log exists from the start, so that a run in which no command
	// started is judged on an empty log (see checker.RuleEmpty) rather than
	// failing to read one.
	if err := os.WriteFile(r.jobsLog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// start starts sked serve on the rig's database with a no-op exec kind, and
// SKED_FAILPOINT=fp when fp is not empty. It does not wait for the server
// to listen: an armed point may kill it first.
func (r *faultRig) start(fp string, extra ...string) *workProc {
	r.t.Helper()
	args := append([]string{"serve", "--db", r.db, "--addr", r.addr, "--enable-exec", "--lease", "2s",
		"--grace", "1s", "--log-format", "json"}, extra...)
	cmd := exec.Command(skedBin, args...)
	logs := &bytes.Buffer{}
	out := &syncWriter{w: logs}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "SKED_DB=", failpoint.Env+"="+fp)
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	p := &workProc{&proc{cmd, logs}, out}
	r.t.Cleanup(func() { p.kill(r.db) })
	return p
}

// listening reports whether sked serves on the rig's address: it answers
// GET /healthz. sked serve listens before it opens its store, so accepting
// connections is not yet serving them.
func (r *faultRig) listening() bool {
	res, err := (&http.Client{Timeout: time.Second}).Get("http://" + r.addr + "/healthz")
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// reap waits for p to exit and appends its log to the server log, without
// a last line a kill cut short.
func (r *faultRig) reap(p *workProc) {
	r.t.Helper()
	p.cmd.Wait()
	b := p.logs.Bytes()
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	f, err := os.OpenFile(r.serverLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// noopScript is the exec command of the jobs under fault: it appends its
// start and end to the jobs log ($1) as checker.ExecRecord lines and sleeps
// $2 seconds in between.
const noopScript = `printf '{"jobId":"%s","generation":%s,"start":%s}\n' "$SKED_JOB_ID" "$SKED_GENERATION" "$(date +%s%N)" >> "$1"
sleep "$2"
printf '{"jobId":"%s","generation":%s,"end":%s}\n' "$SKED_JOB_ID" "$SKED_GENERATION" "$(date +%s%N)" >> "$1"`

// jobBody is a create request for a no-op exec job. Every job carries an
// idempotency key: a create that got no answer is logged enqueue_unacked by
// its key, which is how the checker tells a job that was asked for (and may
// exist) from one nobody asked for.
func (r *faultRig) jobBody(key string, recurring bool) map[string]any {
	sleep := strconv.FormatFloat(rand.Float64()*0.3, 'f', 2, 64)
	b := map[string]any{"type": "exec", "idempotencyKey": key, "maxAttempts": 25, "backoff": "200ms",
		"payload": map[string]any{"command": []string{"sh", "-c", noopScript, "sh", r.jobsLog, sleep}}}
	if recurring {
		b["schedule"] = "@every 1s"
	} else if rand.IntN(3) == 0 {
		b["runAt"] = time.Now().Add(time.Duration(rand.IntN(2000)) * time.Millisecond).UTC().Format(time.RFC3339Nano)
	}
	return b
}

// record appends rec to the client log. Called with r.mu held.
func (r *faultRig) record(rec checker.ClientRecord) {
	b, _ := json.Marshal(rec)
	if _, err := r.clientFile.Write(append(b, '\n')); err != nil {
		r.t.Error(err)
	}
}

// post sends body to path and returns the status and answer; status 0 when
// no answer came (refused, reset, timed out).
func (r *faultRig) post(path string, body any) (int, []byte, http.Header) {
	b, _ := json.Marshal(body)
	resp, err := r.http.Post("http://"+r.addr+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil, nil
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil
	}
	return resp.StatusCode, out, resp.Header
}

// enqueue creates one job (or re-sends a key already sent, with the same
// body, as a client retrying would) and logs what it learnt.
func (r *faultRig) enqueue(key string, recurring bool) {
	r.mu.Lock()
	body, ok := r.bodies[key]
	if !ok {
		body = r.jobBody(key, recurring)
		r.bodies[key] = body
	}
	r.mu.Unlock()
	code, b, _ := r.post("/jobs", body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
	switch code {
	case http.StatusCreated, http.StatusOK:
		var j struct {
			ID       string `json:"jobId"`
			Schedule string `json:"schedule"`
		}
		if err := json.Unmarshal(b, &j); err != nil || j.ID == "" {
			r.t.Errorf("create answered %d %s", code, b)
			return
		}
		r.record(checker.ClientRecord{Op: checker.OpEnqueue, JobID: j.ID, IdempotencyKey: key, Type: "exec", Recurring: j.Schedule != ""})
		r.enqueues++
		if j.Schedule != "" {
			r.recurring++
		} else {
			r.acked = append(r.acked, j.ID)
		}
	case 0, http.StatusServiceUnavailable:
		r.record(checker.ClientRecord{Op: checker.OpEnqueueUnacked, IdempotencyKey: key})
		r.unacked++
	default:
		r.t.Errorf("create answered %d %s", code, b)
	}
}

// enqueueBatch creates n one-off jobs in one POST /jobs/batch.
func (r *faultRig) enqueueBatch(prefix string, n int) {
	jobs := make([]map[string]any, n)
	keys := make([]string, n)
	r.mu.Lock()
	for i := range jobs {
		keys[i] = prefix + "-" + strconv.Itoa(i)
		jobs[i] = r.jobBody(keys[i], false)
		r.bodies[keys[i]] = jobs[i]
	}
	r.mu.Unlock()
	code, b, _ := r.post("/jobs/batch", map[string]any{"jobs": jobs})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, keys...)
	r.batchesSent++
	switch code {
	case http.StatusCreated:
		var resp struct {
			Jobs []struct {
				ID string `json:"jobId"`
			}
		}
		if err := json.Unmarshal(b, &resp); err != nil || len(resp.Jobs) != n {
			r.t.Errorf("batch answered %d %s", code, b)
			return
		}
		for i, j := range resp.Jobs {
			r.record(checker.ClientRecord{Op: checker.OpEnqueue, JobID: j.ID, IdempotencyKey: keys[i], Type: "exec"})
			r.acked = append(r.acked, j.ID)
			r.enqueues++
		}
	case 0, http.StatusServiceUnavailable:
		for _, k := range keys {
			r.record(checker.ClientRecord{Op: checker.OpEnqueueUnacked, IdempotencyKey: k})
			r.unacked++
		}
	default:
		r.t.Errorf("batch answered %d %s", code, b)
	}
}

// cancel cancels a random acknowledged one-off job and logs the answer.
func (r *faultRig) cancel() {
	r.mu.Lock()
	if len(r.acked) == 0 {
		r.mu.Unlock()
		return
	}
	id := r.acked[rand.IntN(len(r.acked))]
	r.mu.Unlock()
	req, _ := http.NewRequest(http.MethodDelete, "http://"+r.addr+"/jobs/"+id, nil)
	resp, err := r.http.Do(req)
	if err != nil {
		return // no answer: the cancel may or may not have happened; nothing to judge
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch resp.StatusCode {
	case http.StatusNoContent, http.StatusConflict:
		r.record(checker.ClientRecord{Op: checker.OpCancel, JobID: id, Status: resp.StatusCode})
		r.cancels++
	case http.StatusServiceUnavailable:
	default:
		r.t.Errorf("DELETE /jobs/%s answered %d", id, resp.StatusCode)
	}
}

// load runs a client until ctx ends: single creates, re-sent keys,
// batches, a few recurring jobs and cancels, a few dozen a second. It runs
// through the server's deaths; what got no answer is logged as such.
func (r *faultRig) load(ctx context.Context) {
	for n := 0; ctx.Err() == nil; n++ {
		key := "k" + strconv.Itoa(n)
		r.mu.Lock()
		schedules := r.recurring
		r.mu.Unlock()
		switch x := rand.IntN(100); {
		case schedules == 0 || 75 <= x && x < 78:
			// Until one schedule is acknowledged every request creates
			// one, so that every run has slots to judge; then a few more.
			if schedules < 4 {
				r.enqueue(key, true)
			}
		case x < 50:
			r.enqueue(key, false)
		case x < 58:
			r.mu.Lock()
			if len(r.keys) > 0 {
				key = r.keys[rand.IntN(len(r.keys))]
			}
			r.mu.Unlock()
			r.enqueue(key, false)
		case x < 75:
			r.enqueueBatch(key, 2+rand.IntN(5))
		default:
			r.cancel()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(10+rand.IntN(20)) * time.Millisecond):
		}
	}
}

// countJobs counts the jobs that match where, read from the database file
// directly.
func countJobs(t *testing.T, dbPath, where string) int {
	t.Helper()
	conn := openReadOnly(t, dbPath)
	defer conn.Close()
	var n int
	if err := conn.QueryRow(`SELECT count(*) FROM jobs WHERE ` + where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Which jobs countJobs counts.
const (
	pendingOneOffs = `schedule IS NULL AND state IN ('ready', 'running')`
	doneOneOffs    = `schedule IS NULL AND state = 'done'`
)

// check runs the evidence checker on the rig, the run finished and drained,
// and fails the test on any violation.
func (r *faultRig) check() *checker.Report {
	r.t.Helper()
	rep, err := checker.Check(context.Background(), checker.Input{DB: r.db, ClientLog: r.clientLog,
		JobsLog: r.jobsLog, ServerLog: r.serverLog, Finished: true})
	if err != nil {
		r.t.Fatalf("check: %v", err)
	}
	for _, v := range rep.Violations {
		r.t.Errorf("%s", v)
	}
	return rep
}

// requireWork fails the test unless the run did work: at least floor
// acknowledged enqueues, executions in the jobs log and one-off jobs done,
// and, once a schedule was acknowledged, recurring slots judged. A run in
// which no command started, or no create was answered, breaks no rule.
func (r *faultRig) requireWork(rep *checker.Report, floor int) {
	r.t.Helper()
	r.mu.Lock()
	schedules := r.recurring
	r.mu.Unlock()
	for _, w := range []struct {
		what     string
		got, min int
	}{
		{"acknowledged enqueues", rep.Enqueues, floor},
		{"executions in the jobs log", rep.Executions, floor},
		{"one-off jobs done", countJobs(r.t, r.db, doneOneOffs), floor},
		{"recurring slots judged", rep.Slots, min(schedules, 1)},
	} {
		if w.got < w.min {
			r.t.Errorf("%s: %d, want at least %d: the run did too little work to trust its verdict", w.what, w.got, w.min)
		}
	}
}

// failpointWait bounds how long a cycle of TestFaults_Kill9Server waits for
// its failpoint: a restart and up to 20 batches of the client's load take a
// few seconds on an idle machine, and took over 30 on one running other
// test suites at a load of 18.
const failpointWait = 90 * time.Second

// TestFaults_Kill9Server kills sked serve with SIGKILL under load, cycle
// after cycle, at a random moment and at each named failpoint in turn
// (after-claim-commit, before-finish-commit, mid-batch-insert, armed at a
// random hit), restarting it on the same file each time. A client enqueues
// one-off, batched and recurring no-op exec jobs with idempotency keys
// (re-sending some), cancels some, and logs every answer, and every create
// that got none, for the checker.
//
// Run: 12 cycles in CI (3 rounds of random + the 3 points); SKED_FAULT_CYCLES
// sets the count (nightly: 100). Pass: every named point was reached in its
// cycle (the process killed itself there), and after the last cycle, once a
// clean server has drained every one-off job, checker.Check with Finished
// finds no violation: no acknowledged job lost, none run unasked, no
// idempotency key doubled, no two live executions of one job, no generation
// issued twice, no stale write accepted, no recurring slot run twice or
// silently missed, integrity_check ok.
func TestFaults_Kill9Server(t *testing.T) {
	cycles := faultCycles(t, 12)
	began := time.Now()
	r := newFaultRig(t, t.TempDir())
	ctx, stopLoad := context.WithCancel(context.Background())
	loadDone := make(chan struct{})
	defer func() { stopLoad(); <-loadDone }()

	points := []string{"", failpoint.AfterClaimCommit, failpoint.BeforeFinishCommit, failpoint.MidBatchInsert}
	reached := map[string]int{}
	for i := range cycles {
		point := points[i%len(points)]
		fp := ""
		if point != "" {
			fp = point + ":" + strconv.Itoa(1+rand.IntN(20))
		}
		p := r.start(fp)
		if i == 0 {
			waitFor(t, "sked to listen", r.listening)
			go func() { defer close(loadDone); r.load(ctx) }()
		}
		if point == "" {
			waitLong(t, "sked to listen", 30*time.Second, func() bool { return r.listening() || p.cmd.ProcessState != nil })
			time.Sleep(time.Duration(300+rand.IntN(1200)) * time.Millisecond) // a random point, not a wait
			p.cmd.Process.Signal(syscall.SIGKILL)
			r.reap(p)
			t.Logf("cycle %d: killed at random", i+1)
			continue
		}
		exited := make(chan struct{})
		go func() { r.reap(p); close(exited) }()
		select {
		case <-exited:
			ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				ps, _ := exec.Command("sh", "-c", "cat /proc/locks; ps -eo pid,ppid,stat,lstart,cmd | grep -v 'ps -eo'").CombinedOutput()
				t.Fatalf("cycle %d: sked with %s exited with %v, not killed by its failpoint:\n%s\n%s", i+1, fp, p.cmd.ProcessState, p.logs, ps)
			}
			reached[point]++
			t.Logf("cycle %d: killed itself at %s", i+1, fp)
		case <-time.After(failpointWait):
			p.cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			t.Errorf("cycle %d: failpoint %s not reached in %s", i+1, fp, failpointWait)
		}
	}

	p := r.start("")
	waitLong(t, "sked to listen after the last cycle", 30*time.Second, r.listening)
	stopLoad()
	<-loadDone
	waitLong(t, "every one-off job to be final", 120*time.Second, func() bool { return countJobs(t, r.db, pendingOneOffs) == 0 })
	p.cmd.Process.Signal(syscall.SIGTERM)
	r.reap(p)
	rep := r.check()
	r.requireWork(rep, 3*cycles)
	t.Logf("%d kill cycles (named points reached: %v) in %s; client: %d acknowledged enqueues, %d unacknowledged, %d cancels, %d batches; %s",
		cycles, reached, time.Since(began).Round(time.Millisecond), r.enqueues, r.unacked, r.cancels, r.batchesSent, rep.Summary())
}

// openReadOnly opens a SQLite file for reading with the driver sked uses.
func openReadOnly(t *testing.T, path string) *sql.DB { return openSQLite(t, path, "mode=ro&") }

// openWritable opens a SQLite file for writing with the driver sked uses,
// as another process sharing the file would.
func openWritable(t *testing.T, path string) *sql.DB { return openSQLite(t, path, "") }

func openSQLite(t *testing.T, path, query string) *sql.DB {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+path+"?"+query+"_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// walHeaderSize and walFrameHeaderSize are SQLite's WAL layout
// (https://sqlite.org/fileformat2.html#walformat).
const (
	walHeaderSize      = 32
	walFrameHeaderSize = 24
)

// walLastCommit returns the length of wal up to the end of its last valid
// commit frame: the last frame whose "database size after commit" is not
// zero, whose salts match the header and whose cumulative checksum holds.
// With synchronous=FULL, SQLite fsyncs the WAL at every commit, so this is
// where the WAL stood at its last sync; anything after it a power cut may
// not have kept. It returns 0 when no frame commits (the WAL is empty).
func walLastCommit(wal []byte) int {
	if len(wal) < walHeaderSize {
		return 0
	}
	be := func(b []byte) uint32 { return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) }
	magic := be(wal)
	if magic&^1 != 0x377f0682 {
		return 0
	}
	word := be // checksum words are big-endian when the magic's low bit is set
	if magic&1 == 0 {
		word = func(b []byte) uint32 { return uint32(b[3])<<24 | uint32(b[2])<<16 | uint32(b[1])<<8 | uint32(b[0]) }
	}
	sum := func(s1, s2 uint32, b []byte) (uint32, uint32) {
		for i := 0; i+8 <= len(b); i += 8 {
			s1 += word(b[i:]) + s2
			s2 += word(b[i+4:]) + s1
		}
		return s1, s2
	}
	pageSize := int(be(wal[8:]))
	s1, s2 := sum(0, 0, wal[:24])
	if s1 != be(wal[24:]) || s2 != be(wal[28:]) {
		return 0
	}
	salt1, salt2 := be(wal[16:]), be(wal[20:])
	last := 0
	for off := walHeaderSize; off+walFrameHeaderSize+pageSize <= len(wal); off += walFrameHeaderSize + pageSize {
		h := wal[off : off+walFrameHeaderSize]
		if be(h[8:]) != salt1 || be(h[12:]) != salt2 {
			break
		}
		s1, s2 = sum(s1, s2, h[:8])
		s1, s2 = sum(s1, s2, wal[off+walFrameHeaderSize:off+walFrameHeaderSize+pageSize])
		if s1 != be(h[16:]) || s2 != be(h[20:]) {
			break
		}
		if be(h[4:]) != 0 {
			last = off + walFrameHeaderSize + pageSize
		}
	}
	return last
}

// execStarts returns the (job, generation) pairs whose execution started
// in the jobs log at path, as "job/generation".
func execStarts(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		var rec checker.ExecRecord
		if json.Unmarshal(line, &rec) == nil && rec.Start != 0 {
			out = append(out, rec.JobID+"/"+strconv.FormatInt(rec.Generation, 10))
		}
	}
	return out
}

// checkPowerLossCopy opens the database copy at path with the store, then
// checks it: integrity_check ok, every job of acked present, no lease
// generation of a job recorded by two runs or above the job's counter, and
// every execution of started issued (its run row kept).
func checkPowerLossCopy(t *testing.T, path string, acked, started []string) {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Errorf("%s: the store does not open: %v", path, err)
		return
	}
	store.Close()
	conn := openReadOnly(t, path)
	defer conn.Close()
	var ok string
	if err := conn.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Errorf("%s: integrity_check = %q, %v", path, ok, err)
	}
	have := map[string]bool{}
	rows, err := conn.Query(`SELECT id FROM jobs`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		have[id] = true
	}
	rows.Close()
	for _, id := range acked {
		if !have[id] {
			t.Errorf("%s: job %s, acknowledged before the stop, is lost", path, id)
		}
	}
	issued := map[string]bool{}
	rows, err = conn.Query(`SELECT job_id, generation, count(*) FROM runs WHERE generation > 0 GROUP BY job_id, generation`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			id     string
			gen, n int64
		)
		rows.Scan(&id, &gen, &n)
		issued[id+"/"+strconv.FormatInt(gen, 10)] = true
		if n > 1 {
			t.Errorf("%s: job %s generation %d has %d runs", path, id, gen, n)
		}
	}
	rows.Close()
	for _, s := range started {
		if !issued[s] {
			t.Errorf("%s: execution %s started before the stop but its generation was not kept: it will be issued again", path, s)
		}
	}
	var behind int
	if err := conn.QueryRow(`SELECT count(*) FROM jobs j WHERE lease_generation < (SELECT max(generation) FROM runs r WHERE r.job_id = j.id)`).Scan(&behind); err != nil || behind != 0 {
		t.Errorf("%s: %d jobs have a lease_generation below one of their runs (%v)", path, behind, err)
	}
}

// powerCopy is what a stop of TestFaults_PowerLoss copied: the database
// and -wal files, where the WAL's last commit ends, and the jobs
// acknowledged and the executions started before the stop.
type powerCopy struct {
	db, wal        []byte
	last           int
	acked, started []string
}

// tornNext returns the WAL of c with the writes that followed it torn: c's
// WAL up to its last commit, then the frames the server wrote after the
// stop (read from later, a WAL that continues c's) cut at a random byte
// before their last commit. That is the file a power cut leaves while a
// later transaction is being written: everything c acknowledged was synced
// and must survive; the torn transaction must vanish. ok is false when
// later does not continue c's WAL (a checkpoint restarted it) or holds no
// new commit.
func tornNext(c powerCopy, later []byte) (torn []byte, ok bool) {
	end := walLastCommit(later)
	if end <= c.last+1 || !bytes.Equal(later[:c.last], c.wal[:c.last]) {
		return nil, false
	}
	return later[:c.last+1+rand.IntN(end-c.last-1)], true
}

// TestFaults_PowerLoss simulates power cuts: while sked serve is under
// write load (creates, batches, cancels, claims and completions of no-op
// exec jobs), it is stopped with SIGSTOP mid-write, its database and -wal
// files are copied, and it is continued. Each copy is judged as copied, and
// with the WAL cut at its last sync point (the end of its last valid commit
// frame; see walLastCommit); and each copy but the last once more with the
// writes that followed it torn (see tornNext), the WAL ending inside a
// transaction.
//
// Run: 5 stops in CI; SKED_FAULT_CYCLES sets the count. Pass, for every
// copy and every variant: the store opens it, integrity_check is ok, every
// job whose create was answered before the stop is present (the default
// durability is synchronous=FULL), no (job, generation) has two runs nor a
// job a counter below its runs', and every execution that started before
// the stop has its generation's run row (a generation handed out was
// durable, so it can never be issued again). And the test did what it
// says: jobs were acknowledged and executions started before the last
// stop, the WAL held commits, and at least one copy's WAL was torn inside a
// transaction.
func TestFaults_PowerLoss(t *testing.T) {
	cycles := faultCycles(t, 5)
	r := newFaultRig(t, t.TempDir())
	p := r.start("")
	waitFor(t, "sked to listen", r.listening)
	ctx, stopLoad := context.WithCancel(context.Background())
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); r.load(ctx) }()
	defer func() { stopLoad(); <-loadDone }()

	var (
		prev                  *powerCopy
		cut, torn, walCommits int
	)
	for i := range cycles {
		// A random point, not a wait; short, so that the WAL seldom
		// restarts between two stops (a checkpoint), which leaves the
		// later copy no prefix of the earlier one to tear.
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		p.cmd.Process.Signal(syscall.SIGSTOP)
		dbb, err1 := os.ReadFile(r.db)
		wal, err2 := os.ReadFile(r.db + "-wal")
		r.mu.Lock()
		acked := append([]string(nil), r.acked...)
		r.mu.Unlock()
		started := execStarts(t, r.jobsLog)
		p.cmd.Process.Signal(syscall.SIGCONT)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		c := powerCopy{db: dbb, wal: wal, last: walLastCommit(wal), acked: acked, started: started}
		if c.last < len(wal) {
			cut++
		}
		variants := []struct {
			name string
			c    powerCopy
		}{{"as-copied", c}, {"cut-at-last-sync", c}}
		variants[1].c.wal = wal[:c.last]
		if prev != nil {
			if w, ok := tornNext(*prev, wal); ok {
				v := *prev
				v.wal = w
				variants = append(variants, struct {
					name string
					c    powerCopy
				}{"previous-with-next-write-torn", v})
				if walLastCommit(w) < len(w) {
					torn++
				}
			}
		}
		for _, v := range variants {
			dir := filepath.Join(r.dir, fmt.Sprintf("copy%d-%s", i, v.name))
			path := filepath.Join(dir, "sked.db")
			if err := errors.Join(os.Mkdir(dir, 0o755), os.WriteFile(path, v.c.db, 0o644), os.WriteFile(path+"-wal", v.c.wal, 0o644)); err != nil {
				t.Fatal(err)
			}
			checkPowerLossCopy(t, path, v.c.acked, v.c.started)
		}
		t.Logf("stop %d: db %d bytes, wal %d bytes (last commit ends at %d), %d acknowledged jobs, %d executions started; %d variants judged",
			i+1, len(dbb), len(wal), c.last, len(acked), len(started), len(variants))
		if c.last > 0 {
			walCommits++
		}
		prev = &c
	}
	stopLoad()
	<-loadDone
	t.Logf("%d power-loss copies, %d with a WAL tail past the last commit, %d torn inside a later transaction; %d creates acknowledged",
		cycles, cut, torn, r.enqueues)
	// A stop right after SQLite restarted its WAL (a checkpoint copied it
	// into the file) finds no commit in it, rightly; some stop must.
	if len(prev.acked) == 0 || len(prev.started) == 0 || walCommits == 0 {
		t.Errorf("the last stop saw %d acknowledged jobs and %d executions started, and %d stops a WAL with commits: want each above zero, or the copies prove nothing",
			len(prev.acked), len(prev.started), walCommits)
	}
	if torn == 0 {
		t.Errorf("no copy was judged with its WAL torn inside a transaction: the power cuts cut nothing")
	}
}
