package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
	"github.com/sked-dev/sked/worker"
)

// claimSlack is how much longer than its wait a claim may take before the
// client gives up on the server (on each server it may try; see
// Client.Fallbacks).
const claimSlack = 15 * time.Second

// stopAnswerWait bounds how long a claim whose caller stopped waiting may
// still take to be answered once the server was told the worker is
// stopping; after it, or when the server cannot be told, the claim is
// abandoned.
const stopAnswerWait = 3 * time.Second

// RunClaim leases up to p.Max (at most wire.MaxClaim) due jobs of p.Types to
// p.WorkerID. The server holds the request until one is due or ClaimWait
// passes, so an empty answer means nothing was due for that long. When ctx
// ends while the server holds it, the server is told that the worker is
// stopping (POST /workers/stopping) and answers at once: the answer, with
// the jobs it claimed, if any, is returned, so that none is left leased to
// a worker that never heard of it. The claim fails when ctx ends before it
// is sent, or when the server cannot be told or does not answer soon
// after.
func (c *Client) RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error) {
	claims, _, err := c.RunClaimWaited(ctx, p)
	return claims, err
}

// RunClaimWaited is RunClaim that also returns how long the server held the
// request before it claimed (see worker.ClaimWaiter). A claim the server
// refused with Retry-After (a 503 when as many claims wait as it allows)
// holds the next one back until then, and that time counts as waited.
func (c *Client) RunClaimWaited(ctx context.Context, p db.RunClaimParams) ([]db.Claim, time.Duration, error) {
	start := time.Now()
	if pause := time.Until(time.Unix(0, c.claimAfter.Load())); pause > 0 {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, 0, fmt.Errorf("claim jobs: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("claim jobs: %w", context.Cause(ctx))
	}
	wait := cmp.Or(c.ClaimWait, wire.DefaultClaimWait)
	claim := &claimSent{id: rand.Text()}
	if lost := c.claimLost.Load(); lost != nil {
		claim.resend = *lost
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(1+len(c.Fallbacks))*(wait+claimSlack))
	defer cancel()
	stop := wire.WorkerStoppingRequest{WorkerID: p.WorkerID, ClaimID: claim.id}
	defer context.AfterFunc(ctx, func() { c.stopWaiting(rctx, cancel, stop, claim.where()) })()
	var resp wire.ClaimResponse
	sent := time.Now()
	n := min(p.Max, wire.MaxClaim)
	err := c.do(context.WithValue(rctx, claimKey{}, claim), http.MethodPost, "/claims", wire.ClaimRequest{
		WorkerID: p.WorkerID, Types: p.Types, Max: &n,
		Lease: wire.DurationJSON(cmp.Or(p.Lease, db.DefaultLease)), Wait: wire.DurationJSON(wait),
	}, &resp)
	c.claimFailed.Store(err != nil)
	apiErr := (*Error)(nil)
	answered := err == nil || errors.As(err, &apiErr)
	switch {
	case answered:
		c.claimLost.Store(nil)
	case claim.resend == "" || claim.where() != "":
		// The server may have claimed jobs it could not tell of. A
		// resend that was not even written keeps naming the claim lost.
		c.claimLost.Store(&claim.id)
	}
	if apiErr != nil && apiErr.RetryAfter > 0 {
		c.claimAfter.Store(time.Now().Add(apiErr.RetryAfter).UnixNano())
	}
	if err != nil {
		return nil, 0, fmt.Errorf("claim jobs: %w", err)
	}
	claims := make([]db.Claim, 0, len(resp.Claims))
	for _, cl := range resp.Claims {
		claims = append(claims, db.Claim{Job: cl.Job, RunID: cl.RunID})
	}
	return claims, sent.Sub(start) + time.Duration(resp.Waited), nil
}

// stopWaiting ends the wait of a claim, sent with rctx, whose caller
// stopped waiting. When the claim has been written to a server (at), it
// tells that server the worker is stopping (stop names the claim: a stop
// that overtakes its claim still ends it), and gives up on the claim
// (cancel) when that fails or the answer has not come stopAnswerWait later;
// a claim not written yet is given up at once, having claimed nothing.
func (c *Client) stopWaiting(rctx context.Context, cancel context.CancelFunc, stop wire.WorkerStoppingRequest, at string) {
	if at == "" {
		cancel()
		return
	}
	body, err := wire.Marshal(stop)
	if err != nil {
		cancel()
		return
	}
	sctx, done := context.WithTimeout(rctx, stopAnswerWait)
	defer done()
	// To the claim's server alone: another would have no wait to end, and
	// a failure here is no reason to fail over.
	if _, err := c.sendTo(sctx, at, http.MethodPost, "/workers/stopping", "application/json", body, nil); err != nil {
		cancel() // a server older than the route, or none: hang up
		return
	}
	<-sctx.Done()
	cancel() // no answer in stopAnswerWait, or the claim ended already
}

// NextDue is a worker.PoolConfig.NextDueFunc for a pool over c. The server
// waits for due jobs inside RunClaim, so the pool may claim again at once
// (now, true) — unless the last claim failed, when it answers false and the
// pool backs off for its MaxIdle before trying again.
func (c *Client) NextDue(context.Context, []string) (time.Time, bool, error) {
	if c.claimFailed.Load() {
		return time.Time{}, false, nil
	}
	return time.Now(), true, nil
}

// RunHeartbeat extends the lease held with p.Generation. It returns an error
// wrapping db.ErrStale when the server answers 409: the generation no
// longer holds the job.
func (c *Client) RunHeartbeat(ctx context.Context, p db.RunHeartbeatParams) (db.Heartbeat, error) {
	var hb wire.HeartbeatResponse
	err := c.do(ctx, http.MethodPost, "/jobs/"+url.PathEscape(p.JobID)+"/heartbeat",
		wire.HeartbeatRequest{Generation: &p.Generation, Lease: wire.DurationJSON(p.Lease)}, &hb)
	if err != nil {
		return db.Heartbeat{}, fmt.Errorf("heartbeat %s/%d: %w", p.JobID, p.Generation, staleOn409(err))
	}
	return db.Heartbeat{LeaseUntil: hb.LeaseUntil, CancelRequested: hb.CancelRequested}, nil
}

// RunFinish reports how the run leased with p.Generation ended and returns
// the job as the server moved it on. It returns an error wrapping
// db.ErrStale when the server answers 409, and db.ErrNotFound for no job
// of that id. A report whose answer was lost, and that the server had
// recorded, is answered as recorded when it is sent again: the caller (a
// worker.Pool) sends it again while the server cannot be reached.
func (c *Client) RunFinish(ctx context.Context, p db.RunFinishParams) (db.Job, error) {
	body := wire.CompleteRequest{Generation: &p.Generation, Outcome: p.Outcome, Error: p.Error, Retryable: &p.Retryable, Output: p.Output}
	var job db.Job
	if err := c.do(ctx, http.MethodPost, "/jobs/"+url.PathEscape(p.JobID)+"/complete", body, &job); err != nil {
		return db.Job{}, fmt.Errorf("complete %s/%d: %w", p.JobID, p.Generation, staleOn409(err))
	}
	return job, nil
}

// WorkerStopped tells the server that worker id has shut down (POST
// /workers/stopped), so that it is not taken for one still serving its
// types; a pool whose store is the client does so when it stops.
// A server older than the route (404, 405, or 403 to a worker token) is
// not told, and that is no error: the record is advice.
func (c *Client) WorkerStopped(ctx context.Context, id string) error {
	err := c.do(ctx, http.MethodPost, "/workers/stopped", wire.WorkerStoppedRequest{WorkerID: id}, nil)
	for _, old := range []int{http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusForbidden} {
		if IsStatus(err, old) {
			return nil
		}
	}
	return err
}

// staleOn409 makes a 409 answer to a worker write db.ErrStale, which is
// what a conflict means there.
func staleOn409(err error) error {
	if IsStatus(err, http.StatusConflict) {
		return fmt.Errorf("%w: %w", db.ErrStale, err)
	}
	return err
}

var (
	_ worker.Store       = (*Client)(nil)
	_ worker.ClaimWaiter = (*Client)(nil)
)
