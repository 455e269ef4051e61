package dbtest

import (
	"slices"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

// testWorkers: a claim records its worker, whether or not it finds a job:
// first and last seen, and the types it asked for (none: any type). A
// worker claiming again within db.WorkerSeenEvery with the same types
// is not written again; other types, or a claim after that, are. A worker
// that stops claiming is listed until since passes it, and forgotten
// db.WorkerForgetAfter after its last claim. A worker that says it stopped
// is listed stopped until it claims again.
func testWorkers(_ *testing.T, f *fixture) {
	workers := func(since time.Time) []db.Worker {
		f.Helper()
		ws, err := f.Store.Workers(f.ctx, since)
		if err != nil {
			f.Fatalf("Workers: %v", err)
		}
		return ws
	}
	claim := func(worker string, types ...string) {
		f.Helper()
		if _, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: worker, Types: types, Max: 10}); err != nil {
			f.Fatalf("RunClaim: %v", err)
		}
	}
	if ws := workers(time.Time{}); len(ws) != 0 {
		f.Fatalf("Workers before any claim = %+v, want none", ws)
	}

	t0 := f.Clock.Now()
	claim("a", "mail", "exec", "mail") // finds nothing: still seen
	f.create(db.JobCreateParams{Type: "exec"})
	f.Clock.Advance(time.Second)
	claim("b") // any type; claims the job
	ws := workers(time.Time{})
	want := []db.Worker{
		{ID: "b", Types: []string{}, FirstSeen: t0.Add(time.Second), LastSeen: t0.Add(time.Second)},
		{ID: "a", Types: []string{"exec", "mail"}, FirstSeen: t0, LastSeen: t0},
	}
	if !slices.EqualFunc(ws, want, sameWorker) {
		f.Fatalf("Workers = %+v, want %+v (newest first)", ws, want)
	}

	// Within WorkerSeenEvery with the same types: not written again.
	f.Clock.Advance(db.WorkerSeenEvery - 2*time.Second)
	claim("a", "exec", "mail")
	if ws := workers(time.Time{}); !ws[1].LastSeen.Equal(t0) {
		f.Fatalf("a claimed again within %s: last seen %s, want it kept at %s", db.WorkerSeenEvery, ws[1].LastSeen, t0)
	}
	// Other types: written at once.
	claim("a", "http")
	at := f.Clock.Now()
	ws = workers(time.Time{})
	if ws[0].ID != "a" || !slices.Equal(ws[0].Types, []string{"http"}) || !ws[0].LastSeen.Equal(at) || !ws[0].FirstSeen.Equal(t0) {
		f.Fatalf("a claimed http: %+v, want types [http], last seen %s, first seen %s", ws[0], at, t0)
	}
	// Later, the same types: written again.
	f.Clock.Advance(db.WorkerSeenEvery)
	claim("a", "http")
	if ws := workers(time.Time{}); !ws[0].LastSeen.Equal(f.Clock.Now()) {
		f.Fatalf("a claimed %s later: last seen %s, want %s", db.WorkerSeenEvery, ws[0].LastSeen, f.Clock.Now())
	}

	// A worker that says it stopped is listed stopped, until it claims
	// again: that claim is recorded at once, and clears it.
	if err := f.Store.WorkerStopped(f.ctx, "a"); err != nil {
		f.Fatalf("WorkerStopped: %v", err)
	}
	if err := f.Store.WorkerStopped(f.ctx, "nobody"); err != nil {
		f.Fatalf("WorkerStopped of a worker with no record: %v", err)
	}
	if ws := workers(time.Time{}); ws[0].ID != "a" || ws[0].StoppedAt == nil || !ws[0].StoppedAt.Equal(f.Clock.Now()) || len(ws) != 2 {
		f.Fatalf("after a stopped: %+v, want a stopped at %s (and no record of nobody)", ws, f.Clock.Now())
	}
	f.Clock.Advance(time.Second)
	claim("a", "http")
	if ws := workers(time.Time{}); ws[0].StoppedAt != nil || !ws[0].LastSeen.Equal(f.Clock.Now()) {
		f.Fatalf("a claimed after it stopped: %+v, want it seen now and no longer stopped", ws[0])
	}

	// since leaves out who was last seen before it.
	if ws := workers(f.Clock.Now()); len(ws) != 1 || ws[0].ID != "a" {
		f.Fatalf("Workers since now = %+v, want a alone", ws)
	}
	// A week after b's last claim, the next recorded claim forgets b.
	f.Clock.Set(t0.Add(time.Second + db.WorkerForgetAfter + 10*time.Second)) // a was last seen 29 s after t0
	claim("c", "exec")
	ws = workers(time.Time{})
	if len(ws) != 2 || ws[0].ID != "c" || ws[1].ID != "a" {
		f.Fatalf("Workers a week on = %+v, want c then a (b forgotten)", ws)
	}
}

// sameWorker compares workers with their times as instants.
func sameWorker(a, b db.Worker) bool {
	return a.ID == b.ID && slices.Equal(a.Types, b.Types) && a.FirstSeen.Equal(b.FirstSeen) && a.LastSeen.Equal(b.LastSeen)
}
