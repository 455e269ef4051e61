package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestRun_ServeRefusesExposedWithoutToken(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "sked.db")
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"serve", "--db", dbPath, "--addr", "0.0.0.0:0"},
		func(string) string { return "" }, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "beyond loopback") {
		t.Fatalf("serve on 0.0.0.0 without a token: %v, want a refusal", err)
	}
}

// authed sends a request with the bearer token.
func authed(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestServe_Operations runs a token-protected sked process with jobs
// flowing and checks what an operator touches: auth, health, metrics, and
// backups taken while jobs are created and run.
func TestServe_Operations(t *testing.T) {
	dir := t.TempDir()
	dbPath, addr := filepath.Join(dir, "sked.db"), freeAddr(t)
	startServe(t, dbPath, addr, "--token", "first,second", "--enable-exec", "--workers", "4")
	base := "http://" + addr
	getenv := func(string) string { return "" }

	// Auth and health.
	if code, b := authed(t, "GET", base+"/jobs", "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /jobs without a token: %d %s, want 401", code, b)
	}
	if code, b := authed(t, "GET", base+"/jobs", "second", ""); code != http.StatusOK {
		t.Errorf("GET /jobs with the second token: %d %s, want 200", code, b)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, b := authed(t, "GET", base+path, "", ""); code != http.StatusOK {
			t.Errorf("GET %s without a token: %d %s, want 200", path, code, b)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"healthcheck", "--addr", addr, "--ready"}, getenv, &out, io.Discard); err != nil {
		t.Errorf("sked healthcheck --ready: %v", err)
	}
	nobody := freeAddr(t)
	if err := run(context.Background(), []string{"healthcheck", "--addr", nobody}, getenv, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "nothing listens at "+nobody+"; is sked serve running") {
		t.Errorf("sked healthcheck of a port nobody listens on: %v", err)
	}

	// Jobs flow while backups are taken.
	var created atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 400; i++ {
			select {
			case <-stop:
				return
			default:
			}
			code, b := authed(t, "POST", base+"/jobs", "first", `{"type": "exec", "payload": {"command": ["true"]}}`)
			if code != http.StatusCreated {
				t.Errorf("POST /jobs: %d %s", code, b)
				return
			}
			created.Add(1)
		}
	}()
	for i := range 3 {
		before := created.Load()
		file := filepath.Join(dir, fmt.Sprintf("backup-%d.db", i))
		out.Reset()
		if err := run(context.Background(), []string{"backup", "--db", dbPath, file}, getenv, &out, io.Discard); err != nil {
			t.Fatalf("sked backup: %v", err)
		}
		after := created.Load()
		if !strings.Contains(out.String(), "wrote "+file) {
			t.Errorf("sked backup printed %q, want it to name %s", out.String(), file)
		}
		n := checkCopy(t, file)
		t.Logf("backup %d: %d jobs; %d created before it began, %d when it ended", i, n, before, after)
		if n < before || n > after {
			t.Errorf("backup %d holds %d jobs, want between %d (created before) and %d (after)", i, n, before, after)
		}
	}
	close(stop)
	wg.Wait()

	// An existing file is kept unless --force. A copy a killed backup left
	// beside it, unwritten for hours, is removed; one being written is not.
	file := filepath.Join(dir, "backup-0.db")
	stale, fresh := filepath.Join(dir, ".backup-0.db.tmp-999999"), filepath.Join(dir, ".backup-0.db.tmp-999998-journal")
	for _, f := range []string{stale, fresh} {
		if err := os.WriteFile(f, []byte("left"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(stale, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"backup", "--db", dbPath, file}, getenv, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "--force") {
		t.Errorf("backup over an existing file: %v, want a refusal naming --force", err)
	}
	if err := run(context.Background(), []string{"backup", "--db", dbPath, file, "--force"}, getenv, io.Discard, io.Discard); err != nil {
		t.Errorf("backup --force over an existing file: %v", err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stale copy a killed backup left: %v; want it removed", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a copy written an instant ago: %v; want it kept", err)
	}
	if n := checkCopy(t, file); n != created.Load() {
		t.Errorf("final backup holds %d jobs, want %d", n, created.Load())
	}
	missing := filepath.Join(dir, "no-such-dir")
	if err := run(context.Background(), []string{"backup", "--db", dbPath, filepath.Join(missing, "x.db")}, getenv, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "directory "+missing+" does not exist") {
		t.Errorf("backup into a missing directory: %v, want it named", err)
	}

	// The jobs ran, and /metrics says so.
	waitFor(t, "every job to be done", func() bool {
		_, b := authed(t, "GET", base+"/metrics", "first", "")
		fams := parseMetrics(t, b)
		for _, m := range fams["sked_jobs"].GetMetric() {
			if m.GetLabel()[0].GetValue() == "done" {
				return int64(m.GetGauge().GetValue()) == created.Load()
			}
		}
		return false
	})
	_, b := authed(t, "GET", base+"/metrics", "first", "")
	fams := parseMetrics(t, b)
	for _, m := range fams["sked_runs_total"].GetMetric() {
		if m.GetCounter().GetValue() != float64(created.Load()) {
			t.Errorf("sked_runs_total %v = %v, want %d", m.GetLabel(), m.GetCounter().GetValue(), created.Load())
		}
	}
	if got := fams["sked_start_lateness_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); got != uint64(created.Load()) {
		t.Errorf("sked_start_lateness_seconds count = %d, want %d", got, created.Load())
	}
}

// checkCopy opens a backup, runs integrity_check and returns its job count.
func checkCopy(t *testing.T, path string) int64 {
	t.Helper()
	d, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var res string
	if err := d.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check of %s: %q, %v", path, res, err)
	}
	var n int64
	if err := d.QueryRow(`SELECT count(*) FROM jobs`).Scan(&n); err != nil {
		t.Fatalf("count jobs in %s: %v", path, err)
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Errorf("%s has a -wal file: a backup is one self-contained file", path)
	}
	return n
}

func parseMetrics(t *testing.T, b []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, b)
	}
	return fams
}

// TestServe_AllowedHosts runs sked without a token and checks which Host
// names it answers: loopback ones and those of --allowed-hosts, not others
// (a DNS name rebound to 127.0.0.1 gets 403).
func TestServe_AllowedHosts(t *testing.T) {
	addr := freeAddr(t)
	startServe(t, filepath.Join(t.TempDir(), "sked.db"), addr, "--allowed-hosts", "sked.lan, proxy.example")
	_, port, _ := strings.Cut(addr, ":")
	for host, want := range map[string]int{
		addr: http.StatusOK, "localhost:" + port: http.StatusOK, "sked.lan:" + port: http.StatusOK, "proxy.example": http.StatusOK,
		"rebound.example:" + port: http.StatusForbidden, "sked.lan.evil.example": http.StatusForbidden,
	} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/jobs", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /jobs with Host %s: %d %s, want %d", host, resp.StatusCode, b, want)
		}
	}
}
