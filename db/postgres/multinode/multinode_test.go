// Package multinode_test runs three `sked serve` processes on one PostgreSQL
// database, kills and restarts them at random, and checks sked's
// guarantees (docs/semantics.md) on what they did: no job lost, no job run concurrently, each
// recurring slot run once.
package multinode_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/internal/skedbin"
)

// skedBin is the sked binary, built by TestMain.
var skedBin string

func TestMain(m *testing.M) { skedbin.Main(m, &skedBin) }

// node is one sked serve process of the cluster.
type node struct {
	t    *testing.T
	url  string // the database
	dir  string // logs
	n    int
	addr string
	cmd  *exec.Cmd
	log  *os.File
}

func (nd *node) start() {
	nd.t.Helper()
	nd.addr = freeAddr(nd.t)
	log, err := os.OpenFile(filepath.Join(nd.dir, fmt.Sprintf("node%d.log", nd.n)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		nd.t.Fatal(err)
	}
	nd.log = log
	nd.cmd = exec.Command(skedBin, "serve", "--db", nd.url, "--addr", nd.addr, "--enable-exec",
		"--lease", "2s", "--workers", "4", "--grace", "1s")
	nd.cmd.Stdout, nd.cmd.Stderr = log, log
	if err := nd.cmd.Start(); err != nil {
		nd.t.Fatal(err)
	}
	waitFor(nd.t, fmt.Sprintf("node %d to serve", nd.n), func() bool {
		resp, err := http.Get("http://" + nd.addr + "/jobs?limit=1")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// kill SIGKILLs the node: no graceful shutdown, its leases are left to
// expire.
func (nd *node) kill() {
	if nd.cmd.ProcessState != nil {
		return // already gone
	}
	nd.cmd.Process.Signal(syscall.SIGKILL)
	nd.cmd.Wait()
	nd.log.Close()
}

// post sends a JSON request and decodes the answer into out.
func post(addr, path string, body, out any) (int, error) {
	b, _ := json.Marshal(body)
	resp, err := http.Post("http://"+addr+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", data, err)
		}
	}
	return resp.StatusCode, nil
}

func get(addr, path string, out any) error {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// TestCluster_KillAndRestart enqueues exec jobs through all three nodes
// while nodes are SIGKILLed and restarted at random. Every job must end
// done with exactly one succeeded run, its executions (the start/end lines
// each appends to an evidence file, with its lease generation) must never
// overlap, and a recurring job's slots must each succeed at most once.
func TestCluster_KillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes for about half a minute")
	}
	url := postgrestest.URL(t)
	dir := t.TempDir()
	evidence := filepath.Join(dir, "evidence")
	nodes := make([]*node, 3)
	t.Cleanup(func() {
		for _, nd := range nodes {
			if nd != nil && nd.cmd != nil {
				nd.kill()
			}
		}
		if t.Failed() {
			for i := range nodes {
				b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("node%d.log", i)))
				t.Logf("node %d log (tail):\n%s", i, tailLines(string(b), 30))
			}
		}
	})
	for i := range nodes {
		nodes[i] = &node{t: t, url: url, dir: dir, n: i}
		nodes[i].start()
	}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	t.Logf("evidence in %s", evidence)

	script := `echo "start $SKED_JOB_ID $SKED_GENERATION" >> "$0"; sleep 1; echo "end $SKED_JOB_ID $SKED_GENERATION" >> "$0"`
	var ids []string
	// enqueue creates n jobs, each through a random live node.
	enqueue := func(n int) {
		for range n {
			var j db.Job
			nd := nodes[rnd.IntN(len(nodes))]
			code, err := post(nd.addr, "/jobs", map[string]any{
				"type": "exec", "maxAttempts": 20, "backoff": "100ms",
				"payload": map[string]any{"command": []string{"sh", "-c", script, evidence}},
			}, &j)
			if err != nil || code != http.StatusCreated {
				t.Fatalf("create through node %d: %d %v", nd.n, code, err)
			}
			ids = append(ids, j.ID)
		}
	}
	var recurring db.Job
	if code, err := post(nodes[0].addr, "/jobs", map[string]any{
		"type": "exec", "schedule": "@every 1s", "maxAttempts": 3,
		"payload": map[string]any{"command": []string{"true"}},
	}, &recurring); err != nil || code != http.StatusCreated {
		t.Fatalf("create recurring job: %d %v", code, err)
	}

	// Chaos, bounded: each cycle enqueues through the live nodes, lets them
	// work for a random moment, then kills one node and brings it back.
	const cycles = 12
	for c := range cycles {
		enqueue(20)
		time.Sleep(time.Duration(100+rnd.IntN(500)) * time.Millisecond) // pacing of the chaos, not a wait for a condition
		victim := nodes[rnd.IntN(len(nodes))]
		victim.kill()
		t.Logf("cycle %d: killed node %d", c, victim.n)
		victim.start()
	}

	waitFor(t, "every job done", func() bool {
		for _, id := range ids {
			var j db.Job
			if err := get(nodes[rnd.IntN(len(nodes))].addr, "/jobs/"+id, &j); err != nil || j.State != db.StateDone {
				return false
			}
		}
		return true
	})

	expired := 0
	for _, id := range ids {
		var runs []db.Run
		if err := get(nodes[0].addr, "/jobs/"+id+"/runs?limit=500", &runs); err != nil {
			t.Fatal(err)
		}
		succeeded := 0
		for _, r := range runs {
			switch r.Outcome {
			case db.OutcomeSucceeded:
				succeeded++
			case db.OutcomeLeaseExpired:
				expired++
			}
		}
		if succeeded != 1 {
			t.Errorf("job %s: %d succeeded runs, want 1: %+v", id, succeeded, runs)
		}
	}
	checkEvidence(t, evidence, ids)

	var slotRuns []db.Run
	if err := get(nodes[0].addr, "/jobs/"+recurring.ID+"/runs?limit=500", &slotRuns); err != nil {
		t.Fatal(err)
	}
	succeededAt := map[time.Time]int{}
	for _, r := range slotRuns {
		if r.Outcome == db.OutcomeSucceeded && r.Slot != nil {
			succeededAt[r.Slot.UTC()]++
		}
	}
	for slot, n := range succeededAt {
		if n > 1 {
			t.Errorf("recurring slot %s succeeded %d times", slot, n)
		}
	}
	if len(succeededAt) == 0 {
		t.Errorf("the recurring job never succeeded: %+v", slotRuns)
	}
	t.Logf("%d jobs done through %d kills (%d runs lost with their node and reaped); recurring job: %d slots succeeded, %d runs in all",
		len(ids), cycles, expired, len(succeededAt), len(slotRuns))
}

// checkEvidence reads the start/end lines and fails when two executions of
// one job overlap (a start while another generation is between its start
// and its end) or a job never completed an execution. An execution without
// an end was killed with its node.
func checkEvidence(t *testing.T, path string, ids []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	open := map[string]string{}  // job → generation started and not yet ended
	lastEnd := map[string]bool{} // job → some execution ended
	starts := map[string]map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			t.Fatalf("evidence line %q", sc.Text())
		}
		what, job, gen := fields[0], fields[1], fields[2]
		switch what {
		case "start":
			if starts[job] == nil {
				starts[job] = map[string]bool{}
			}
			if starts[job][gen] {
				t.Errorf("job %s: generation %s started twice", job, gen)
			}
			starts[job][gen] = true
			open[job] = gen
		case "end":
			if open[job] != gen {
				t.Errorf("job %s: generation %s ended while generation %q was running", job, gen, open[job])
			}
			delete(open, job)
			lastEnd[job] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !lastEnd[id] {
			t.Errorf("job %s: no completed execution in the evidence", id)
		}
	}
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

// waitFor polls cond until it holds, failing the test after 60 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
