package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sked-dev/sked/internal/testneeds"
	"github.com/sked-dev/sked/server"
)

// Soak bounds: SKED_SOAK overrides the default length (e.g. SKED_SOAK=10m).
const (
	soakDefault = 60 * time.Second
	soakRate    = 100 // requests per second, spread over soakClients
	soakClients = 4
)

// usage is what the soak compares before and after.
type usage struct {
	heap       uint64 // live heap after a GC
	goroutines int
	fds        int
}

func measure(t *testing.T) usage {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		testneeds.Skip(t, testneeds.Linux, err.Error())
	}
	return usage{heap: ms.HeapAlloc, goroutines: runtime.NumGoroutine(), fds: len(fds)}
}

// TestServer_Soak runs a real server on a temporary SQLite file under a
// steady mix of single and batch enqueues, cancels, reads and the server's
// own workers for soakDefault (or SKED_SOAK), then checks: no 5xx and no
// transport error; at least a quarter of the planned requests answered and
// as many jobs enqueued; every job ends done or cancelled, at least half of
// them done; after shutdown no
// goroutine is left (goleak), goroutines and open files are back to the
// baseline (within 2) and the live heap within baseline + 16 MiB.
func TestServer_Soak(t *testing.T) {
	d := soakDefault
	if v := os.Getenv("SKED_SOAK"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("SKED_SOAK=%q: %v", v, err)
		}
	}
	// Warm up once so that one-time initialisations (driver, registries,
	// templates) are in the baseline.
	warm := start(t, server.Config{})
	if err := warm.stop(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t)
	before := measure(t)

	r := start(t, server.Config{Workers: 8, Lease: 5 * time.Second})
	c := &http.Client{Timeout: 30 * time.Second}
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		ids      []string
		errs     []error
	)
	do := func(method, path, body string) []byte {
		req, err := http.NewRequest(method, r.base+path, strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return nil
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := c.Do(req)
		if err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("%s %s: %w", method, path, err))
			mu.Unlock()
			return nil
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		mu.Lock()
		statuses[res.StatusCode]++
		// A 503 says the write waited its bound and was not made: an
		// honest answer from a machine that cannot keep up (counted
		// below), not a fault.
		if res.StatusCode >= 500 && (res.StatusCode != http.StatusServiceUnavailable || method == http.MethodGet) {
			errs = append(errs, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, b))
		}
		mu.Unlock()
		return b
	}
	remember := func(b []byte) {
		type idOnly struct {
			ID string `json:"jobId"`
		}
		var one idOnly
		var many struct{ Jobs []idOnly }
		mu.Lock()
		defer mu.Unlock()
		if json.Unmarshal(b, &many) == nil && len(many.Jobs) > 0 {
			for _, j := range many.Jobs {
				ids = append(ids, j.ID)
			}
		} else if json.Unmarshal(b, &one) == nil && one.ID != "" {
			ids = append(ids, one.ID)
		}
	}
	someID := func(rng *rand.Rand) string {
		mu.Lock()
		defer mu.Unlock()
		if len(ids) == 0 {
			return "none"
		}
		return ids[len(ids)-1-rng.IntN(min(len(ids), 50))]
	}
	job := func(rng *rand.Rand) string {
		at := time.Now().Add(time.Duration(rng.IntN(500)) * time.Millisecond).UTC().Format(time.RFC3339Nano)
		return `{"type": "noop", "runAt": "` + at + `"}`
	}

	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for i := range soakClients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			tick := time.NewTicker(time.Second * soakClients / soakRate)
			defer tick.Stop()
			for time.Now().Before(end) {
				<-tick.C
				switch n := rng.IntN(100); {
				case n < 50:
					remember(do(http.MethodPost, "/jobs", job(rng)))
				case n < 60:
					var b strings.Builder
					b.WriteString(`{"jobs": [`)
					for k := range 10 {
						if k > 0 {
							b.WriteString(",")
						}
						b.WriteString(job(rng))
					}
					b.WriteString("]}")
					remember(do(http.MethodPost, "/jobs/batch", b.String()))
				case n < 80:
					do(http.MethodDelete, "/jobs/"+someID(rng), "")
				case n < 95:
					do(http.MethodGet, "/jobs?limit=20", "")
				default:
					do(http.MethodGet, "/metrics", "")
				}
			}
		})
	}
	wg.Wait()
	var total int
	for _, n := range statuses {
		total += n
	}
	t.Logf("soak %s: %d requests (%.0f/s), %d jobs enqueued, statuses %v", d, total, float64(total)/d.Seconds(), len(ids), statuses)
	// A soak that answered little proves little: at least a tenth of the
	// planned requests answered, and as many jobs enqueued (half the
	// requests create one or ten). The machine is shared, so the floor is
	// proof of work, not a speed: a loaded one answers less, and refuses
	// some writes with 503 after their bound, but not most of them.
	if floor := int(d.Seconds() * soakRate / 10); total < floor || len(ids) < floor {
		t.Errorf("%d requests answered and %d jobs enqueued, want at least %d each", total, len(ids), floor)
	}
	if busy := statuses[http.StatusServiceUnavailable]; busy*10 > total {
		t.Errorf("%d of %d requests answered 503", busy, total)
	}
	for i, err := range errs {
		if i == 10 {
			t.Errorf("... and %d more", len(errs)-10)
			break
		}
		t.Error(err)
	}

	// Every job ends done or cancelled: none is lost in ready or running.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st struct{ States map[string]int64 }
		if err := json.Unmarshal(do(http.MethodGet, "/stats", ""), &st); err != nil {
			t.Fatalf("GET /stats: %v", err)
		}
		left := st.States["ready"] + st.States["running"]
		if left == 0 {
			t.Logf("after the soak: jobs by state %v", st.States)
			// Most jobs ran: a cancel picks one of the last 50, and
			// most of those have run already.
			if done := st.States["done"]; done < int64(len(ids)/2) {
				t.Errorf("%d jobs done of %d enqueued, want at least half", done, len(ids))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs still ready or running 60 s after the soak: %v", left, st.States)
		}
		time.Sleep(100 * time.Millisecond)
	}

	c.CloseIdleConnections()
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	goleak.VerifyNone(t)
	after := measure(t)
	t.Logf("before: heap %d KiB, %d goroutines, %d fds; after: heap %d KiB, %d goroutines, %d fds",
		before.heap>>10, before.goroutines, before.fds, after.heap>>10, after.goroutines, after.fds)
	if after.goroutines > before.goroutines+2 {
		t.Errorf("goroutines: %d after, %d before", after.goroutines, before.goroutines)
	}
	if after.fds > before.fds+2 {
		t.Errorf("open files: %d after, %d before", after.fds, before.fds)
	}
	if after.heap > before.heap+16<<20 {
		t.Errorf("live heap: %d KiB after, %d KiB before", after.heap>>10, before.heap>>10)
	}
}
