package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/internal/syncbuf"
	"github.com/sked-dev/sked/wire"
)

// claimOne posts body to /claims and wants one claim back.
func (e *testEnv) claimOne(body string) wire.Claimed {
	e.t.Helper()
	res := e.do(http.MethodPost, "/claims", body)
	res.wantStatus(e.t, http.StatusOK)
	var cr wire.ClaimResponse
	res.decode(e.t, &cr)
	if len(cr.Claims) != 1 {
		e.t.Fatalf("claims: got %d, want 1: %s", len(cr.Claims), res.body)
	}
	return cr.Claims[0]
}

func TestHandler_ClaimValidation(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	for _, tc := range []struct {
		body, field string
	}{
		{`{"types": ["a"]}`, "workerId"},
		{`{"workerId": "w", "types": []}`, "types"},
		{`{"workerId": "w"}`, "types"},
		{`{"workerId": "w", "types": ["a b"]}`, "types"},
		{`{"workerId": "w", "types": ["a"], "max": 0}`, "max"},
		{`{"workerId": "w", "types": ["a"], "max": 101}`, "max"},
		{`{"workerId": "w", "types": ["a"], "lease": "1ms"}`, "lease"},
		{`{"workerId": "w", "types": ["a"], "lease": "soon"}`, "lease"},
		{`{"workerId": "w", "types": ["a"], "wait": "2m"}`, "wait"},
		{`{"workerId": "w", "types": ["a"], "wait": "-1s"}`, "wait"},
		{`{"workerId": "w", "types": ["a"], "extra": 1}`, "extra"},
		{`{"workerId": "serve:host/42", "types": ["a"], "wait": "0s"}`, "workerId"},
		{`{"workerId": "w\u001b[31mRED\nfake", "types": ["a"], "wait": "0s"}`, "workerId"},
		{`{"workerId": "w\u0000", "types": ["a"], "wait": "0s"}`, "workerId"},
		{`{"workerId": "evil\u202E", "types": ["a"], "wait": "0s"}`, "workerId"},
	} {
		p := e.do(http.MethodPost, "/claims", tc.body).wantProblem(t, http.StatusUnprocessableEntity, "")
		if p.Field != tc.field {
			t.Errorf("%s: field got %q, want %q (%s)", tc.body, p.Field, tc.field, p.Detail)
		}
	}
	// The bounds, at and past them.
	types := func(n int) string {
		ts := make([]string, n)
		for i := range ts {
			ts[i] = fmt.Sprintf("%q", fmt.Sprint("t", i))
		}
		return "[" + strings.Join(ts, ",") + "]"
	}
	for _, tc := range []struct {
		body, claimID, field string // field "": accepted
	}{
		{`{"workerId": "` + strings.Repeat("w", maxWorkerIDLen) + `", "types": ["a"], "wait": "0s"}`, "", ""},
		{`{"workerId": "` + strings.Repeat("w", maxWorkerIDLen+1) + `", "types": ["a"], "wait": "0s"}`, "", "workerId"},
		{`{"workerId": "w", "types": ` + types(maxClaimTypes) + `, "wait": "0s"}`, "", ""},
		{`{"workerId": "w", "types": ` + types(maxClaimTypes+1) + `, "wait": "0s"}`, "", "types"},
		{`{"workerId": "w", "types": ["a"], "wait": "0s"}`, strings.Repeat("c", maxClaimIDLen), ""},
		{`{"workerId": "w", "types": ["a"], "wait": "0s"}`, strings.Repeat("c", maxClaimIDLen+1), wire.ClaimIDHeader},
	} {
		res := e.do(http.MethodPost, "/claims", tc.body, wire.ClaimIDHeader, tc.claimID)
		if tc.field == "" {
			res.wantStatus(t, http.StatusOK)
			continue
		}
		if p := res.wantProblem(t, http.StatusUnprocessableEntity, ""); p.Field != tc.field {
			t.Errorf("field got %q, want %q (%s)", p.Field, tc.field, p.Detail)
		}
	}
	for _, tc := range []struct {
		path, body, field string
	}{
		{"/jobs/x/heartbeat", `{}`, "generation"},
		{"/jobs/x/heartbeat", `{"generation": 1, "lease": "1h1000000s"}`, "lease"},
		{"/jobs/x/complete", `{"outcome": "succeeded"}`, "generation"},
		{"/jobs/x/complete", `{"generation": 1}`, "outcome"},
		{"/jobs/x/complete", `{"generation": 1, "outcome": "lease_expired"}`, "outcome"},
		{"/jobs/x/complete", `{"generation": 1, "outcome": "missed"}`, "outcome"},
	} {
		p := e.do(http.MethodPost, tc.path, tc.body).wantProblem(t, http.StatusUnprocessableEntity, "")
		if p.Field != tc.field {
			t.Errorf("%s %s: field got %q, want %q (%s)", tc.path, tc.body, p.Field, tc.field, p.Detail)
		}
	}
}

// TestHandler_ClaimResend: a claim sent after one whose answer was lost
// (Sked-Claim-Resend naming its Sked-Claim-Id) answers that claim's jobs
// again, the same generation and run, their leases renewed, and claims
// nothing new; not the jobs of another claim of the same worker id (a
// replica that shares it), nor another worker's; a resend naming a claim
// the server does not know goes on as a claim as ever.
func TestHandler_ClaimResend(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	claimAs := func(body, id string, headers ...string) wire.ClaimResponse {
		t.Helper()
		res := e.do(http.MethodPost, "/claims", body, append([]string{wire.ClaimIDHeader, id}, headers...)...)
		res.wantStatus(t, http.StatusOK)
		var cr wire.ClaimResponse
		res.decode(t, &cr)
		return cr
	}
	lost := e.create(`{"type": "thumb"}`, http.StatusCreated)
	first := claimAs(`{"workerId": "box1/42", "types": ["thumb"], "max": 1, "lease": "10s", "wait": "0s"}`, "claim-a") // its answer is lost
	sibling := e.create(`{"type": "thumb"}`, http.StatusCreated)
	claimAs(`{"workerId": "box1/42", "types": ["thumb"], "max": 1, "wait": "0s"}`, "claim-b") // a replica with the same id
	e.create(`{"type": "thumb"}`, http.StatusCreated)                                         // due, not claimed yet
	e.create(`{"type": "other"}`, http.StatusCreated)
	e.claimOne(`{"workerId": "box2/7", "types": ["other"], "wait": "0s"}`)

	cr := claimAs(`{"workerId": "box1/42", "types": ["thumb", "other"], "max": 5, "lease": "20s", "wait": "0s"}`, "claim-c",
		wire.ClaimResendHeader, "claim-a")
	if len(cr.Claims) != 1 {
		t.Fatalf("resend: %d claims %+v; want the lost one alone (not %s, the sibling's, nor another worker's, nor a new one)", len(cr.Claims), cr.Claims, sibling.ID)
	}
	got, c := cr.Claims[0], first.Claims[0]
	if got.ID != lost.ID || got.Generation != c.Generation || got.RunID != c.RunID || got.LeaseUntil == nil || !got.LeaseUntil.Equal(testNow.Add(20*time.Second)) {
		t.Errorf("resend: %+v; want job %s, generation %d, run %d, its lease renewed for 20s", got, lost.ID, c.Generation, c.RunID)
	}
	// Naming a claim it does not know (another node's, or this one's
	// before a restart): a claim as ever, the next due job.
	again := claimAs(`{"workerId": "box1/42", "types": ["thumb"], "wait": "0s"}`, "claim-d", wire.ClaimResendHeader, "claim-zzz")
	if len(again.Claims) != 1 || again.Claims[0].ID == lost.ID || again.Claims[0].ID == sibling.ID {
		t.Errorf("a resend naming an unknown claim: %+v; want the next due job, newly claimed", again.Claims)
	}
}

// TestHandler_HeartbeatKeepsTheClaimedLease: a heartbeat that names no
// lease renews it by as long as the claim asked for (5m), not by the
// default 30s, which would let the lease run out between the worker's
// heartbeats and hand its job to another worker while it runs; one that
// names a lease outside the bounds says what omitting it does.
func TestHandler_HeartbeatKeepsTheClaimedLease(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "thumb"}`, http.StatusCreated)
	c := e.claimOne(`{"workerId": "box1/42", "types": ["thumb"], "lease": "5m", "wait": "0s"}`)
	now := testNow.Add(100 * time.Second)
	e.store.NowFunc = func() time.Time { return now }
	var hb wire.HeartbeatResponse
	e.do(http.MethodPost, "/jobs/"+j.ID+"/heartbeat", fmt.Sprintf(`{"generation": %d}`, c.Generation)).decode(t, &hb)
	if want := now.Add(5 * time.Minute); !hb.LeaseUntil.Equal(want) {
		t.Errorf("heartbeat without a lease: leaseUntil %v, want %v (the claim's 5m from now)", hb.LeaseUntil, want)
	}
	e.do(http.MethodPost, "/jobs/"+j.ID+"/heartbeat", fmt.Sprintf(`{"generation": %d, "lease": "1ms"}`, c.Generation)).
		wantProblem(t, http.StatusUnprocessableEntity, "omit it for the claim's lease")
}

// TestHandler_ClaimLifecycle claims a job over HTTP, renews it, and checks
// that every write under another generation is refused with 409 and
// changes nothing.
func TestHandler_ClaimLifecycle(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "thumb", "payload": {"n": 1}}`, http.StatusCreated)
	e.create(`{"type": "other"}`, http.StatusCreated)

	c := e.claimOne(`{"workerId": "box1/42", "types": ["thumb"], "max": 5, "lease": "10s", "wait": "0s"}`)
	if c.ID != j.ID || c.Generation != 1 || c.LeaseGeneration != 1 || c.RunID == 0 || c.State != db.StateRunning ||
		c.LeaseOwner != "box1/42" || string(c.Payload) != `{"n":1}` {
		t.Fatalf("claim: got %+v", c)
	}
	if want := testNow.Add(10 * time.Second); c.LeaseUntil == nil || !c.LeaseUntil.Equal(want) {
		t.Errorf("leaseUntil: got %v, want %v", c.LeaseUntil, want)
	}

	res := e.do(http.MethodPost, "/jobs/"+j.ID+"/heartbeat", `{"generation": 1, "lease": "20s"}`)
	res.wantStatus(t, http.StatusOK)
	var hb wire.HeartbeatResponse
	res.decode(t, &hb)
	if !hb.LeaseUntil.Equal(testNow.Add(20*time.Second)) || hb.CancelRequested {
		t.Errorf("heartbeat: got %+v", hb)
	}
	e.do(http.MethodPost, "/jobs/"+j.ID+"/cancel-run", "").wantStatus(t, http.StatusOK)
	e.do(http.MethodPost, "/jobs/"+j.ID+"/heartbeat", `{"generation": 1}`).decode(t, &hb)
	if !hb.CancelRequested {
		t.Errorf("heartbeat after cancel-run: got %+v, want cancelRequested", hb)
	}

	e.do(http.MethodPost, "/jobs/"+j.ID+"/heartbeat", `{"generation": 2}`).wantProblem(t, http.StatusConflict, "generation 2 never held")
	e.do(http.MethodPost, "/jobs/"+j.ID+"/complete", `{"generation": 2, "outcome": "succeeded"}`).wantProblem(t, http.StatusConflict, "generation 2 never held")
	if got, _ := e.store.JobGet(t.Context(), j.ID); got.State != db.StateRunning {
		t.Fatalf("after a stale completion the job is %s, want running", got.State)
	}

	res = e.do(http.MethodPost, "/jobs/"+j.ID+"/complete", `{"generation": 1, "outcome": "succeeded", "output": "made it"}`)
	res.wantStatus(t, http.StatusOK)
	var done db.Job
	res.decode(t, &done)
	if done.State != db.StateDone {
		t.Errorf("completed job: got state %s, want done", done.State)
	}
	e.do(http.MethodPost, "/jobs/"+j.ID+"/complete", `{"generation": 1, "outcome": "failed"}`).wantProblem(t, http.StatusConflict, "")
	runs, _, err := e.store.RunList(t.Context(), db.RunListParams{JobID: j.ID, Limit: 10})
	if err != nil || len(runs) != 1 || runs[0].Outcome != db.OutcomeSucceeded || runs[0].Output != "made it" || runs[0].WorkerID != "box1/42" {
		t.Fatalf("runs: got %+v, %v", runs, err)
	}
}

// TestHandler_CompleteReport: a failure reported without retryable is
// retried (a worker that leaves it out does not send its job dead at the
// first failure); retryable false sends it dead. An error longer than a
// run keeps is cut, not refused (a refused report would be lost, and the
// run would wait out its lease). A heartbeat or completion naming no job's
// id, or a name, is 404.
func TestHandler_CompleteReport(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	claimed := func() wire.Claimed {
		t.Helper()
		return e.claimOne(`{"workerId": "box1/42", "types": ["thumb"], "wait": "0s"}`)
	}
	j := e.create(`{"type": "thumb", "name": "thumbs", "maxAttempts": 3}`, http.StatusCreated)
	c := claimed()
	long := strings.Repeat("é", 3000) // 6000 bytes
	var after db.Job
	e.do(http.MethodPost, "/jobs/"+j.ID+"/complete", fmt.Sprintf(`{"generation": %d, "outcome": "failed", "error": %q}`, c.Generation, long)).decode(t, &after)
	if after.State != db.StateReady || after.Attempt != 1 {
		t.Fatalf("a failure without retryable: %s at attempt %d; want ready for a retry", after.State, after.Attempt)
	}
	runs, _, err := e.store.RunList(t.Context(), db.RunListParams{JobID: j.ID, Limit: 10})
	if err != nil || len(runs) != 1 || runs[0].Error != long[:db.ErrorHeadBytes] {
		t.Fatalf("the run of a failure with a long error: %+v, %v; want its first %d bytes", runs, err, db.ErrorHeadBytes)
	}

	e.store.NowFunc = func() time.Time { return testNow.Add(time.Hour) } // past the backoff
	c = claimed()
	e.do(http.MethodPost, "/jobs/"+j.ID+"/complete", fmt.Sprintf(`{"generation": %d, "outcome": "failed", "retryable": false}`, c.Generation)).decode(t, &after)
	if after.State != db.StateDead {
		t.Errorf("a failure with retryable false: %s; want dead", after.State)
	}

	for _, r := range []struct{ path, body string }{
		{"/jobs/01M8TJ0AMX1M4CVGVM6BCJD4HZ/heartbeat", `{"generation": 1}`},
		{"/jobs/thumbs/complete", `{"generation": 1, "outcome": "succeeded"}`},
	} {
		e.do(http.MethodPost, r.path, r.body).wantProblem(t, http.StatusNotFound, "by the id its claim answered")
	}
}

// TestHandler_ServeRunNotReported: a run that sked serve's own pool holds
// cannot be renewed or reported through the worker protocol by anyone who
// learns its job id and generation: it answered 200, ended the server's
// own run as the caller said, and answered the job, payload and all.
func TestHandler_ServeRunNotReported(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "thumb", "payload": {"secret": "s3"}}`, http.StatusCreated)
	claims, err := e.store.RunClaim(t.Context(), db.RunClaimParams{WorkerID: ServeWorkerPrefix + "host/1", Types: []string{"thumb"}, Max: 1, Lease: time.Minute})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim by the pool: %v, %v", claims, err)
	}
	gen := claims[0].Job.LeaseGeneration
	for _, r := range []struct{ path, body string }{
		{"/jobs/" + j.ID + "/heartbeat", fmt.Sprintf(`{"generation": %d, "lease": "24h"}`, gen)},
		{"/jobs/" + j.ID + "/complete", fmt.Sprintf(`{"generation": %d, "outcome": "succeeded", "output": "forged"}`, gen)},
	} {
		res := e.do(http.MethodPost, r.path, r.body)
		res.wantProblem(t, http.StatusConflict, "is run by sked serve's own pool")
		if strings.Contains(string(res.body), "s3") {
			t.Errorf("%s answered the payload: %s", r.path, res.body)
		}
	}
	if got, _ := e.store.JobGet(t.Context(), j.ID); got.State != db.StateRunning || got.LeaseGeneration != gen {
		t.Errorf("the pool's run: %s at generation %d; want still running at %d", got.State, got.LeaseGeneration, gen)
	}
}

// TestHandler_LateReportUnderServeRun: a remote worker's report of its own
// earlier run, whose job sked serve's pool (an embedding program's, which
// runs the same type) has claimed since, is stale as ever and kept as that
// run's late outcome; it is not refused as a report of the pool's run.
func TestHandler_LateReportUnderServeRun(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "thumb"}`, http.StatusCreated)
	c := e.claimOne(`{"workerId": "box1/42", "types": ["thumb"], "lease": "1s", "wait": "0s"}`)
	e.store.NowFunc = func() time.Time { return testNow.Add(time.Hour) } // past the lease and the backoff
	if n, err := e.store.RunReapExpired(t.Context()); err != nil || n != 1 {
		t.Fatalf("reap: %d, %v", n, err)
	}
	if claims, err := e.store.RunClaim(t.Context(), db.RunClaimParams{WorkerID: ServeWorkerPrefix + "host/1", Types: []string{"thumb"}, Max: 1, Lease: time.Minute}); err != nil || len(claims) != 1 {
		t.Fatalf("claim by the pool: %v, %v", claims, err)
	}
	e.do(http.MethodPost, "/jobs/"+j.ID+"/complete", fmt.Sprintf(`{"generation": %d, "outcome": "succeeded"}`, c.Generation)).
		wantProblem(t, http.StatusConflict, "no longer holds")
	runs, _, err := e.store.RunList(t.Context(), db.RunListParams{JobID: j.ID, Limit: 10})
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs: %+v, %v", runs, err)
	}
	for _, r := range runs {
		if r.Generation == c.Generation && r.LateOutcome != db.OutcomeSucceeded {
			t.Errorf("the remote worker's run: %+v; want its late outcome kept", r)
		}
	}
}

// newShutdownEnv is a test env whose shutdown the test starts by closing
// shutdown, logging as text into logs.
func newShutdownEnv(t *testing.T) (e *testEnv, shutdown chan struct{}, logs *syncbuf.Buffer) {
	shutdown, logs = make(chan struct{}), &syncbuf.Buffer{}
	e = newTestEnv(t, func(c *Config) {
		c.Shutdown = shutdown
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	return e, shutdown, logs
}

// TestHandler_ClaimDrain: while the server shuts down, a new claim is
// refused (503, Retry-After), and the run a remote worker claimed before is
// still renewed and reported; Drain waits for it until it is reported, and
// not for a run of another generation reported stale, nor for a run
// reported through another node.
func TestHandler_ClaimDrain(t *testing.T) {
	t.Parallel()
	e, shutdown, logs := newShutdownEnv(t)
	j := e.create(`{"type": "thumb"}`, http.StatusCreated)
	e.create(`{"type": "thumb"}`, http.StatusCreated)
	e.create(`{"type": "thumb"}`, http.StatusCreated)
	c := e.claimOne(`{"workerId": "box1/42", "types": ["thumb"], "wait": "0s"}`)
	// A worker that reports its run through another node, sharing the
	// store, once this one shuts down.
	moved := e.claimOne(`{"workerId": "box3/5", "types": ["thumb"], "wait": "0s"}`)

	e.do(http.MethodGet, "/readyz", "").wantStatus(t, http.StatusOK)
	close(shutdown)
	e.do(http.MethodGet, "/readyz", "").wantProblem(t, http.StatusServiceUnavailable, "shutting down")
	res := e.do(http.MethodPost, "/claims", `{"workerId": "box2/7", "types": ["thumb"], "wait": "0s"}`)
	res.wantProblem(t, http.StatusServiceUnavailable, "shutting down")
	if res.header.Get("Retry-After") == "" {
		t.Errorf("a claim refused at shutdown has no Retry-After")
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a claim refused at shutdown was logged as an error:\n%s", logs.String())
	}
	over, cancel := context.WithCancel(t.Context())
	cancel()
	if left := e.api.Drain(over); left != 2 {
		t.Fatalf("Drain with two runs held: %d left, want 2", left)
	}
	e.do(http.MethodPost, "/jobs/"+j.ID+"/heartbeat", `{"generation": 2}`).wantStatus(t, http.StatusConflict)
	e.do(http.MethodPost, "/jobs/"+j.ID+"/heartbeat", fmt.Sprintf(`{"generation": %d}`, c.Generation)).wantStatus(t, http.StatusOK)
	if left := e.api.Drain(over); left != 2 {
		t.Fatalf("Drain after a renewal and a stale heartbeat of another generation: %d left, want 2", left)
	}
	if _, err := e.store.RunFinish(t.Context(), db.RunFinishParams{JobID: moved.ID, Generation: moved.Generation, Outcome: db.OutcomeSucceeded}); err != nil {
		t.Fatal(err)
	}
	// The store shows the moved worker's run over, and the other still
	// held.
	briefly, stopBriefly := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer stopBriefly()
	if left := e.api.Drain(briefly); left != 1 {
		t.Fatalf("Drain after a run was reported through another node: %d left, want 1", left)
	}
	e.do(http.MethodPost, "/jobs/"+j.ID+"/complete", fmt.Sprintf(`{"generation": %d, "outcome": "succeeded"}`, c.Generation)).wantStatus(t, http.StatusOK)
	ctx, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	if left := e.api.Drain(ctx); left != 0 {
		t.Fatalf("Drain after the run was reported: %d left, want 0", left)
	}
}

// TestHandler_ClaimLongPoll checks that a waiting claim is answered by a job
// created while it waits (or just before), that a claim with nothing due answers an empty
// list when its wait ends, and that shutdown ends a wait at once.
func TestHandler_ClaimLongPoll(t *testing.T) {
	t.Parallel()
	e, shutdown, _ := newShutdownEnv(t)

	got := make(chan wire.ClaimResponse, 1)
	sent := time.Now()
	go func() {
		res := e.do(http.MethodPost, "/claims", `{"workerId": "w", "types": ["late"], "wait": "30s"}`)
		var cr wire.ClaimResponse
		res.decode(t, &cr)
		got <- cr
	}()
	j := e.create(`{"type": "late"}`, http.StatusCreated)
	cr := <-got
	if len(cr.Claims) != 1 || cr.Claims[0].ID != j.ID {
		t.Fatalf("waiting claim: got %+v, want job %s", cr, j.ID)
	}
	// The claim was made after the job was created, which the request
	// waited for: the lease began no sooner than the wait says.
	if w := time.Duration(cr.Waited); w <= 0 || w > time.Since(sent) {
		t.Errorf("waiting claim: waited %s", w)
	}

	res := e.do(http.MethodPost, "/claims", `{"workerId": "w", "types": ["none"], "wait": "10ms"}`)
	res.wantStatus(t, http.StatusOK)
	if string(res.body) != "{\"claims\":[],\"waited\":\"0s\"}\n" {
		t.Errorf("empty claim: got %s", res.body)
	}

	ended := make(chan response, 1)
	go func() {
		ended <- e.do(http.MethodPost, "/claims", `{"workerId": "w", "types": ["none"], "wait": "50s"}`)
	}()
	for waiting, _ := e.api.ClaimWaits(); waiting == 0; waiting, _ = e.api.ClaimWaits() {
		time.Sleep(time.Millisecond)
	}
	close(shutdown)
	select {
	case r := <-ended:
		r.wantStatus(t, http.StatusOK)
	case <-time.After(20 * time.Second):
		t.Fatal("shutdown did not end the waiting claim")
	}
}

// TestHandler_StoppedAnswers503: once the server shuts down and its store
// is closed (an embedding program's Handler outlives Run), a request the
// store fails answers 503 with Retry-After, which sends a client to
// another node, not 500, which ends its request.
func TestHandler_StoppedAnswers503(t *testing.T) {
	t.Parallel()
	e, shutdown, _ := newShutdownEnv(t)
	close(shutdown)
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	res := e.do(http.MethodGet, "/jobs", "")
	res.wantProblem(t, http.StatusServiceUnavailable, "shutting down or has stopped")
	if res.header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
}

// TestHandler_ClaimCommitLost: a claim whose commit's answer was lost
// answers the jobs it leased, each lease renewed, as their first attempt,
// and not those its worker's id was answered already (a replica's): it
// used to answer 500, and the jobs waited out their leases, each charged
// an attempt (a job of one attempt went dead never having run).
func TestHandler_ClaimCommitLost(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, e *testEnv) {
		store := &dbtest.CommitLost{}
		e2 := newTestEnvOn(t, e.api.h.store, func(cfg *Config) { store.Store = cfg.Store; cfg.Store = store })
		store.Disarm() // the replica's claim is answered
		e2.create(`{"type": "lostc", "maxAttempts": 1}`, http.StatusCreated)
		replica := e2.claimOne(`{"workerId": "box1/42", "types": ["lostc"], "wait": "0s"}`)
		store.Arm()
		want := map[string]bool{}
		for range 2 {
			want[e2.create(`{"type": "lostc", "maxAttempts": 1}`, http.StatusCreated).ID] = true
		}
		res := e2.do(http.MethodPost, "/claims", `{"workerId": "box1/42", "types": ["lostc"], "max": 5, "lease": "1m", "wait": "0s"}`)
		if !store.Lost() {
			t.Fatal("no claim's answer was lost: the test tested nothing")
		}
		res.wantStatus(t, http.StatusOK)
		var cr wire.ClaimResponse
		res.decode(t, &cr)
		if len(cr.Claims) != len(want) {
			t.Fatalf("claim whose commit's answer was lost: %d claims %+v; want the %d it leased (not %s, answered to a replica)",
				len(cr.Claims), cr.Claims, len(want), replica.ID)
		}
		for _, c := range cr.Claims {
			if !want[c.ID] || c.Attempt != 1 || c.LeaseOwner != "box1/42" {
				t.Errorf("answered %+v; want one of %v, its first attempt, leased to box1/42", c, want)
			}
			e2.do(http.MethodPost, "/jobs/"+c.ID+"/complete", fmt.Sprintf(`{"generation": %d, "outcome": "succeeded"}`, c.Generation)).
				wantStatus(t, http.StatusOK)
		}
		again := e2.do(http.MethodPost, "/claims", `{"workerId": "box1/42", "types": ["lostc"], "max": 5, "wait": "0s"}`)
		again.wantStatus(t, http.StatusOK)
		var next wire.ClaimResponse
		again.decode(t, &next)
		if len(next.Claims) != 0 {
			t.Errorf("next claim: %+v; want none (each job was answered once)", next.Claims)
		}
	})
}

// TestHandler_HeartbeatOfTheLongestTimeout renews the run of a job whose
// timeout is within a minute of the longest duration there is: the grace a
// remote run has past its timeout must not wrap it round to a deadline in
// the past, which ended the run timed_out at its first heartbeat.
func TestHandler_HeartbeatOfTheLongestTimeout(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "thumb", "timeout": "2562047h47m"}`, http.StatusCreated)
	c := e.claimOne(`{"workerId": "box1/42", "types": ["thumb"], "wait": "0s"}`)
	now := testNow.Add(10 * time.Second)
	e.store.NowFunc = func() time.Time { return now }
	e.do(http.MethodPost, "/jobs/"+j.ID+"/heartbeat", fmt.Sprintf(`{"generation": %d}`, c.Generation)).wantStatus(t, http.StatusOK)
}
