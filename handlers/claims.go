package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// Limits of the worker protocol besides wire's.
const (
	// claimTimeout bounds a claim's transaction, which goes on when the
	// worker hangs up.
	claimTimeout   = 10 * time.Second
	maxWorkerIDLen = 200
	maxClaimTypes  = 50
)

// ServeWorkerPrefix starts the worker ids of sked serve's own pools (see
// db.ServeWorkerPrefix), which POST /claims refuses.
const ServeWorkerPrefix = db.ServeWorkerPrefix

// handleClaim serves POST /claims: it leases up to max due jobs of types to
// the worker, waiting up to wait for one to become due. It answers as soon
// as it has claimed at least one, and with an empty list when the wait
// ends, the worker says it is stopping or the server shuts down. A claim
// that would wait while as many as allowed wait already answers 503 at once
// (claimsFullError), and so does one that arrives while the server shuts
// down (errShuttingDown). A resend (wire.ClaimResendHeader) answers again
// the jobs of the claim it names, as far as their leases still hold them.
// A claim whose commit's outcome is not known (db.ErrCommitUnknown)
// answers what heldAfterLost finds.
func (h *handler) handleClaim(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var req wire.ClaimRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		h.error(w, r, err)
		return
	}
	p, wait, err := claimParams(&req)
	if err != nil {
		h.error(w, r, err)
		return
	}
	if i := slices.IndexFunc(p.Types, func(t string) bool { return slices.Contains(h.ownTypes, t) }); i >= 0 {
		h.error(w, r, &db.ValidationError{Field: "types", Msg: fmt.Sprintf("type %q is run by this server's own pools (a type sked serve runs itself, or one the program "+
			"embedding it runs with a Go handler), and no remote worker may claim it; "+
			"give the jobs of a remote worker a type of their own, such as \"thumbnail\"", p.Types[i])})
		return
	}
	claimID := r.Header.Get(wire.ClaimIDHeader)
	if err := checkClaimID(wire.ClaimIDHeader, claimID); err != nil {
		h.error(w, r, err)
		return
	}
	if h.shuttingDown() {
		h.error(w, r, errShuttingDown)
		return
	}
	waiter := newClaimWaiter(p.Types, p.Max)
	waits := wait > 0 && h.claimers.add(waiter)
	// leave gives up its place among the waiting claims, once: before a
	// claim that got jobs answers, so that the worker, answered, finds room
	// for its next claim.
	left := false
	leave := func() {
		if waits && !left {
			left = true
			h.claimers.remove(waiter)
		}
	}
	defer leave()
	stopping, ok := h.stopping.add(p.WorkerID, claimID, time.Now())
	if !ok { // its worker stopped before it arrived
		h.writeJSON(w, r, http.StatusOK, claimAnswer(nil, 0))
		return
	}
	defer h.stopping.remove(p.WorkerID, stopping)
	if lost := r.Header.Get(wire.ClaimResendHeader); lost != "" {
		// The leases are renewed from after this: the worker counts
		// them from here, no later than they began.
		renewed := time.Since(arrived)
		held, err := h.answeredAgain(r.Context(), p, lost)
		if err != nil {
			h.handBack(r, held) // renewed, and not answered: due again, no attempt spent
			h.error(w, r, err)
			return
		}
		if len(held) > 0 {
			h.answerClaims(w, r, p.WorkerID, claimID, held, renewed) // this answer may be lost too
			return
		}
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		waited := time.Since(arrived)
		// Not cut off when the worker hangs up: a commit cut off midway
		// might have taken jobs all the same, and nobody would know to
		// hand them back.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), claimTimeout)
		claims, err := h.store.RunClaim(sctx, p)
		cancel()
		if errors.Is(err, db.ErrCommitUnknown) {
			renewed := time.Since(arrived)
			held, err := h.heldAfterLost(r.Context(), p, err)
			if err != nil {
				h.error(w, r, err)
				return
			}
			if r.Context().Err() != nil { // kept for the worker's resend (some may be its runs already)
				h.answered.add(p.WorkerID, claimID, held, time.Now())
				return
			}
			h.answerClaims(w, r, p.WorkerID, claimID, held, renewed)
			return
		}
		if err != nil {
			h.error(w, r, err)
			return
		}
		claims = h.remote.take(claims) // all of them, unless a claim whose commit's answer was lost took them first
		if len(claims) > 0 && r.Context().Err() != nil {
			h.handBack(r, claims)
			return
		}
		if len(claims) > 0 {
			types := make([]string, len(claims))
			for i, c := range claims {
				types[i] = c.Job.Type
			}
			h.claimers.claimed(waiter, types)
			leave()
			h.answerClaims(w, r, p.WorkerID, claimID, claims, waited)
			return
		}
		if !waits {
			if wait > 0 {
				h.refuseClaim(w, r, &req)
				return
			}
			h.writeJSON(w, r, http.StatusOK, claimAnswer(nil, 0))
			return
		}
		if next, ok, err := h.store.JobNextDue(r.Context(), p.Types); err == nil && ok {
			h.claimers.lookAt(p.Types, time.Now().Add(max(next.Sub(h.store.Now()), time.Millisecond)))
		}
		if !h.claimers.sleep(waiter) {
			continue // a wake-up was owed to its types
		}
		select {
		case <-waiter.c:
			h.claimers.begin(waiter)
		case <-deadline.C:
			h.writeJSON(w, r, http.StatusOK, claimAnswer(nil, 0))
			return
		case <-h.shutdown:
			h.writeJSON(w, r, http.StatusOK, claimAnswer(nil, 0))
			return
		case <-stopping:
			h.writeJSON(w, r, http.StatusOK, claimAnswer(nil, 0))
			return
		case <-r.Context().Done():
			return // the worker hung up; nothing was claimed for it
		}
	}
}

// answerClaims answers claims, made waited after the claim arrived, to the
// worker's claim claimID: their leases are held for the drain at shutdown,
// and the answer is kept for a resend of the claim, should it be lost.
func (h *handler) answerClaims(w http.ResponseWriter, r *http.Request, workerID, claimID string, claims []db.Claim, waited time.Duration) {
	for _, c := range claims {
		h.remote.hold(c.Job.ID, c.Job.LeaseGeneration, *c.Job.LeaseUntil)
	}
	h.answered.add(workerID, claimID, claims, time.Now())
	h.writeJSON(w, r, http.StatusOK, claimAnswer(claims, waited))
}

// answeredAgain is what the claim named lost, of p's worker, was answered
// with (see wire.ClaimResendHeader), as far as the store still holds it
// under the same lease: each such job, read again, with its lease renewed
// for p.Lease from now. The rest (run and ended since, reaped, cancelled,
// deleted) is left out. On an error it returns, with it, the leases it
// renewed, for the caller to hand back.
func (h *handler) answeredAgain(ctx context.Context, p db.RunClaimParams, lost string) ([]db.Claim, error) {
	return h.renew(ctx, p, h.answered.take(p.WorkerID, lost, time.Now()))
}

// heldAfterLost is what a claim of p answers when whether its transaction
// committed is not known (claimErr wraps db.ErrCommitUnknown): the jobs
// the store says p's worker holds that no answer of this API carries (they
// were leased by this claim, or by an earlier one whose answer was lost
// too, or answered by another node), each taken for this answer alone
// (remoteLeases.take) and its lease renewed for p.Lease from now, as a
// resend's are. While the store cannot answer it asks again, within
// claimTimeout; then it returns claimErr with why, and the jobs the claim
// may have leased wait out their lease.
func (h *handler) heldAfterLost(ctx context.Context, p db.RunClaimParams, claimErr error) ([]db.Claim, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	var (
		held []db.Claim
		err  error
	)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if held, err = h.store.RunsHeld(ctx, p.WorkerID); err == nil {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w; reading the jobs it may have leased to %s: %w", claimErr, p.WorkerID, err)
		case <-t.C:
		}
	}
	held = h.remote.take(held)
	leases := make([]answeredLease, len(held))
	for i, c := range held {
		leases[i] = answeredLease{job: c.Job.ID, generation: c.Job.LeaseGeneration, run: c.RunID}
	}
	renewed, err := h.renew(ctx, p, leases)
	if err != nil {
		for _, l := range leases { // not answered: they wait out their leases, as before
			h.remote.end(l.job, l.generation)
		}
		return nil, fmt.Errorf("%w; renewing the leases of the jobs it held: %w", claimErr, err)
	}
	if len(renewed) > 0 {
		h.logger.WarnContext(ctx, "a claim's commit was answered by a broken connection; answering the jobs its worker holds, which no answer of this server carried",
			"worker_id", p.WorkerID, "jobs", len(renewed))
	}
	return renewed, nil
}

// renew renews each of leases, of p's worker, for p.Lease from now, as far
// as the store still holds it under the same lease, and returns each such
// job read again; the rest (run and ended since, reaped, cancelled,
// deleted) is left out. On an error it returns, with it, the leases it
// renewed.
func (h *handler) renew(ctx context.Context, p db.RunClaimParams, leases []answeredLease) ([]db.Claim, error) {
	var again []db.Claim
	for _, l := range leases {
		_, err := h.store.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: l.job, Generation: l.generation, Lease: p.Lease, Remote: true})
		if errors.Is(err, db.ErrStale) || errors.Is(err, db.ErrConflict) {
			continue // its lease is over, or the run past its timeout was ended
		}
		if err != nil {
			return again, fmt.Errorf("renew the lease of job %s for worker %s: %w", l.job, p.WorkerID, err)
		}
		j, err := h.store.JobGet(ctx, l.job)
		if errors.Is(err, db.ErrNotFound) || err == nil && j.LeaseGeneration != l.generation {
			continue // deleted, or reaped and claimed again, since the renewal
		}
		if err != nil { // renewed all the same: the caller hands it back
			again = append(again, db.Claim{Job: db.Job{ID: l.job, LeaseGeneration: l.generation}, RunID: l.run})
			return again, fmt.Errorf("read job %s again for worker %s: %w", l.job, p.WorkerID, err)
		}
		again = append(again, db.Claim{Job: j, RunID: l.run})
	}
	return again, nil
}

// handBack releases claims made for a worker that hung up before they were
// answered: no one would run them, and their leases would run out and be
// charged as failed attempts (a job of one attempt would go dead without
// having run). Released, each is due again in its old place, its attempt
// not counted.
func (h *handler) handBack(r *http.Request, claims []db.Claim) {
	ctx := context.WithoutCancel(r.Context())
	for _, c := range claims {
		_, err := h.store.RunFinish(ctx, db.RunFinishParams{JobID: c.Job.ID, Generation: c.Job.LeaseGeneration,
			Outcome: db.OutcomeReleased, Error: "handed back: the worker hung up before its claim was answered"})
		if err != nil {
			h.logger.WarnContext(ctx, "hand back the claim of a worker that hung up; its lease runs out instead",
				"job_id", c.Job.ID, "generation", c.Job.LeaseGeneration, "err", err)
		}
	}
}

// ClaimWaits is how many POST /claims wait now, and how many were refused
// since the start because as many waited as Config.MaxClaimWaits allows:
// for metrics.
func (a *API) ClaimWaits() (waiting int, refused int64) { return a.h.claimers.counts() }

// refuseClaim answers a claim that found nothing and may not wait, since
// as many claims as allowed wait already: 503 with Retry-After. It logs a
// warning, at most one every refusedLogEvery, with the refusals since.
func (h *handler) refuseClaim(w http.ResponseWriter, r *http.Request, req *wire.ClaimRequest) {
	if n, ok := h.claimers.refuse(time.Now()); ok {
		h.logger.WarnContext(r.Context(), "claims refused: as many claims wait as allowed",
			"refused", n, "max_claim_waits", h.claimers.limit, "worker_id", req.WorkerID, "types", strings.Join(req.Types, ","))
	}
	h.writeProblem(w, problemFor(&claimsFullError{limit: h.claimers.limit}))
}

// checkWorkerID refuses an id that a remote worker may not claim or report
// under, with a *db.ValidationError.
func checkWorkerID(id string) error {
	switch {
	case id == "":
		return fieldError("workerId", "workerId is required: a name for this worker, such as its host name and process id")
	case len(id) > maxWorkerIDLen:
		return fieldError("workerId", "workerId is %d bytes long; at most %d are allowed", len(id), maxWorkerIDLen)
	case !printable(id):
		return fieldError("workerId", "workerId %q is not printable UTF-8 text; name this worker by its host name and process id, such as web-1/4242", id)
	case db.ServeWorker(id):
		return fieldError("workerId", "workerId %q begins with %q, which names the pools inside sked serve (a restart of sked serve takes their "+
			"jobs back while they run); name this worker otherwise, such as by its host name and process id", id, ServeWorkerPrefix)
	}
	return nil
}

// claimParams validates a claim request and fills in the defaults: one job,
// the default lease, wire.DefaultClaimWait. Every error is a *db.ValidationError.
func claimParams(req *wire.ClaimRequest) (db.RunClaimParams, time.Duration, error) {
	invalid := func(field, format string, args ...any) (db.RunClaimParams, time.Duration, error) {
		return db.RunClaimParams{}, 0, &db.ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	p := db.RunClaimParams{WorkerID: req.WorkerID, Types: req.Types, Max: 1, Lease: db.DefaultLease}
	if err := checkWorkerID(req.WorkerID); err != nil {
		return db.RunClaimParams{}, 0, err
	}
	switch {
	case len(req.Types) == 0:
		return invalid("types", "types is required: the job types this worker runs, such as [\"thumbnail\"]")
	case len(req.Types) > maxClaimTypes:
		return invalid("types", "types lists %d types; at most %d are allowed", len(req.Types), maxClaimTypes)
	}
	for _, t := range req.Types {
		if !IsJobType(t) {
			return invalid("types", "type %q is not a job type: 1 to %d letters, digits and _ . : -", t, maxTypeLen)
		}
	}
	if req.Max != nil {
		if *req.Max < 1 || *req.Max > wire.MaxClaim {
			return invalid("max", "max must be from 1 to %d, not %d", wire.MaxClaim, *req.Max)
		}
		p.Max = *req.Max
	}
	lease, err := durationField("lease", req.Lease, db.DefaultLease, db.DefaultLease.String(), wire.MinLease, wire.MaxLease)
	if err != nil {
		return db.RunClaimParams{}, 0, err
	}
	p.Lease = lease
	wait, err := durationField("wait", req.Wait, wire.DefaultClaimWait, wire.DefaultClaimWait.String(), 0, wire.MaxClaimWait)
	if err != nil {
		return db.RunClaimParams{}, 0, err
	}
	return p, wait, nil
}

// durationField parses an optional duration field: fallback when absent
// (which absent says in an error), else a Go duration string from lo to
// hi. Errors are *db.ValidationError.
func durationField(field string, raw json.RawMessage, fallback time.Duration, absent string, lo, hi time.Duration) (time.Duration, error) {
	if isAbsent(raw) {
		return fallback, nil
	}
	var v db.Duration
	if err := v.UnmarshalJSON(raw); err != nil {
		return 0, &db.ValidationError{Field: field, Msg: fmt.Sprintf("%s: %v", field, err)}
	}
	if d := time.Duration(v); d < lo || d > hi {
		return 0, &db.ValidationError{Field: field, Msg: fmt.Sprintf("%s must be from %s to %s, not %s; omit it for %s", field, lo, hi, d, absent)}
	}
	return time.Duration(v), nil
}

// claimAnswer is the wire form of claims, made waited after the request
// arrived.
func claimAnswer(claims []db.Claim, waited time.Duration) wire.ClaimResponse {
	out := wire.ClaimResponse{Claims: make([]wire.Claimed, 0, len(claims)), Waited: db.Duration(waited)}
	for _, c := range claims {
		out.Claims = append(out.Claims, wire.Claimed{Job: c.Job, RunID: c.RunID, Generation: c.Job.LeaseGeneration})
	}
	return out
}

// handleHeartbeat serves POST /jobs/{id}/heartbeat: it extends the lease
// held with generation and says whether cancellation was requested; 409 when
// the generation no longer holds the job.
func (h *handler) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	var req wire.HeartbeatRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		h.error(w, r, err)
		return
	}
	if req.Generation == nil {
		h.error(w, r, &db.ValidationError{Field: "generation", Msg: "generation is required: the one the claim answered"})
		return
	}
	lease, err := durationField("lease", req.Lease, 0, "the claim's lease", wire.MinLease, wire.MaxLease)
	if err != nil {
		h.error(w, r, err)
		return
	}
	hb, err := h.store.RunHeartbeat(r.Context(), db.RunHeartbeatParams{JobID: id, Generation: *req.Generation, Lease: lease, Remote: true})
	if err != nil {
		h.reportFailed(w, r, id, *req.Generation, false, err)
		return
	}
	h.remote.hold(id, *req.Generation, hb.LeaseUntil)
	h.writeJSON(w, r, http.StatusOK, wire.HeartbeatResponse{LeaseUntil: hb.LeaseUntil, CancelRequested: hb.CancelRequested})
}

// handleComplete serves POST /jobs/{id}/complete: it records how the run
// leased with generation ended and answers the job as it moves on; 409 when
// the generation no longer holds the job, and nothing is changed then.
func (h *handler) handleComplete(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	var req wire.CompleteRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		h.error(w, r, err)
		return
	}
	if err := validateComplete(&req); err != nil {
		h.error(w, r, err)
		return
	}
	job, err := h.store.RunFinish(r.Context(), db.RunFinishParams{
		JobID: id, Generation: *req.Generation, Outcome: req.Outcome,
		Error: req.Error, Retryable: req.Retryable == nil || *req.Retryable, Output: req.Output, Remote: true,
	})
	if err != nil {
		h.reportFailed(w, r, id, *req.Generation, true, err)
		return
	}
	h.remote.end(id, *req.Generation)
	if job.State == db.StateReady {
		h.due(job.Type, 1) // a released job, or the next slot of a recurring one
	}
	h.writeJSON(w, r, http.StatusOK, job)
}

// validateComplete checks a completion; errors are *db.ValidationError.
func validateComplete(req *wire.CompleteRequest) error {
	if req.Generation == nil {
		return &db.ValidationError{Field: "generation", Msg: "generation is required: the one the claim answered"}
	}
	switch req.Outcome {
	case db.OutcomeSucceeded, db.OutcomeFailed, db.OutcomeTimedOut, db.OutcomeCancelled, db.OutcomeReleased:
	case "":
		return &db.ValidationError{Field: "outcome", Msg: "outcome is required: succeeded, failed, timed_out, cancelled or released"}
	default:
		return &db.ValidationError{Field: "outcome", Msg: fmt.Sprintf("outcome %q is not one a worker reports; use succeeded, failed, timed_out, cancelled or released", req.Outcome)}
	}
	return nil
}

// reportFailed answers a heartbeat or (report) completion of job id with
// generation that the store refused with err. A stale generation's lease
// is over, and the answer's detail says why, as the job and its runs tell
// it; no job of that id is 404 (the worker routes take the id a claim
// answered, not a name).
func (h *handler) reportFailed(w http.ResponseWriter, r *http.Request, id string, gen int64, report bool, err error) {
	if !errors.Is(err, db.ErrStale) && !errors.Is(err, db.ErrNotFound) {
		h.error(w, r, err)
		return
	}
	h.remote.end(id, gen)
	j, getErr := h.store.JobGet(r.Context(), id)
	if errors.Is(getErr, db.ErrNotFound) || getErr == nil && j.ID != id { // none, or a name's
		h.error(w, r, noJobWithID(id))
		return
	}
	h.error(w, r, &detailError{err: err, detail: h.staleDetail(r, j, gen, report, getErr == nil), state: j.State}) // "" when not read
}

// staleDetail says why generation gen no longer holds job j (read, when
// known), from the run of that generation among the job's latest: a
// worker that hears "its lease expired" when its run had ended with its
// own earlier report, was ended by the server past its timeout, or was
// never claimed with gen, looks for the wrong cause.
func (h *handler) staleDetail(r *http.Request, j db.Job, gen int64, report, known bool) string {
	const stop, late = "; stop the run", " (a report of how it ended is kept on the run as its late outcome, and changes nothing else)"
	generic := fmt.Sprintf("generation %d no longer holds job %s: its lease expired or another worker claimed it%s%s", gen, j.ID, stop, late)
	if !known {
		return generic
	}
	if gen < 1 || gen > j.LeaseGeneration {
		return fmt.Sprintf("generation %d never held job %s (its latest claim has generation %d): send the generation the claim answered; nothing was recorded", gen, j.ID, j.LeaseGeneration)
	}
	runs, _, err := h.store.RunList(r.Context(), db.RunListParams{JobID: j.ID, Limit: 20})
	if err != nil {
		return generic
	}
	for _, run := range runs {
		if run.Generation != gen {
			continue
		}
		switch run.Outcome {
		case db.OutcomeRunning, db.OutcomeLeaseExpired:
			again := ""
			if gen < j.LeaseGeneration {
				again = fmt.Sprintf(", and the job was claimed again since (generation %d)", j.LeaseGeneration)
			}
			return fmt.Sprintf("generation %d no longer holds job %s: its lease expired%s%s%s", gen, j.ID, again, stop, late)
		case db.OutcomeTimedOut:
			return fmt.Sprintf("generation %d no longer holds job %s: its run ended timed_out (its runs say why)%s%s", gen, j.ID, stop, late)
		}
		if !report {
			return fmt.Sprintf("generation %d no longer holds job %s: its run already ended %s; nothing was renewed", gen, j.ID, run.Outcome)
		}
		return fmt.Sprintf("generation %d no longer holds job %s: its run already ended %s, and this report is not the one it ended with sent again (a repeat has the same outcome, error and output); nothing was recorded", gen, j.ID, run.Outcome)
	}
	return generic
}

// noJobWithID is the 404 of a heartbeat or completion of job id when no
// job has that id: the worker routes take the id a claim answered, not a
// name.
func noJobWithID(id string) error {
	return &detailError{err: db.ErrNotFound, detail: fmt.Sprintf(
		"no job has the id %q; heartbeats and completions name a job by the id its claim answered, not by its name", id)}
}

// shuttingDown reports whether the server has begun shutting down.
func (h *handler) shuttingDown() bool {
	select {
	case <-h.shutdown:
		return true
	default:
		return false
	}
}

// WakeClaims tells the waiting POST /claims that jobs became due through
// a write of any node, which this process learns from PostgreSQL's NOTIFY:
// due says how many of each type (empty: none); nil, that jobs of any type
// may be due, how many unknown. It never blocks.
func (a *API) WakeClaims(due map[string]int) {
	if due == nil {
		a.h.claimers.wakeAll()
		return
	}
	for typ, n := range due {
		a.h.claimers.wake(typ, n)
	}
}

// due tells the in-process dispatcher and the waiting claims of typ that n
// jobs of typ may be due now, unless the store tells them.
func (h *handler) due(typ string, n int) {
	if h.storeAnnounces {
		return
	}
	h.wake(map[string]int{typ: n})
	h.claimers.wake(typ, n)
}

// dueAny is due for jobs of any type, how many unknown.
func (h *handler) dueAny() {
	if h.storeAnnounces {
		return
	}
	h.wake(nil)
	h.claimers.wakeAll()
}
