package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
)

// answering starts a server that answers every request with status and a
// problem+json body, and counts the requests.
func answering(t *testing.T, status int) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		w.Write([]byte(`{"detail":"from the test server"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// refusing is the URL of a server that is gone: connections are refused.
func refusing(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

// moves returns the "moved to another server" lines of a client's log. The
// log's slog handler serializes its writes; it is read once they are done.
func moves(log *bytes.Buffer) []string {
	var out []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "moved to another server") {
			out = append(out, l)
		}
	}
	return out
}

// TestClient_FailoverRunsWorkerProtocol: a client whose first server is
// gone (refused connections) or shutting down (503) claims, renews and
// completes a job through the second, which shares the first's database;
// it moves on once, says so in one log line, and stays on the second.
func TestClient_FailoverRunsWorkerProtocol(t *testing.T) {
	t.Parallel()
	for name, first := range map[string]func(t *testing.T) (string, *atomic.Int64){
		"refused": func(t *testing.T) (string, *atomic.Int64) { return refusing(t), nil },
		"503":     func(t *testing.T) (string, *atomic.Int64) { return answering(t, http.StatusServiceUnavailable) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, second := serve(t)
			down, sent := first(t)
			ctx := context.Background()
			j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "thumb"})
			if err != nil {
				t.Fatal(err)
			}
			log := &bytes.Buffer{}
			c := &client.Client{BaseURL: down, Fallbacks: []string{second}, ClaimWait: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(log, nil))}
			claims, err := c.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"thumb"}, Max: 1, Lease: time.Minute})
			if err != nil || len(claims) != 1 || claims[0].Job.ID != j.ID {
				t.Fatalf("claim: got %+v, %v; want the job, from the second server", claims, err)
			}
			if _, err := c.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: j.ID, Generation: 1, Lease: time.Minute}); err != nil {
				t.Fatalf("heartbeat: %v", err)
			}
			done, err := c.RunFinish(ctx, db.RunFinishParams{JobID: j.ID, Generation: 1, Outcome: db.OutcomeSucceeded})
			if err != nil || done.State != db.StateDone {
				t.Fatalf("finish: got %+v, %v", done, err)
			}
			if c.Server() != second {
				t.Errorf("Server() = %s, want the second, %s", c.Server(), second)
			}
			if sent != nil && sent.Load() != 1 {
				t.Errorf("the first server got %d requests, want 1: the client stays on the second", sent.Load())
			}
			if got := moves(log); len(got) != 1 || !strings.Contains(got[0], "server="+second) || !strings.Contains(got[0], "from="+down) {
				t.Errorf("log: got %q, want one line naming the move from %s to %s", got, down, second)
			}
		})
	}
}

// TestClient_FailoverNotOn4xx: a 409 (stale lease) or 401 from the
// current server is its answer, and so is a 500 (the request reached it,
// and may have been done): the client returns it as it is and sends
// nothing to the other server. Only a 503 or no answer moves it on.
func TestClient_FailoverNotOn4xx(t *testing.T) {
	t.Parallel()
	s, first := serve(t)
	ctx := context.Background()
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "thumb"})
	if err != nil {
		t.Fatal(err)
	}
	other, sent := answering(t, http.StatusOK)
	c := &client.Client{BaseURL: first, Fallbacks: []string{other}}
	if _, err := c.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: j.ID, Generation: 7}); !errors.Is(err, db.ErrStale) || !client.IsStatus(err, http.StatusConflict) {
		t.Fatalf("stale heartbeat: got %v, want the first server's 409 as db.ErrStale", err)
	}
	if _, err := c.RunFinish(ctx, db.RunFinishParams{JobID: j.ID, Generation: 7, Outcome: db.OutcomeSucceeded}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("stale finish: got %v, want db.ErrStale", err)
	}
	refused, _ := answering(t, http.StatusUnauthorized)
	c2 := &client.Client{BaseURL: refused, Fallbacks: []string{other}}
	if _, err := c2.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"thumb"}, Max: 1}); !client.IsStatus(err, http.StatusUnauthorized) {
		t.Fatalf("claim refused: got %v, want the 401", err)
	}
	failed, _ := answering(t, http.StatusInternalServerError)
	c3 := &client.Client{BaseURL: failed, Fallbacks: []string{other}}
	if _, err := c3.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"thumb"}, Max: 1}); !client.IsStatus(err, http.StatusInternalServerError) {
		t.Fatalf("claim failed: got %v, want the 500", err)
	}
	if sent.Load() != 0 || c.Server() != first || c2.Server() != refused || c3.Server() != failed {
		t.Errorf("the other server got %d requests (want 0); servers now %s, %s and %s, want the first ones", sent.Load(), c.Server(), c2.Server(), c3.Server())
	}
}

// TestClient_FailoverAllDown: when every server fails, a request is sent
// once to each, round robin, and fails with the last one's error, for the
// caller's retries; the next request starts from where the client moved.
func TestClient_FailoverAllDown(t *testing.T) {
	t.Parallel()
	busy, sent := answering(t, http.StatusServiceUnavailable)
	gone := refusing(t)
	c := &client.Client{BaseURL: busy, Fallbacks: []string{gone}}
	ctx := context.Background()
	_, err := c.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: "x", Generation: 1})
	if err == nil || client.IsStatus(err, http.StatusServiceUnavailable) || sent.Load() != 1 {
		t.Fatalf("heartbeat: got %v after %d requests to the busy server, want the refused connection after 1", err, sent.Load())
	}
	if c.Server() != busy {
		t.Errorf("Server() = %s, want %s: round robin wraps to the first", c.Server(), busy)
	}
	_, err = c.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: "x", Generation: 1})
	if err == nil || sent.Load() != 2 {
		t.Fatalf("heartbeat again: got %v after %d requests to the busy server, want an error after 2", err, sent.Load())
	}
}

// TestClient_FailoverConcurrent: requests that fail on one server together
// move the client on once, and log it once.
func TestClient_FailoverConcurrent(t *testing.T) {
	t.Parallel()
	gone := refusing(t)
	other, sent := answering(t, http.StatusOK)
	log := &bytes.Buffer{}
	c := &client.Client{BaseURL: gone, Fallbacks: []string{other}, Logger: slog.New(slog.NewTextHandler(log, nil))}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := c.RunHeartbeat(context.Background(), db.RunHeartbeatParams{JobID: "x", Generation: 1}); err != nil {
				t.Errorf("heartbeat: %v", err)
			}
		})
	}
	wg.Wait()
	if got := moves(log); len(got) != 1 || sent.Load() != 16 || c.Server() != other {
		t.Errorf("%d log lines of moves (%q), %d requests answered by %s, now on %s; want 1 line, 16, on it", len(got), got, sent.Load(), other, c.Server())
	}
}

// TestClient_FailoverContext: a request whose server does not answer has
// half its time left when there are two servers: it moves on to the next
// server, which answers before the request's deadline. A request its
// caller cancelled does not move the client on.
func TestClient_FailoverContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for the handlers
	other, _ := answering(t, http.StatusOK)
	c := &client.Client{BaseURL: srv.URL, Fallbacks: []string{other}}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := c.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: "x", Generation: 1}); !errors.Is(err, context.Canceled) || c.Server() != srv.URL {
		t.Fatalf("cancelled heartbeat: got %v, now on %s; want context.Canceled, still on %s", err, c.Server(), srv.URL)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: "x", Generation: 1}); err != nil || c.Server() != other {
		t.Fatalf("heartbeat with a deadline: got %v, now on %s; want the other server's answer, within the deadline", err, c.Server())
	}
	alone := &client.Client{BaseURL: srv.URL}
	if _, err := alone.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: "x", Generation: 1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("heartbeat to one server that does not answer: got %v, want context.DeadlineExceeded", err)
	}
}

// TestClient_NoBaseURL: a Client whose BaseURL was not set says so, not
// "unsupported protocol scheme".
func TestClient_NoBaseURL(t *testing.T) {
	var c client.Client
	if _, err := c.JobGet(t.Context(), "x"); err == nil || !strings.Contains(err.Error(), "BaseURL is not set") {
		t.Errorf("JobGet on a zero Client: %v", err)
	}
}
