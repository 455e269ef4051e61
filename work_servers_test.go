package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestWork_ServersFailover runs two sked serve nodes on one PostgreSQL
// schema and one `sked work --server A,B` with a short lease; node A, the
// one it claimed through, is killed with SIGKILL, or stopped with SIGTERM
// and a --grace shorter than the run, while the run goes on.
// The worker's heartbeats and completion reach node B instead: the job
// ends done with one succeeded run, its one execution ended by itself, and
// no lease expired.
func TestWork_ServersFailover(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dsn := postgrestest.URL(t)
			dir := t.TempDir()
			a, b, ev := freeAddr(t), freeAddr(t), filepath.Join(dir, "evidence")
			nodeA := startServe(t, dsn, a, "--grace", "1s")
			startServe(t, dsn, b)
			// startWork puts "http://" before its address: this one is a list.
			w := startWork(t, a+",http://"+b, "evid", ev, "--lease", "2s")
			c := client{t, "http://" + b}
			j := c.create(map[string]any{"type": "evid", "payload": map[string]any{"sleep": "4"}, "maxAttempts": 3, "backoff": "100ms"})
			waitFor(t, "the run to start", func() bool { return len(readExecutions(t, ev)) > 0 })

			nodeA.cmd.Process.Signal(sig)
			nodeA.cmd.Wait()
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("sked work's log:\n%s", w.log())
				}
			})
			waitLong(t, "the job to be done", 30*time.Second, func() bool { return c.job(j.ID).State == db.StateDone })

			runs := c.runs(j.ID)
			if len(runs) != 1 || runs[0].Outcome != db.OutcomeSucceeded {
				t.Errorf("runs: got %+v, want one, succeeded", runs)
			}
			if execs := readExecutions(t, ev); len(execs) != 1 || execs[0].ended != "ok" {
				t.Errorf("executions: got %v, want one that ended ok", execs)
			}
			stopGracefully(t, w.proc)
			if log := w.log(); !strings.Contains(log, "moved to another server") || !strings.Contains(log, "server=http://"+b) {
				t.Error("the worker did not log its move to node B")
			}
		})
	}
}
