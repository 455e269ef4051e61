//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sked-dev/sked/checker"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// clusterRig is three sked serve nodes on one PostgreSQL database and two
// sked work processes, each claiming through a different node, with a
// client that logs every answer (checker.ClientRecord) for the checker.
type clusterRig struct {
	*fenceRig
	dsn       string
	proxy     *postgrestest.Proxy // between the nodes and PostgreSQL; nil when they connect directly
	execLog   string              // the executions of every job (checker.ExecRecord)
	clientLog string

	mu         sync.Mutex
	client     *os.File
	acked      []string // acknowledged one-off jobs
	recurring  []string
	backfilled map[string]bool // jobs the acknowledged backfills made
	unanswered int             // backfills that got no answer
	counts     map[string]int
}

// newClusterRig starts the rig's processes; with proxied, the nodes reach
// PostgreSQL through a proxy that can cut them off it (r.proxy).
func newClusterRig(t *testing.T, proxied bool) *clusterRig {
	t.Helper()
	dsn := postgrestest.URL(t)
	nodes := dsn
	var proxy *postgrestest.Proxy
	if proxied {
		proxy = postgrestest.NewProxy(t, dsn)
		nodes = proxy.URL(dsn)
	}
	r := &clusterRig{fenceRig: newFenceRig(t, "cluster", nodes, 3, 0), dsn: dsn, proxy: proxy, counts: map[string]int{}, backfilled: map[string]bool{}}
	r.execLog = filepath.Join(r.dir, "executions.log")
	r.clientLog = filepath.Join(r.dir, "client.log")
	f, err := os.Create(r.clientLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	r.client = f
	for i := range 2 {
		p := &fenceProc{name: fmt.Sprintf("sked work %d", i), log: filepath.Join(r.dir, fmt.Sprintf("work%d.log", i)),
			args: []string{"work", "--server", "http://" + r.serves[1+i].addr, "--type", "fence", "--lease", fenceLease.String(),
				"--concurrency", "4", "--grace", "1s", "--log-format", "json", "--", "sh", "-c", fenceScript, "sh", strconv.Itoa(int(fenceTicks))}}
		p.start(t)
		r.works = append(r.works, p) // the fence rig's cleanup stops them
	}
	return r
}

// record appends rec to the client log.
func (r *clusterRig) record(rec checker.ClientRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _ := json.Marshal(rec)
	if _, err := r.client.Write(append(b, '\n')); err != nil {
		r.t.Error(err)
	}
}

func (r *clusterRig) count(what string) {
	r.mu.Lock()
	r.counts[what]++
	r.mu.Unlock()
}

// create makes one job through a random node. A create that got no answer
// is logged enqueue_unacked by its idempotency key: the job may exist.
func (r *clusterRig) create(key string, recurring bool) {
	var body map[string]any
	cmd := []string{"sh", "-c", fenceScript, "sh", strconv.Itoa(int(fenceTicks))}
	switch {
	case recurring:
		cmd[len(cmd)-1] = "3" // a slot's rerun must not outlast the schedule's second
		body = map[string]any{"type": "exec", "schedule": "@every 1s", "maxAttempts": 3, "backoff": "100ms",
			"payload": map[string]any{"command": cmd, "env": map[string]string{"FENCE_LOG": r.execLog}}}
	case rand.IntN(2) == 0:
		body = map[string]any{"type": "exec", "maxAttempts": 100, "backoff": "100ms",
			"payload": map[string]any{"command": cmd, "env": map[string]string{"FENCE_LOG": r.execLog}}}
	default:
		body = map[string]any{"type": "fence", "maxAttempts": 100, "backoff": "100ms", "payload": map[string]any{"log": r.execLog}}
	}
	body["idempotencyKey"] = key
	var j db.Job
	switch code := r.api("POST", "/jobs", body, &j); code {
	case http.StatusCreated, http.StatusOK:
		r.record(checker.ClientRecord{Op: checker.OpEnqueue, JobID: j.ID, IdempotencyKey: key, Type: j.Type, Recurring: recurring})
		r.mu.Lock()
		if recurring {
			r.recurring = append(r.recurring, j.ID)
		} else {
			r.acked = append(r.acked, j.ID)
		}
		r.mu.Unlock()
	case 0, http.StatusServiceUnavailable:
		r.record(checker.ClientRecord{Op: checker.OpEnqueueUnacked, IdempotencyKey: key})
	case http.StatusInternalServerError:
		if r.proxy == nil {
			r.t.Errorf("create %s answered %d", key, http.StatusInternalServerError)
		}
		// The database was cut off as the create committed: the node
		// cannot know whether it did.
		r.record(checker.ClientRecord{Op: checker.OpEnqueueUnacked, IdempotencyKey: key})
	default:
		r.t.Errorf("create %s answered %d", key, code)
	}
}

// cancel cancels a job through a random node and logs an answer it got.
func (r *clusterRig) cancel(id string) int {
	code := r.api("DELETE", "/jobs/"+id, nil, nil)
	switch code {
	case http.StatusNoContent, http.StatusConflict:
		r.record(checker.ClientRecord{Op: checker.OpCancel, JobID: id, Status: code})
		r.count(fmt.Sprintf("cancel %d", code))
	case 0, http.StatusServiceUnavailable:
	case http.StatusInternalServerError:
		if r.proxy == nil { // else the database was cut off as it committed
			r.t.Errorf("DELETE /jobs/%s answered %d", id, code)
		}
	default:
		r.t.Errorf("DELETE /jobs/%s answered %d", id, code)
	}
	return code
}

// control sends one random schedule control of a recurring job through a
// random node: pause (until a moment ahead, or by hand), resume, trigger,
// skip or a backfill of the last few seconds. A refusal (409: the job is
// not in a state it applies to) is fine; what it did is judged from the
// ledger.
func (r *clusterRig) control(id string) {
	var path string
	var body any
	switch rand.IntN(6) {
	case 0:
		path = "/pause"
		if rand.IntN(2) == 0 { // ended by the sweepers of every node at once
			body = map[string]string{"until": time.Now().Add(time.Duration(500+rand.IntN(2000)) * time.Millisecond).UTC().Format(time.RFC3339Nano)}
		}
	case 1, 2:
		path = "/resume"
	case 3:
		path = "/trigger"
	case 4:
		path = "/skip"
	case 5:
		now := time.Now()
		path, body = "/backfill", map[string]string{
			"from": now.Add(-time.Duration(2+rand.IntN(4)) * time.Second).UTC().Format(time.RFC3339Nano),
			"to":   now.Add(-time.Second).UTC().Format(time.RFC3339Nano)}
	}
	var b db.Backfill
	code := r.api("POST", "/jobs/"+id+path, body, &b)
	switch {
	case code == 0 || code == http.StatusServiceUnavailable:
		if path == "/backfill" {
			r.mu.Lock()
			r.unanswered++
			r.mu.Unlock()
		}
	case code/100 == 2 && path == "/backfill":
		for _, j := range b.JobIDs {
			r.mu.Lock()
			known := r.backfilled[j]
			r.backfilled[j] = true
			r.mu.Unlock()
			if !known {
				r.record(checker.ClientRecord{Op: checker.OpEnqueue, JobID: j, Type: "exec"})
			}
		}
	case code == http.StatusUnprocessableEntity && body != nil && path == "/pause":
		// until had passed when a node frozen or slow took the pause
	case code >= 300 && code != http.StatusConflict:
		r.t.Errorf("POST /jobs/%s%s answered %d", id, path, code)
	}
	r.count(fmt.Sprintf("%s %d", path, code))
}

// snapshot copies the columns the checker reads of PostgreSQL's jobs and
// runs into a new SQLite file, times in the SQLite store's format (to the
// millisecond), so that checker.Check can judge a PostgreSQL run. It also
// returns the jobs a backfill made (they have a parent).
func (r *clusterRig) snapshot(path string) (children []db.Job) {
	r.t.Helper()
	ctx := context.Background()
	pg, err := postgres.Connect(ctx, r.dsn)
	if err != nil {
		r.t.Fatal(err)
	}
	defer pg.Close(ctx)
	lite := openWritable(r.t, path)
	ts := func(col string) string {
		return `to_char(` + col + ` AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
	}
	tables := []struct{ create, sel string }{
		{`CREATE TABLE jobs (id TEXT PRIMARY KEY, type TEXT, schedule TEXT, timezone TEXT, state TEXT, idempotency_key TEXT,
			lease_generation INTEGER, missed_slots INTEGER, jitter_ms INTEGER, slot TEXT, lease_until TEXT, created_at TEXT,
			updated_at TEXT, parent_id TEXT)`,
			`SELECT id, type, schedule, timezone, state, idempotency_key, lease_generation, missed_slots, jitter_ms, ` +
				ts("slot") + `, ` + ts("lease_until") + `, ` + ts("created_at") + `, ` + ts("updated_at") + `, parent_id FROM jobs`},
		{`CREATE TABLE runs (id INTEGER PRIMARY KEY, job_id TEXT REFERENCES jobs (id), generation INTEGER, outcome TEXT,
			reason TEXT, gave_up INTEGER, slot TEXT, started_at TEXT, finished_at TEXT, slot_count INTEGER, last_slot TEXT)`,
			`SELECT id, job_id, generation, outcome, reason, gave_up::int, ` + ts("slot") + `, ` + ts("started_at") + `, ` +
				ts("finished_at") + `, slot_count, ` + ts("last_slot") + ` FROM runs`},
	}
	for _, tb := range tables {
		if _, err := lite.Exec(tb.create); err != nil {
			r.t.Fatal(err)
		}
		rows, err := pg.Query(ctx, tb.sel)
		if err != nil {
			r.t.Fatalf("%s: %v", tb.sel, err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				r.t.Fatal(err)
			}
			marks := strings.TrimSuffix(strings.Repeat("?,", len(vals)), ",")
			name := strings.Fields(tb.create)[2]
			if _, err := lite.Exec("INSERT INTO "+name+" VALUES ("+marks+")", vals...); err != nil {
				r.t.Fatal(err)
			}
			if name == "jobs" && vals[13] != nil {
				children = append(children, db.Job{ID: vals[0].(string), Type: vals[1].(string)})
			}
		}
		if err := rows.Err(); err != nil {
			r.t.Fatal(err)
		}
	}
	return children
}

// judge stops every process, copies the database and runs the checker on
// the run, finished and drained.
func (r *clusterRig) judge() *checker.Report {
	r.t.Helper()
	for _, p := range append(r.serves, r.works...) {
		p.stop()
	}
	lite := filepath.Join(r.dir, "snapshot.db")
	children := r.snapshot(lite)
	// A job a backfill that got no answer may have made was asked for;
	// any other the answers did not name is left for the checker (unasked).
	r.mu.Lock()
	unanswered := r.unanswered
	r.mu.Unlock()
	for _, c := range children {
		if !r.backfilled[c.ID] && unanswered > 0 {
			r.t.Logf("backfilled job %s is in no answer: one of %d backfills got none", c.ID, unanswered)
			r.record(checker.ClientRecord{Op: checker.OpEnqueue, JobID: c.ID, Type: c.Type})
		}
	}
	serverLog := filepath.Join(r.dir, "servers.log")
	var all []byte
	for _, p := range r.serves {
		b, err := os.ReadFile(p.log)
		if err != nil {
			r.t.Fatal(err)
		}
		all = append(all, b...)
	}
	if err := os.WriteFile(serverLog, all, 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.slotsOnce(lite)
	rep, err := checker.Check(context.Background(), checker.Input{DB: lite, ClientLog: r.clientLog, JobsLog: r.execLog,
		ServerLog: serverLog, Finished: true})
	if err != nil {
		r.t.Fatalf("check: %v", err)
	}
	for _, v := range rep.Violations {
		r.t.Errorf("%s", v)
	}
	r.t.Logf("check: %s; evidence in %s", rep.Summary(), r.dir)
	return rep
}

// slotsOnce fails the test when a slot of a recurring job succeeded twice
// across the job and the jobs its backfills made (the checker judges each
// job alone). An operator's extra run (reason manual) stands for no slot.
func (r *clusterRig) slotsOnce(path string) {
	r.t.Helper()
	rows, err := openReadOnly(r.t, path).Query(`SELECT coalesce(j.parent_id, j.id), r.slot, count(*) FROM runs r
		JOIN jobs j ON j.id = r.job_id
		WHERE r.outcome = 'succeeded' AND r.slot IS NOT NULL AND coalesce(r.reason, '') != 'manual'
			AND (j.parent_id IS NOT NULL OR j.schedule IS NOT NULL)
		GROUP BY 1, 2 HAVING count(*) > 1`)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, slot string
		var n int
		if err := rows.Scan(&id, &slot, &n); err != nil {
			r.t.Fatal(err)
		}
		r.t.Errorf("recurring job %s: slot %s succeeded %d times across the job and its backfills", id, slot, n)
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
}

// TestFaults_Cluster breaks a cluster of three sked serve nodes on one
// PostgreSQL database, with two sked work processes claiming through two
// of them, while a client creates one-off jobs through random nodes,
// cancels some of them at once (racing the claims of the other nodes and
// the workers), and pauses, resumes, triggers, skips and backfills two
// recurring jobs through random nodes. The faults, in turn: kill -9 of a
// node (restarted at once), SIGSTOP of a node and of a sked work for twice
// the lease, then SIGCONT, and SIGTERM of a node, restarted once it has
// stopped (a rolling restart: it hands back what it has not started). Pass: the checker finds no violation in what
// ran, judged after every process stopped (the database copied for it).
// It needs PostgreSQL (postgrestest.URL skips without one).
func TestFaults_Cluster(t *testing.T) {
	if testing.Short() {
		t.Skip("breaks a cluster for about a minute")
	}
	r := newClusterRig(t, false)
	stop := r.load(true)
	kinds := []fenceFault{
		{"kill -9 a node", func(r *fenceRig) { killAndRestart(r.serves[rand.IntN(len(r.serves))], r) }},
		{"SIGSTOP a node", func(r *fenceRig) { freeze(r.serves[rand.IntN(len(r.serves))]) }},
		{"SIGSTOP a sked work", func(r *fenceRig) { freeze(r.works[rand.IntN(len(r.works))]) }},
		{"SIGTERM a node (a rolling restart)", func(r *fenceRig) {
			p := r.serves[rand.IntN(len(r.serves))]
			p.stop()
			p.start(r.t)
		}},
	}
	cycles := faultCycles(t, 2*len(kinds))
	for c := range cycles {
		time.Sleep(time.Duration(500+rand.IntN(1500)) * time.Millisecond) // pacing of the chaos
		f := kinds[c%len(kinds)]
		f.do(r.fenceRig)
		t.Logf("cycle %d: %s", c, f.name)
	}
	stop()
	r.drain()
}

// load starts the client's load on the rig until the returned func is
// called: two recurring jobs, creates of one-off jobs through random
// nodes and cancels of some of them at once (racing the claims), and, with
// controls, schedule controls of the recurring jobs through random nodes.
func (r *clusterRig) load(controls bool) (stop func()) {
	r.create("recurring-0", true)
	r.create("recurring-1", true)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the client's load: creates, and cancels racing the claims
		defer wg.Done()
		for n := 0; ctx.Err() == nil; n++ {
			r.create("k"+strconv.Itoa(n), false)
			r.mu.Lock()
			id := ""
			if len(r.acked) > 0 && rand.IntN(3) == 0 {
				id = r.acked[len(r.acked)-1]
			}
			r.mu.Unlock()
			if id != "" {
				r.cancel(id)
			}
			time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond) // pacing of the load
		}
	}()
	if controls {
		wg.Add(1)
		go func() { // schedule controls through random nodes
			defer wg.Done()
			for ctx.Err() == nil {
				r.control(r.recurring[rand.IntN(len(r.recurring))])
				time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond) // pacing of the load
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// drain ends the schedules, waits until every one-off job is final and
// judges the run (judge, rejudge).
func (r *clusterRig) drain() {
	t := r.t
	t.Helper()
	// End the schedules and wait until every one-off job is final.
	for _, id := range r.recurring {
		r.api("POST", "/jobs/"+id+"/resume", nil, nil)
		waitLong(t, "the recurring job to be cancelled", 2*time.Minute, func() bool {
			return r.cancel(id) == http.StatusNoContent
		})
	}
	waitLong(t, "every one-off job final", 5*time.Minute, func() bool {
		r.mu.Lock()
		ids := append([]string(nil), r.acked...)
		for id := range r.backfilled {
			ids = append(ids, id)
		}
		r.mu.Unlock()
		for _, id := range ids {
			var j db.Job
			if r.api("GET", "/jobs/"+id, nil, &j) != http.StatusOK || (j.State != db.StateDone && j.State != db.StateDead && j.State != db.StateCancelled) {
				return false
			}
		}
		return true
	})
	rep := r.judge()
	r.rejudge(&fenceStats{cycles: map[string]int{}})
	t.Logf("controls and cancels: %v; %d executions", r.counts, rep.Executions)
	if rep.Executions < 20 || rep.Slots == 0 {
		t.Errorf("the run did too little work to trust its verdict: %s", rep.Summary())
	}
}

// TestFaults_ClusterDatabaseOutage cuts the three nodes of a cluster off
// PostgreSQL, as a server stopped does (their connections end, new ones
// are refused), while a client creates and cancels one-off jobs through
// random nodes, two sked work claim through two of them and two recurring
// jobs fire: for three leases (every lease held runs out meanwhile), then
// for a quarter of one. While cut off, each node answers the API with a
// 503 problem+json and Retry-After and /readyz with 503, at once. Pass:
// without a restart the nodes and workers go on once the database is back
// (every job ends), and the checker finds no violation in what ran (no
// job ran twice at once, nothing acknowledged was lost, no stale write was
// taken, no slot ran twice).
func TestFaults_ClusterDatabaseOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("cuts a cluster off its database for a while")
	}
	r := newClusterRig(t, true)
	stop := r.load(false)
	for _, d := range []time.Duration{3 * fenceLease, fenceLease / 4} {
		r.awaitWork(10) // work under way when the database goes
		r.proxy.Cut()
		cut := time.Now()
		r.unavailable()
		time.Sleep(time.Until(cut.Add(d))) // the fault's length, not a wait for a condition
		r.proxy.Restore()
		t.Logf("cut off the database for %s", time.Since(cut).Round(time.Millisecond))
	}
	r.awaitWork(10) // and after it is back
	stop()
	r.drain()
}

// awaitWork waits until n more executions have started.
func (r *clusterRig) awaitWork(n int) {
	r.t.Helper()
	started := func() int {
		execs, _, _ := checker.ReadExecutions(r.execLog)
		return len(execs)
	}
	want := started() + n
	waitLong(r.t, fmt.Sprintf("%d more executions to start", n), 3*time.Minute, func() bool { return started() >= want })
}

// unavailable checks, while the database is cut off, that each node
// answers a read of the API 503 problem+json with Retry-After, and
// /readyz 503.
func (r *clusterRig) unavailable() {
	r.t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	for _, p := range r.serves {
		for _, path := range []string{"/jobs?limit=1", "/readyz"} {
			resp, err := c.Get("http://" + p.addr + path)
			if err != nil {
				r.t.Errorf("%s: GET %s with the database cut off: %v", p.name, path, err)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Content-Type") != "application/problem+json" ||
				(path != "/readyz" && resp.Header.Get("Retry-After") == "") {
				r.t.Errorf("%s: GET %s with the database cut off answered %d, %s, Retry-After %q: %s; want 503 problem+json with Retry-After",
					p.name, path, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Retry-After"), b)
			}
		}
	}
}
