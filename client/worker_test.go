package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/handlers"
	"github.com/sked-dev/sked/wire"
	"github.com/sked-dev/sked/worker"
)

// serve starts the API over a fresh SQLite store with tokens.
func serve(t *testing.T, tokens ...string) (*sqlite.Store, string) {
	t.Helper()
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s, Tokens: tokens}))
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func TestClient_WorkerProtocol(t *testing.T) {
	t.Parallel()
	s, url := serve(t, "s3cret")
	ctx := context.Background()
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "thumb", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}

	anon := &client.Client{BaseURL: url}
	_, err = anon.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"thumb"}, Max: 1})
	if !client.IsStatus(err, http.StatusUnauthorized) {
		t.Fatalf("claim without a token: got %v, want 401", err)
	}
	if due, ok, _ := anon.NextDue(ctx, nil); ok {
		t.Fatalf("NextDue after a failed claim: got %v, true; want false so the pool backs off", due)
	}

	c := &client.Client{BaseURL: url, Token: "s3cret", ClaimWait: 10 * time.Millisecond}
	claims, err := c.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"thumb"}, Max: 5, Lease: time.Minute})
	if err != nil || len(claims) != 1 || claims[0].Job.ID != j.ID || claims[0].Job.LeaseGeneration != 1 || claims[0].RunID == 0 {
		t.Fatalf("claim: got %+v, %v", claims, err)
	}
	if _, ok, _ := c.NextDue(ctx, nil); !ok {
		t.Fatal("NextDue after a good claim: want true, so the pool claims again at once")
	}
	empty, err := c.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"thumb"}, Max: 1})
	if err != nil || len(empty) != 0 {
		t.Fatalf("claim with nothing due: got %+v, %v", empty, err)
	}

	hb, err := c.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: j.ID, Generation: 1, Lease: time.Minute})
	if err != nil || hb.LeaseUntil.IsZero() || hb.CancelRequested {
		t.Fatalf("heartbeat: got %+v, %v", hb, err)
	}
	if _, err := c.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: j.ID, Generation: 7}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("stale heartbeat: got %v, want db.ErrStale", err)
	}
	if _, err := c.RunFinish(ctx, db.RunFinishParams{JobID: j.ID, Generation: 7, Outcome: db.OutcomeSucceeded}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("stale finish: got %v, want db.ErrStale", err)
	}
	_, err = c.RunFinish(ctx, db.RunFinishParams{JobID: j.ID, Generation: 1, Outcome: "exploded"})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity || apiErr.Field != "outcome" || !errors.Is(err, db.ErrInvalid) {
		t.Fatalf("bad outcome: got %v, want a 422 *client.Error on outcome", err)
	}
	done, err := c.RunFinish(ctx, db.RunFinishParams{JobID: j.ID, Generation: 1, Outcome: db.OutcomeSucceeded, Output: "ok"})
	if err != nil || done.State != db.StateDone {
		t.Fatalf("finish: got %+v, %v", done, err)
	}
}

// TestClient_RunFinishUnreachable reports an outcome to a server that is
// not there: RunFinish answers its one try's network error, for its
// caller (a pool) to send again; it does not loop itself as well.
func TestClient_RunFinishUnreachable(t *testing.T) {
	t.Parallel()
	c := &client.Client{BaseURL: "http://127.0.0.1:1"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.RunFinish(ctx, db.RunFinishParams{JobID: "x", Generation: 1, Outcome: db.OutcomeSucceeded})
	if err == nil || errors.Is(err, db.ErrStale) || ctx.Err() != nil {
		t.Fatalf("got %v (ctx %v), want the network error of one try", err, ctx.Err())
	}
}

// TestClient_Pool runs a worker.Pool over the client: the same pool that
// runs jobs in-process runs them from a server over HTTP.
func TestClient_Pool(t *testing.T) {
	t.Parallel()
	s, url := serve(t)
	c := &client.Client{BaseURL: url, ClaimWait: time.Second}
	ran := make(chan string, 1)
	pool := worker.NewPool(worker.PoolConfig{
		Store: c, NextDueFunc: c.NextDue, WorkerID: "remote", Lease: 2 * time.Second,
		Handlers: map[string]worker.HandlerFunc{"greet": func(_ context.Context, job *worker.Job) error {
			ran <- string(job.Payload)
			return nil
		}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- pool.Run(ctx) }()
	j, _, err := s.JobCreate(context.Background(), db.JobCreateParams{Type: "greet", Payload: []byte(`{"name":"Ada"}`)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-ran:
		if p != `{"name":"Ada"}` {
			t.Errorf("payload: got %s", p)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the pool never ran the job")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := s.JobGet(context.Background(), j.ID)
		if err == nil && got.State == db.StateDone && got.LeaseOwner == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job never done: %+v, %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	// The pool said it stopped, through the server.
	ws, err := s.Workers(context.Background(), time.Time{})
	if err != nil || len(ws) != 1 || ws[0].ID != "remote" || ws[0].StoppedAt == nil {
		t.Errorf("workers after the pool stopped: %+v (%v); want remote, stopped", ws, err)
	}
}

// TestClient_WorkerStoppedOldServer: a server without POST /workers/stopped
// (404, 405, or 403 to a worker token) is not told, and that is no error.
func TestClient_WorkerStoppedOldServer(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusForbidden} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
		c := &client.Client{BaseURL: srv.URL}
		if err := c.WorkerStopped(context.Background(), "box/1"); err != nil {
			t.Errorf("WorkerStopped against a server answering %d: %v, want nil", status, err)
		}
		srv.Close()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnprocessableEntity) }))
	defer srv.Close()
	if err := (&client.Client{BaseURL: srv.URL}).WorkerStopped(context.Background(), "box/1"); !client.IsStatus(err, http.StatusUnprocessableEntity) {
		t.Errorf("WorkerStopped answered 422: %v, want that error", err)
	}
}

// TestClient_RunClaimCapsMax asks for more jobs than one claim may take, as a
// pool with many free slots does: the client asks for wire.MaxClaim, not for a
// 422.
func TestClient_RunClaimCapsMax(t *testing.T) {
	t.Parallel()
	s, url := serve(t)
	ctx := context.Background()
	for range wire.MaxClaim + 5 {
		if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "bulk"}); err != nil {
			t.Fatal(err)
		}
	}
	c := &client.Client{BaseURL: url, ClaimWait: 10 * time.Millisecond}
	claims, err := c.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"bulk"}, Max: 250})
	if err != nil || len(claims) != wire.MaxClaim {
		t.Fatalf("claim of 250: got %d claims, %v; want %d", len(claims), err, wire.MaxClaim)
	}
}

// TestClient_RunClaimWaited: a claim that the server held until a job fell
// due says how long it waited before claiming; the lease began no sooner,
// so the wait is positive and within the time the call took.
func TestClient_RunClaimWaited(t *testing.T) {
	t.Parallel()
	s, url := serve(t)
	ctx := context.Background()
	c := &client.Client{BaseURL: url, ClaimWait: 10 * time.Second}
	sent := time.Now()
	if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "later", RunAt: sent.Add(300 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	claims, waited, err := c.RunClaimWaited(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"later"}, Max: 1})
	took := time.Since(sent)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: got %+v, %v", claims, err)
	}
	if waited <= 0 || waited > took {
		t.Fatalf("waited %s for a job due 300ms after the request; the call took %s", waited, took)
	}
}

// TestClient_ClaimRetryAfter: with a server that lets one claim wait, of
// two claims sent together one waits and the other is refused at once with
// a 503 that says how long to wait, and its client sends no claim before
// then.
func TestClient_ClaimRetryAfter(t *testing.T) {
	t.Parallel()
	shutdown := make(chan struct{})
	var sent atomic.Int64
	api := handlers.New(handlers.Config{Store: sqlitetest.Open(t), MaxClaimWaits: 1, Shutdown: shutdown})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/claims" {
			sent.Add(1)
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ctx := context.Background()

	type result struct {
		c   *client.Client
		err error
	}
	results := make(chan result, 2)
	for _, id := range []string{"a", "b"} {
		c := &client.Client{BaseURL: srv.URL, ClaimWait: 50 * time.Second}
		go func() {
			_, err := c.RunClaim(ctx, db.RunClaimParams{WorkerID: id, Types: []string{"t"}, Max: 1})
			results <- result{c, err}
		}()
	}
	refused := <-results
	var apiErr *client.Error
	if !errors.As(refused.err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || apiErr.RetryAfter != 5*time.Second {
		t.Fatalf("the claim past the server's limit: got %v (%+v), want 503 with Retry-After 5s", refused.err, apiErr)
	}
	before := sent.Load()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := refused.c.RunClaim(short, db.RunClaimParams{WorkerID: "again", Types: []string{"t"}, Max: 1})
	if !errors.Is(err, context.DeadlineExceeded) || sent.Load() != before {
		t.Errorf("a claim within Retry-After: got %v with %d claims sent, want the context's end and none sent", err, sent.Load()-before)
	}
	close(shutdown)
	if waited := <-results; waited.err != nil {
		t.Fatalf("the waiting claim: %v", waited.err)
	}
}

// TestClient_ClaimStopsWaiting: a claim whose caller stops waiting (a
// worker's shutdown) is not hung up on: the server is told the worker is
// stopping and answers it at once, so the call ends without error. Another
// worker's claim waits on. A server without that route is hung up on, as
// before it.
func TestClient_ClaimStopsWaiting(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	h := handlers.New(handlers.Config{Store: s})
	var oldServer, broken atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if oldServer.Load() && r.URL.Path == "/workers/stopping" {
			http.NotFound(w, r)
			return
		}
		if broken.Load() && r.Method == http.MethodGet {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c := &client.Client{BaseURL: srv.URL, ClaimWait: 30 * time.Second}
	waiting := func(worker string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			ws, err := s.Workers(context.Background(), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				if w.ID == worker {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's claim never arrived", worker)
			}
		}
	}
	type result struct {
		claims []db.Claim
		err    error
	}
	cl := c // the client claim uses
	claim := func(ctx context.Context, worker string) chan result {
		out := make(chan result, 1)
		go func() {
			claims, _, err := cl.RunClaimWaited(ctx, db.RunClaimParams{WorkerID: worker, Types: []string{"t"}, Max: 1})
			out <- result{claims, err}
		}()
		waiting(worker)
		return out
	}

	other := claim(context.Background(), "b")
	ctx, stop := context.WithCancel(context.Background())
	stopped := claim(ctx, "a")
	stop()
	if r := <-stopped; r.err != nil || len(r.claims) != 0 {
		t.Fatalf("claim of a worker that stopped waiting: %+v, %v; want it answered, empty", r.claims, r.err)
	}
	j, _, err := s.JobCreate(context.Background(), db.JobCreateParams{Type: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if r := <-other; r.err != nil || len(r.claims) != 1 || r.claims[0].Job.ID != j.ID {
		t.Fatalf("the other worker's claim: %+v, %v; want it still waiting, and given the job", r.claims, r.err)
	}

	// The stop goes to the server where the claim waits, also after the
	// client has moved on to a fallback for its other requests.
	var fallbackStops atomic.Int32
	fallback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/workers/stopping" {
			fallbackStops.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(fallback.Close)
	cl = &client.Client{BaseURL: srv.URL, Fallbacks: []string{fallback.URL}, ClaimWait: 30 * time.Second}
	ctx, stop = context.WithCancel(context.Background())
	stopped = claim(ctx, "d")
	broken.Store(true) // the next request fails over to the fallback
	cl.JobGet(context.Background(), "01JOBNOTTHERE0000000000000")
	if cl.Server() != fallback.URL {
		t.Fatalf("after a 503, the client uses %s; want it moved on to %s", cl.Server(), fallback.URL)
	}
	broken.Store(false)
	stop()
	if r := <-stopped; r.err != nil || fallbackStops.Load() != 0 {
		t.Fatalf("claim stopped after the client moved on: %+v, %v, %d stops sent to the fallback; want it answered where it waited",
			r.claims, r.err, fallbackStops.Load())
	}
	cl = c

	// A claim whose context has ended is not sent.
	ctx, stop = context.WithCancel(context.Background())
	stop()
	if _, _, err := c.RunClaimWaited(ctx, db.RunClaimParams{WorkerID: "late", Types: []string{"t"}, Max: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("claim with an ended context: %v; want context.Canceled", err)
	}

	oldServer.Store(true)
	ctx, stop = context.WithCancel(context.Background())
	stopped = claim(ctx, "c")
	stop()
	if r := <-stopped; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("claim stopped against a server without /workers/stopping: %+v, %v; want it hung up on", r.claims, r.err)
	}
	if ws, _ := s.Workers(context.Background(), time.Time{}); slices.ContainsFunc(ws, func(w db.Worker) bool { return w.ID == "late" }) {
		t.Error("the claim with an ended context reached the server")
	}
}

// TestClient_PoolClaimAnswerLost: a claim whose answer is lost on the way
// back (the connection breaks after the server claimed) leaves a job
// leased to a worker that never heard of it. The worker's next claim says
// so, gets the job again and runs it once, at once: a job of one attempt
// does not wait for its lease to run out and go dead unrun.
func TestClient_PoolClaimAnswerLost(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	api := handlers.New(handlers.Config{Store: s})
	var dropped atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/claims" || dropped.Load() {
			api.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, r)
		if !strings.Contains(rec.Body.String(), `"jobId"`) {
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		dropped.Store(true) // claimed; the answer goes nowhere
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	c := &client.Client{BaseURL: srv.URL, ClaimWait: time.Second}
	var runs atomic.Int32
	pool := worker.NewPool(worker.PoolConfig{
		Store: c, NextDueFunc: c.NextDue, WorkerID: "remote", Lease: time.Minute, MaxIdle: 100 * time.Millisecond,
		Handlers: map[string]worker.HandlerFunc{"once": func(context.Context, *worker.Job) error { runs.Add(1); return nil }},
	})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- pool.Run(ctx) }()
	defer func() { cancel(); <-stopped }()
	j, _, err := s.JobCreate(context.Background(), db.JobCreateParams{Type: "once", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := s.JobGet(context.Background(), j.ID)
		if err == nil && got.State == db.StateDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job is %s after 20 s (lost answer dropped: %t, runs %d); want it run and done well within its 1 min lease",
				got.State, dropped.Load(), runs.Load())
		}
	}
	if !dropped.Load() || runs.Load() != 1 {
		t.Errorf("answer dropped %t, runs %d; want the answer lost and the job run once", dropped.Load(), runs.Load())
	}
	if rs, _, err := s.RunList(context.Background(), db.RunListParams{JobID: j.ID}); err != nil || len(rs) != 1 || rs[0].Outcome != db.OutcomeSucceeded {
		t.Errorf("runs of the job: %+v, %v; want its one run, succeeded", rs, err)
	}
}
