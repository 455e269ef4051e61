package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

// moveClock moves the server's test clock and returns the new time.
func (c client) moveClock(body map[string]string) time.Time {
	c.t.Helper()
	code, b := c.do("POST", "/test/clock", body)
	if code != http.StatusOK {
		c.t.Fatalf("POST /test/clock %v: %d %s", body, code, b)
	}
	var r struct{ Now time.Time }
	json.Unmarshal(b, &r)
	return r.Now
}

// ledger reads a job's runs as "slot outcome[:reason]" strings, oldest
// first, with slots in UTC.
func (c client) ledger(id string) []string {
	c.t.Helper()
	runs := c.runs(id)
	out := make([]string, 0, len(runs))
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		s := fmt.Sprintf("%s %s", r.Slot.UTC().Format("01-02T15:04"), r.Outcome)
		if r.Reason != "" {
			s += ":" + r.Reason
		}
		out = append(out, s)
	}
	return out
}

// waitLedger waits until the job's ledger has n lines and returns it.
func (c client) waitLedger(id string, n int) []string {
	c.t.Helper()
	var l []string
	waitFor(c.t, fmt.Sprintf("%d ledger lines of %s", n, id), func() bool {
		l = c.ledger(id)
		return len(l) >= n && !contains(l, "running")
	})
	return l
}

func contains(lines []string, outcome string) bool {
	for _, l := range lines {
		if len(l) > 12 && l[12:] == outcome {
			return true
		}
	}
	return false
}

func wantLedger(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("ledger =\n%q\nwant\n%q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ledger =\n%q\nwant\n%q", got, want)
		}
	}
}

// TestServe_TestClock drives the real binary on a test clock through each
// way a slot can fail to run and checks that the ledger accounts for every
// slot exactly once: normal firings, downtime (the process stopped and
// started later), a forward clock step, a backward step (held, never fired
// twice), a pause, an operator's skip, and a DST spring-forward day.
func TestServe_TestClock(t *testing.T) {
	dir := t.TempDir()
	dbPath, addr := filepath.Join(dir, "sked.db"), freeAddr(t)
	start := time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)
	p := startServe(t, dbPath, addr, "--enable-exec", "--test-clock="+start.Format(time.RFC3339))
	c := client{t, "http://" + addr}
	if code, _ := c.do("GET", "/test/clock", nil); code != http.StatusOK {
		t.Fatalf("GET /test/clock = %d", code)
	}
	j := c.create(map[string]any{"type": "exec", "schedule": "0 * * * *", "payload": map[string]any{"command": []string{"true"}}})

	// 13:00 and 14:00 fire as the clock reaches them.
	c.moveClock(map[string]string{"set": "2026-03-07T13:00:00Z"})
	c.waitLedger(j.ID, 1)
	c.moveClock(map[string]string{"set": "2026-03-07T14:00:00Z"})
	wantLedger(t, c.waitLedger(j.ID, 2), "03-07T13:00 succeeded", "03-07T14:00 succeeded")

	// Downtime: sked stops at 14:30 and starts again at 18:10. run_once
	// runs 18:00 and records 15:00 to 17:00 as missed (downtime).
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	startServe(t, dbPath, addr, "--enable-exec", "--test-clock=2026-03-07T18:10:00Z")
	wantLedger(t, c.waitLedger(j.ID, 6), "03-07T13:00 succeeded", "03-07T14:00 succeeded",
		"03-07T15:00 missed:downtime", "03-07T16:00 missed:downtime", "03-07T17:00 missed:downtime", "03-07T18:00 succeeded")

	// A forward step of the clock while sked runs: the slots it jumps
	// over are missed as clock_step, the latest runs once.
	c.moveClock(map[string]string{"advance": "3h"}) // 21:10
	wantLedger(t, c.waitLedger(j.ID, 9)[6:], "03-07T19:00 missed:clock_step", "03-07T20:00 missed:clock_step", "03-07T21:00 succeeded")

	// A backward step: firing holds, /readyz says why, nothing fires
	// twice; once the clock passes 21:10 again, 22:00 fires once.
	c.moveClock(map[string]string{"set": "2026-03-07T19:30:00Z"})
	if code, b := c.do("GET", "/readyz", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while the clock guard holds = %d %s, want 503", code, b)
	}
	c.moveClock(map[string]string{"set": "2026-03-07T20:00:00Z"})
	c.moveClock(map[string]string{"set": "2026-03-07T21:00:00Z"})
	c.moveClock(map[string]string{"set": "2026-03-07T22:00:00Z"})
	if code, b := c.do("GET", "/readyz", nil); code != http.StatusOK {
		t.Fatalf("/readyz after the clock passed the held time = %d %s", code, b)
	}
	wantLedger(t, c.waitLedger(j.ID, 10)[9:], "03-07T22:00 succeeded")

	// Pause over 23:00 and 00:00, resume at 00:30: two slots missed
	// (paused). Skip the next (01:00) by hand: missed (skipped).
	if code, b := c.do("POST", "/jobs/"+j.ID+"/pause", map[string]string{"reason": "maintenance"}); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, b)
	}
	c.moveClock(map[string]string{"set": "2026-03-08T00:30:00Z"})
	if code, b := c.do("POST", "/jobs/"+j.ID+"/resume", nil); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, b)
	}
	if code, b := c.do("POST", "/jobs/"+j.ID+"/skip", nil); code != http.StatusOK {
		t.Fatalf("skip: %d %s", code, b)
	}
	c.moveClock(map[string]string{"set": "2026-03-08T02:00:00Z"})
	wantLedger(t, c.waitLedger(j.ID, 14)[10:], "03-07T23:00 missed:paused", "03-08T00:00 missed:paused",
		"03-08T01:00 missed:skipped", "03-08T02:00 succeeded")

	// Spring forward in New York: 02:30 local does not exist on 03-08
	// and fires once at 03:00 EDT (07:00Z).
	ny := c.create(map[string]any{"type": "exec", "schedule": "30 2 * * *", "timezone": "America/New_York",
		"payload": map[string]any{"command": []string{"true"}}})
	code, b := c.do("GET", "/jobs/"+ny.ID+"/preview?n=2", nil)
	var fires []struct{ UTC, Note string }
	json.Unmarshal(b, &fires)
	if code != http.StatusOK || len(fires) != 2 || fires[0].UTC != "2026-03-08T07:00:00Z" || fires[0].Note == "" || fires[1].Note != "" {
		t.Fatalf("preview = %d %s", code, b)
	}
	c.moveClock(map[string]string{"set": "2026-03-08T06:59:00Z"})
	c.moveClock(map[string]string{"set": "2026-03-08T07:00:00Z"})
	wantLedger(t, c.waitLedger(ny.ID, 1), "03-08T07:00 succeeded")
	if got := c.job(ny.ID); !got.Slot.Equal(time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC)) {
		t.Fatalf("next NY slot = %v, want 2026-03-09T06:30Z (02:30 EDT)", got.Slot)
	}
}

// TestServe_DeadMansSwitch lets a nightly job fail past its
// expectSuccessWithin on a test clock: each firing that gives up is told
// (run_gave_up), the job is marked quiet and that is told once, every
// notification a signed webhook.
func TestServe_DeadMansSwitch(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []map[string]any
	)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e map[string]any
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &e)
		e["signed"] = r.Header.Get("Sked-Signature") != ""
		mu.Lock()
		seen = append(seen, e)
		mu.Unlock()
	}))
	defer sink.Close()
	dir := t.TempDir()
	addr := freeAddr(t)
	// The sink is on loopback: the operator's own --notify targets are
	// called without --allow-private-targets.
	startServe(t, filepath.Join(dir, "sked.db"), addr, "--enable-exec", "--http-secret=s3cret",
		"--test-clock=2026-05-01T00:00:00Z", "--notify=webhook:"+sink.URL+"/hook")
	c := client{t, "http://" + addr}
	j := c.create(map[string]any{"type": "exec", "schedule": "0 1 * * *", "expectSuccessWithin": "26h", "maxAttempts": 1,
		"payload": map[string]any{"command": []string{"false"}}})
	c.moveClock(map[string]string{"set": "2026-05-01T01:00:00Z"})
	c.waitLedger(j.ID, 1)
	c.moveClock(map[string]string{"set": "2026-05-02T01:00:00Z"})
	c.waitLedger(j.ID, 2)
	if got := c.job(j.ID); got.QuietSince != nil {
		t.Fatalf("quiet inside the window: %v", got.QuietSince)
	}
	c.moveClock(map[string]string{"set": "2026-05-02T02:00:01Z"}) // 26h and a second after creation
	waitFor(t, "the job to be marked quiet", func() bool { return c.job(j.ID).QuietSince != nil })
	kinds := func() map[any]int {
		mu.Lock()
		defer mu.Unlock()
		n := map[any]int{}
		for _, e := range seen {
			if e["jobId"] == j.ID && e["signed"] == true {
				n[e["kind"]]++
			}
		}
		return n
	}
	waitFor(t, "the notifications", func() bool { n := kinds(); return n["schedule_quiet"] > 0 && n["run_gave_up"] >= 2 })
	if n := kinds(); len(seen) != 3 || n["schedule_quiet"] != 1 || n["run_gave_up"] != 2 {
		t.Fatalf("notifications = %v; want two signed run_gave_up and one schedule_quiet of job %s", seen, j.ID)
	}
}

// TestServe_DeadMansSwitchAfterDowntime stops a server for 59 hours, in
// which two nightly slots of a job watched for 26 hours pass, and starts it
// again on the same file: the job runs its latest slot (misfire run_once)
// and is never quiet, as it had no chance to run while sked was down.
func TestServe_DeadMansSwitchAfterDowntime(t *testing.T) {
	dir := t.TempDir()
	dbPath, addr := filepath.Join(dir, "sked.db"), freeAddr(t)
	p := startServe(t, dbPath, addr, "--enable-exec", "--test-clock=2026-05-01T00:00:00Z")
	c := client{t, "http://" + addr}
	j := c.create(map[string]any{"type": "exec", "schedule": "0 1 * * *", "expectSuccessWithin": "26h",
		"payload": map[string]any{"command": []string{"true"}}})
	c.moveClock(map[string]string{"set": "2026-05-01T01:00:00Z"})
	c.waitLedger(j.ID, 1)
	p.kill(dbPath)

	startServe(t, dbPath, addr, "--enable-exec", "--test-clock=2026-05-03T12:00:00Z")
	back := time.Date(2026, 5, 3, 12, 0, 0, 0, time.UTC)
	waitFor(t, "the latest slot to run", func() bool { s := c.job(j.ID).LastSuccessAt; return s != nil && !s.Before(back) })
	code, b := c.do("GET", "/jobs/"+j.ID+"/events", nil)
	if got := c.job(j.ID); code != http.StatusOK || strings.Contains(string(b), `"kind":"quiet"`) || got.QuietSince != nil {
		t.Fatalf("after the restart: quiet since %v, timeline %d %s; want never quiet", got.QuietSince, code, b)
	}
}

// TestServe_TestClockKeepsLiveLeases moves the test clock an hour forward
// while an exec job runs: the run's lease, renewed by its live worker,
// outlives the jump, and the job runs once. A job claimed by a worker that
// never renews (claimed by hand over POST /claims) has its lease expire on
// the same jump: lease expiry runs on the test clock too.
func TestServe_TestClockKeepsLiveLeases(t *testing.T) {
	dir := t.TempDir()
	addr, ev, gate := freeAddr(t), filepath.Join(dir, "evidence"), filepath.Join(dir, "gate")
	startServe(t, filepath.Join(dir, "sked.db"), addr, "--enable-exec", "--test-clock=2026-05-01T12:00:00Z")
	c := client{t, "http://" + addr}
	live := c.create(map[string]any{"type": "exec", "maxAttempts": 3, "payload": map[string]any{"command": []string{"sh", "-c",
		`echo "start:$SKED_GENERATION" >> ` + ev + `; while [ ! -e ` + gate + ` ]; do sleep 0.05; done; echo "end:$SKED_GENERATION" >> ` + ev}}})
	waitFor(t, "the exec job to start", func() bool { return len(evidence(t, ev)) == 1 })

	abandoned := c.create(map[string]any{"type": "remote", "maxAttempts": 3})
	if code, b := c.do("POST", "/claims", map[string]any{"workerId": "gone", "types": []string{"remote"}, "lease": "1s", "wait": "0s"}); code != http.StatusOK || !strings.Contains(string(b), abandoned.ID) {
		t.Fatalf("claim by hand: %d %s", code, b)
	}
	c.moveClock(map[string]string{"advance": "1h"})
	// The reaper's pass that expires the abandoned lease would expire the
	// live one too, were it not renewed across the jump.
	waitFor(t, "the abandoned lease to expire", func() bool {
		r := c.runs(abandoned.ID)
		return len(r) > 0 && r[len(r)-1].Outcome == db.OutcomeLeaseExpired
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.waitState(live.ID, db.StateDone)
	if got := strings.Join(evidence(t, ev), " "); got != "start:1 end:1" {
		t.Errorf("evidence = %q, want generation 1 alone, run once", got)
	}
	if r := c.runs(live.ID); len(r) != 1 || r[0].Outcome != db.OutcomeSucceeded || r[0].Generation != 1 {
		t.Errorf("runs = %+v, want generation 1 succeeded alone", r)
	}
}

// TestCLI_TimesToComeOnTheTestClock: `sked add --in` and `sked pause
// --until DURATION` count from the server's test clock, not this
// machine's: under --test-clock they landed years away from its now.
func TestCLI_TimesToComeOnTheTestClock(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	startServe(t, filepath.Join(dir, "sked.db"), addr, "--test-clock=2031-05-01T12:00:00Z")
	server := "http://" + addr
	if r := skedCLI(t, server, "add", "--type", "t", "--name", "later", "--in", "10m"); r.code != 0 {
		t.Fatalf("sked add --in: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := skedCLI(t, server, "add", "--type", "t", "--name", "nightly", "--schedule", "@daily"); r.code != 0 {
		t.Fatalf("sked add --schedule: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := skedCLI(t, server, "pause", "nightly", "--until", "2h"); r.code != 0 {
		t.Fatalf("sked pause --until: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c := client{t, server}
	if j := c.job("later"); j.NextRunAt == nil || !j.NextRunAt.Equal(time.Date(2031, 5, 1, 12, 10, 0, 0, time.UTC)) {
		t.Errorf("sked add --in 10m: due %v; want 10 minutes after the test clock's 12:00", j.NextRunAt)
	}
	if j := c.job("nightly"); j.PauseUntil == nil || !j.PauseUntil.Equal(time.Date(2031, 5, 1, 14, 0, 0, 0, time.UTC)) {
		t.Errorf("sked pause --until 2h: until %v; want 2 hours after the test clock's 12:00", j.PauseUntil)
	}
}
