package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
)

// TestServe_ExecOffByDefault: sked serve without --enable-exec refuses exec
// jobs with 422 naming the flag, and stores nothing.
func TestServe_ExecOffByDefault(t *testing.T) {
	addr := freeAddr(t)
	startServe(t, filepath.Join(t.TempDir(), "sked.db"), addr)
	c := client{t: t, base: "http://" + addr}
	code, body := c.do("POST", "/jobs", map[string]any{"type": "exec", "payload": map[string]any{"command": []string{"true"}}})
	if code != 422 || !strings.Contains(string(body), "--enable-exec") {
		t.Fatalf("create exec job: %d %s, want 422 naming --enable-exec", code, body)
	}
	if code, body := c.do("GET", "/jobs", nil); code != 200 || !strings.Contains(string(body), `"jobs":[]`) {
		t.Fatalf("jobs after the refused create: %d %s, want none", code, body)
	}
}

// TestServe_WALMetric: a SQLite server exports the WAL's size and its
// checkpoints on /metrics.
func TestServe_WALMetric(t *testing.T) {
	addr := freeAddr(t)
	startServe(t, filepath.Join(t.TempDir(), "sked.db"), addr)
	c := client{t: t, base: "http://" + addr}
	code, body := c.do("GET", "/metrics", nil)
	for _, want := range []string{"\nsked_wal_bytes ", `sked_wal_checkpoints_total{result="busy"} 0`} {
		if code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET /metrics: %d, want a line %q", code, want)
		}
	}
}

// TestExec_SecretsStayOut: commands run by sked serve and by sked work get
// a clean environment: no SKED_TOKEN, SKED_HTTP_SECRET or other variable of
// sked's own, unless the operator passes it with --exec-env.
func TestExec_SecretsStayOut(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	t.Setenv("PASSED", "passed-on")
	t.Setenv("UNRELATED_SECRET", "unrelated-secret")
	t.Setenv("SKED_HTTP_SECRET", "hmac-secret")
	startServe(t, filepath.Join(dir, "sked.db"), addr, "--enable-exec", "--exec-env", "PASSED")
	c := client{t: t, base: "http://" + addr}

	work := exec.Command(skedBin, "work", "--server", "http://"+addr, "--type", "printenv", "--exec-env", "PASSED", "--", "env")
	work.Env = append(os.Environ(), "SKED_TOKEN=worker-token") // what sked work authenticates with
	if err := work.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { work.Process.Kill(); work.Wait() })
	for name, j := range map[string]db.Job{
		"sked serve": c.create(map[string]any{"type": "exec", "payload": map[string]any{"command": []string{"env"}}}),
		"sked work":  c.create(map[string]any{"type": "printenv"}),
	} {
		c.waitState(j.ID, db.StateDone)
		out := c.runs(j.ID)[0].Output
		for _, secret := range []string{"worker-token", "hmac-secret", "unrelated-secret"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: a command saw %q:\n%s", name, secret, out)
			}
		}
		if !strings.Contains(out, "PASSED=passed-on") || !strings.Contains(out, "SKED_JOB_ID="+j.ID) {
			t.Errorf("%s: the command's environment lacks PASSED or SKED_JOB_ID:\n%s", name, out)
		}
	}
}
