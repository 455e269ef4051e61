package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

// hangUpStore is a real store whose claims, once made, wait for the
// request they were made for to end: the worker hangs up while its claim is
// in flight. (The claim is not given the request's context, which the
// handler keeps from cutting a commit off; requests has it.)
type hangUpStore struct {
	db.Store
	requests chan context.Context // the context of each request, as it arrives
	claimed  chan struct{}        // receives once a claim took jobs
}

func (s *hangUpStore) RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error) {
	claims, err := s.Store.RunClaim(ctx, p)
	if len(claims) > 0 {
		s.claimed <- struct{}{}
		<-(<-s.requests).Done()
	}
	return claims, err
}

// TestHandler_ClaimOfAWorkerThatHungUp: a worker hangs up while its claim
// takes a job. Nobody will run the job, so it is handed back at once,
// released (not an attempt), instead of being held until the lease runs
// out and then charged as a failed attempt: with one attempt it would go
// dead without having run. The next claim takes it.
func TestHandler_ClaimOfAWorkerThatHungUp(t *testing.T) {
	t.Parallel()
	stored := sqlitetest.Open(t)
	store := &hangUpStore{Store: stored, requests: make(chan context.Context, 1), claimed: make(chan struct{}, 1)}
	h := New(Config{Store: store})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		store.requests <- r.Context()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	j, _, err := stored.JobCreate(ctx, db.JobCreateParams{Type: "t", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}

	reqCtx, hangUp := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, srv.URL+"/claims", strings.NewReader(`{"workerId": "w1", "types": ["t"], "wait": "10s"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		res, err := srv.Client().Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	<-store.claimed
	hangUp()
	<-done

	var got db.Job
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got, err = stored.JobGet(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if got.State != db.StateRunning {
			break
		}
	}
	if got.State != db.StateReady || got.Attempt != 0 {
		t.Fatalf("job claimed for a worker that hung up: %s, attempt %d; want ready again, attempt 0", got.State, got.Attempt)
	}
	runs, _, err := stored.RunList(ctx, db.RunListParams{JobID: j.ID})
	if err != nil || len(runs) != 1 || runs[0].Outcome != db.OutcomeReleased {
		t.Fatalf("runs: %+v, %v; want the one claimed, released", runs, err)
	}
	claims, err := stored.RunClaim(ctx, db.RunClaimParams{WorkerID: "w2", Types: []string{"t"}, Max: 1, Lease: time.Minute})
	if err != nil || len(claims) != 1 || claims[0].Job.ID != j.ID || claims[0].Job.Attempt != 1 {
		t.Fatalf("next claim: %+v, %v; want the job, at its first attempt", claims, err)
	}
}
