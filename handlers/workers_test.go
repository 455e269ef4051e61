package handlers

import (
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// TestHandler_Workers claims jobs for two workers over HTTP, renews one
// lease and finishes one worker's job, and checks that GET /workers shows
// each worker that holds jobs with those jobs, their live runs, its last
// claim and its latest lease end, the newest claim first; and that a
// worker that holds nothing is listed, with the types it claims, for an
// hour after its last claim.
func TestHandler_Workers(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	workers := func(t *testing.T) wire.WorkersResponse {
		t.Helper()
		res := e.do(http.MethodGet, "/workers", "")
		res.wantStatus(t, http.StatusOK)
		var got wire.WorkersResponse
		res.decode(t, &got)
		return got
	}
	if got := workers(t); len(got.Workers) != 0 || got.Workers == nil || got.Truncated {
		t.Fatalf("with nothing running: got %+v, want an empty list", got)
	}

	a := e.create(`{"type": "thumb", "name": "resize-a"}`, http.StatusCreated)
	b := e.create(`{"type": "thumb", "name": "resize-b"}`, http.StatusCreated)
	c := e.create(`{"type": "mail", "name": "send-c"}`, http.StatusCreated)
	e.create(`{"type": "idle"}`, http.StatusCreated)

	clock := testNow
	e.store.NowFunc = func() time.Time { return clock }
	res := e.do(http.MethodPost, "/claims", `{"workerId": "box1/7", "types": ["thumb"], "max": 5, "lease": "1h", "wait": "0s"}`)
	res.wantStatus(t, http.StatusOK)
	var box1 wire.ClaimResponse
	res.decode(t, &box1)
	clock = testNow.Add(time.Minute)
	mail := e.claimOne(`{"workerId": "box2/9", "types": ["mail"], "lease": "1h", "wait": "0s"}`)
	clock = testNow.Add(2 * time.Minute)
	e.do(http.MethodPost, "/jobs/"+a.ID+"/heartbeat", `{"generation": 1, "lease": "2h"}`).wantStatus(t, http.StatusOK)

	got := workers(t)
	if len(got.Workers) != 2 || got.Workers[0].WorkerID != "box2/9" || got.Workers[1].WorkerID != "box1/7" {
		t.Fatalf("workers: got %+v, want box2/9 (newest claim) then box1/7", got.Workers)
	}
	w2, w1 := got.Workers[0], got.Workers[1]
	if w2.LastClaimAt == nil || !w2.LastClaimAt.Equal(testNow.Add(time.Minute)) ||
		w2.LeaseUntil == nil || !w2.LeaseUntil.Equal(testNow.Add(time.Minute+time.Hour)) {
		t.Errorf("box2/9: lastClaimAt %v, leaseUntil %v; want the claim a minute in and its lease of an hour", w2.LastClaimAt, w2.LeaseUntil)
	}
	if len(w2.Running) != 1 || w2.Running[0].Job.ID != c.ID || w2.Running[0].Job.Name != "send-c" ||
		w2.Running[0].Run == nil || w2.Running[0].Run.ID != mail.RunID {
		t.Errorf("box2/9 runs %+v; want job %s with run %d", w2.Running, c.ID, mail.RunID)
	}
	if w1.LastClaimAt == nil || !w1.LastClaimAt.Equal(testNow) ||
		w1.LeaseUntil == nil || !w1.LeaseUntil.Equal(testNow.Add(2*time.Minute+2*time.Hour)) {
		t.Errorf("box1/7: lastClaimAt %v, leaseUntil %v; want the first claim and the lease the heartbeat extended", w1.LastClaimAt, w1.LeaseUntil)
	}
	runOf := map[string]int64{}
	for _, cl := range box1.Claims {
		runOf[cl.ID] = cl.RunID
	}
	if len(w1.Running) != 2 || len(runOf) != 2 {
		t.Fatalf("box1/7 runs %+v; want jobs %s and %s", w1.Running, a.ID, b.ID)
	}
	for _, wj := range w1.Running {
		if wj.Run == nil || runOf[wj.Job.ID] == 0 || wj.Run.ID != runOf[wj.Job.ID] || wj.Run.WorkerID != "box1/7" {
			t.Errorf("box1/7 holds %s with run %+v; want its claimed run", wj.Job.ID, wj.Run)
		}
	}

	if !slices.Equal(w1.Types, []string{"thumb"}) || !slices.Equal(w2.Types, []string{"mail"}) ||
		w1.FirstSeenAt == nil || !w1.FirstSeenAt.Equal(testNow) || w2.LastSeenAt == nil || !w2.LastSeenAt.Equal(testNow.Add(time.Minute)) {
		t.Errorf("box1/7 types %v first seen %v, box2/9 types %v last seen %v; want [thumb] at the start, [mail] a minute in",
			w1.Types, w1.FirstSeenAt, w2.Types, w2.LastSeenAt)
	}

	e.do(http.MethodPost, "/jobs/"+c.ID+"/complete", `{"generation": 1, "outcome": "succeeded"}`).wantStatus(t, http.StatusOK)
	e.do(http.MethodPost, "/claims", `{"workerId": "box3/1", "types": ["idle"], "wait": "0s"}`).wantStatus(t, http.StatusOK)
	got = workers(t)
	if len(got.Workers) != 3 || got.Workers[0].WorkerID != "box3/1" || got.Workers[1].WorkerID != "box2/9" ||
		len(got.Workers[1].Running) != 0 || got.Workers[1].Running == nil {
		t.Fatalf("after box2/9's job finished: got %+v, want box3/1, then box2/9 holding nothing, then box1/7", got.Workers)
	}
	if w3 := got.Workers[0]; !slices.Equal(w3.Types, []string{"idle"}) || len(w3.Running) != 1 {
		t.Errorf("box3/1: types %v, running %+v; want [idle] and the idle job", w3.Types, w3.Running)
	}

	// box2/9 shuts down and says so; it is listed stopped.
	e.do(http.MethodPost, "/workers/stopped", `{"workerId": "box2/9"}`).wantStatus(t, http.StatusNoContent)
	e.do(http.MethodPost, "/workers/stopped", `{}`).wantStatus(t, http.StatusUnprocessableEntity)
	e.do(http.MethodPost, "/workers/stopped", `{"workerId": "serve:box/1"}`).wantStatus(t, http.StatusUnprocessableEntity)
	got = workers(t)
	if w2 := got.Workers[1]; w2.WorkerID != "box2/9" || w2.StoppedAt == nil || !w2.StoppedAt.Equal(clock) {
		t.Errorf("box2/9 after it said it stopped: %+v, want stoppedAt %s", w2, clock)
	}

	clock = testNow.Add(time.Minute + workersSeenWithin + time.Second)
	got = workers(t)
	if len(got.Workers) != 2 || got.Workers[0].WorkerID != "box3/1" || got.Workers[1].WorkerID != "box1/7" {
		t.Fatalf("over an hour after box2/9's last claim: got %+v, want box3/1 (holds a job) and box1/7 (holds two)", got.Workers)
	}
	// box1/7 last claimed over an hour ago, busy since: its record still
	// says what it claims.
	if w1 := got.Workers[1]; !slices.Equal(w1.Types, []string{"thumb"}) || w1.LastSeenAt == nil || !w1.LastSeenAt.Equal(testNow) {
		t.Errorf("box1/7 an hour on: types %v, last seen %v; want [thumb] and its claim at the start", w1.Types, w1.LastSeenAt)
	}
	if got.SeenWithin != db.Duration(workersSeenWithin) {
		t.Errorf("seenWithin %v, want %v", got.SeenWithin, workersSeenWithin)
	}
}

// TestHandler_WorkersSilent: GET /workers marks silent a worker that holds
// nothing, has not said it stopped and has not claimed for over
// wire.SilentAfter (one killed, or cut off from the server), and no other.
func TestHandler_WorkersSilent(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	clock := testNow
	e.store.NowFunc = func() time.Time { return clock }
	e.create(`{"type": "held"}`, http.StatusCreated)
	e.do(http.MethodPost, "/claims", `{"workerId": "idle/1", "types": ["none"], "wait": "0s"}`).wantStatus(t, http.StatusOK)
	e.do(http.MethodPost, "/claims", `{"workerId": "busy/2", "types": ["held"], "lease": "1h", "wait": "0s"}`).wantStatus(t, http.StatusOK)
	e.do(http.MethodPost, "/claims", `{"workerId": "gone/3", "types": ["none"], "wait": "0s"}`).wantStatus(t, http.StatusOK)
	e.do(http.MethodPost, "/workers/stopped", `{"workerId": "gone/3"}`).wantStatus(t, http.StatusNoContent)
	silent := func(t *testing.T) map[string]bool {
		t.Helper()
		res := e.do(http.MethodGet, "/workers", "")
		res.wantStatus(t, http.StatusOK)
		var got wire.WorkersResponse
		res.decode(t, &got)
		m := map[string]bool{}
		for _, w := range got.Workers {
			m[w.WorkerID] = w.Silent
		}
		return m
	}
	clock = testNow.Add(wire.SilentAfter)
	if got, want := silent(t), map[string]bool{"idle/1": false, "busy/2": false, "gone/3": false}; !maps.Equal(got, want) {
		t.Errorf("%s after their claims: silent %v, want %v", wire.SilentAfter, got, want)
	}
	clock = testNow.Add(wire.SilentAfter + time.Second)
	if got, want := silent(t), map[string]bool{"idle/1": true, "busy/2": false, "gone/3": false}; !maps.Equal(got, want) {
		t.Errorf("a second later: silent %v, want %v (only the one holding nothing that did not say it stopped)", got, want)
	}
	e.do(http.MethodPost, "/claims", `{"workerId": "idle/1", "types": ["none"], "wait": "0s"}`).wantStatus(t, http.StatusOK)
	if got := silent(t); got["idle/1"] {
		t.Errorf("idle/1 after it claimed again: silent")
	}
}

// TestHandler_WorkersSilentPastThePage: a worker whose only job is past the
// page of running jobs GET /workers reads (more jobs run than MaxPageLimit)
// is listed with it and not marked silent, though it has not claimed for
// longer than wire.SilentAfter: its slots are full of long runs.
func TestHandler_WorkersSilentPastThePage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	clock := testNow
	e.store.NowFunc = func() time.Time { return clock }
	ctx := t.Context()
	claim := func(worker, typ string, n int) {
		t.Helper()
		for n > 0 {
			claimed, err := e.store.RunClaim(ctx, db.RunClaimParams{WorkerID: worker, Types: []string{typ}, Max: min(n, wire.MaxClaim), Lease: time.Hour})
			if err != nil || len(claimed) == 0 {
				t.Fatalf("claim of %s by %s: %d jobs, %v", typ, worker, len(claimed), err)
			}
			n -= len(claimed)
		}
	}
	e.create(`{"type": "long"}`, http.StatusCreated)
	claim("slow/1", "long", 1)
	clock = clock.Add(wire.SilentAfter + time.Second)
	batch := make([]db.JobCreateParams, MaxPageLimit)
	for i := range batch {
		batch[i] = db.JobCreateParams{Type: "short"}
	}
	if _, err := e.store.JobCreateBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	claim("fast/2", "short", MaxPageLimit) // newer than slow/1's: the whole page

	res := e.do(http.MethodGet, "/workers", "")
	res.wantStatus(t, http.StatusOK)
	var got wire.WorkersResponse
	res.decode(t, &got)
	if !got.Truncated {
		t.Fatalf("GET /workers with %d running jobs is not truncated", MaxPageLimit+1)
	}
	i := slices.IndexFunc(got.Workers, func(w wire.Worker) bool { return w.WorkerID == "slow/1" })
	if i < 0 {
		t.Fatalf("slow/1, whose job is past the page, is not listed: %+v", got.Workers)
	}
	if w := got.Workers[i]; w.Silent || len(w.Running) != 1 || w.Running[0].Job.Type != "long" || w.Running[0].Run == nil {
		t.Errorf("slow/1 holding a job past the page: silent %v, running %+v; want not silent, with its job and run", w.Silent, w.Running)
	}
}
