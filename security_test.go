package main

import (
	"path/filepath"
	"strings"
	"testing"
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
