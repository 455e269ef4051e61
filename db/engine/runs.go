package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/failpoint"
	"github.com/sked-dev/sked/internal/clip"
	"github.com/sked-dev/sked/lifecycle"
	"github.com/sked-dev/sked/schedule"
)

// RunList returns a page of a job's runs, newest first; see db.Store.
func (s *Store) RunList(ctx context.Context, p db.RunListParams) ([]db.Run, int64, error) {
	return jobPage(ctx, s, "runs", p.JobID, p.Cursor, p.Limit, s.d.RunsPage, func(r db.Run) int64 { return r.ID })
}

// RunsLive reads the live runs of jobs in one statement; see db.Store.
func (s *Store) RunsLive(ctx context.Context, jobs []db.Job) ([]db.Run, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	leases := make([]Lease, len(jobs))
	held := make(map[Lease]bool, len(jobs))
	for i, j := range jobs {
		leases[i] = Lease{j.ID, j.LeaseGeneration}
		held[leases[i]] = true
	}
	runs, err := s.d.RunsLive(ctx, leases)
	s.health.saw(err, false)
	if err != nil {
		return nil, fmt.Errorf("read live runs: %w", err)
	}
	live := runs[:0]
	for _, r := range runs {
		if held[Lease{r.JobID, r.Generation}] {
			live = append(live, r)
		}
	}
	return live, nil
}

// maxHeld bounds the jobs RunsHeld reads: more than any worker's slots.
const maxHeld = 10000

// RunsHeld returns the jobs whose live lease worker holds; see db.Store.
func (s *Store) RunsHeld(ctx context.Context, worker string) ([]db.Claim, error) {
	jobs, err := s.d.JobsPage(ctx, db.JobListParams{State: db.StateRunning, LeaseOwner: worker}, maxHeld)
	s.health.saw(err, false)
	if err != nil {
		return nil, fmt.Errorf("read the jobs %s holds: %w", worker, err)
	}
	now := s.stored(s.Now())
	jobs = slices.DeleteFunc(jobs, func(j db.Job) bool { return !holds(j, Lease{j.ID, j.LeaseGeneration}, now) })
	runs, err := s.RunsLive(ctx, jobs)
	if err != nil {
		return nil, err
	}
	runOf := make(map[string]db.Run, len(runs))
	for _, r := range runs {
		runOf[r.JobID] = r
	}
	claims := make([]db.Claim, 0, len(jobs))
	for _, j := range jobs {
		if r, ok := runOf[j.ID]; ok {
			j.Slot = cmp.Or(r.Slot, j.Slot) // a triggered run's slot is its claim's time, not the pending slot
			claims = append(claims, db.Claim{Job: j, RunID: r.ID})
		}
	}
	return claims, nil
}

// jobPage reads a page of the rows (what: runs, events) of the job ref
// names, newest first, with read, which takes the job's id and reads up
// to limit rows with an id below before; it tells a job without rows from
// no job. See db.Store.RunList.
func jobPage[T any](ctx context.Context, s *Store, what, ref string, cursor int64, limit int,
	read func(ctx context.Context, job string, before int64, limit int) ([]T, error), key func(T) int64) ([]T, int64, error) {
	id, err := s.resolve(ctx, ref)
	if err != nil {
		return nil, 0, wrap(err, "list %s of %s", what, ref)
	}
	limit = db.PageLimit(limit)
	items, err := read(ctx, id, db.RunsBefore(cursor), limit+1)
	if err == nil && len(items) == 0 {
		_, err = s.d.JobGet(ctx, id) // no rows, or no such job?
	}
	s.health.saw(err, false)
	if err != nil {
		return nil, 0, wrap(err, "list %s of %s", what, ref)
	}
	items, next := db.Page(items, limit, key)
	return append([]T{}, items...), next, nil
}

// RunActivity summarises the runs of p's window; see db.Store.
func (s *Store) RunActivity(ctx context.Context, p db.RunActivityParams) (db.RunActivity, error) {
	p.Scan, p.MaxLateness = cmp.Or(p.Scan, db.DefaultActivityScan), cmp.Or(p.MaxLateness, db.DefaultActivitySamples)
	finished, starts, err := s.d.RunStarts(ctx, p)
	s.health.saw(err, false)
	if err != nil {
		return db.RunActivity{}, fmt.Errorf("read run activity: %w", err)
	}
	a := db.RunActivity{Finished: finished}
	for _, st := range starts {
		a.Lateness = append(a.Lateness, st.Started.Sub(lifecycle.DueAt(st.JobID, st.Slot, st.Jitter)))
	}
	return a, nil
}

// RunClaim leases due jobs and writes their runs in one transaction; see
// db.Store.
func (s *Store) RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error) {
	if p.Max <= 0 {
		return nil, nil
	}
	if s.ClockGuard != nil {
		if hold, _ := s.ClockGuard.Holding(); hold {
			return nil, nil // the clock went back: no slot fires twice
		}
	}
	s.claiming.Add(1)
	var claims []db.Claim
	defer func() {
		if p.More && len(claims) == p.Max {
			s.moreUntil.Store(int64(time.Since(s.epoch) + claimGap))
		}
		s.claiming.Add(-1)
		signal(s.claimsDone)
	}()
	a := ClaimArgs{
		Worker: p.WorkerID, Types: distinct(p.Types), Max: p.Max,
		Lease: cmp.Or(p.Lease, db.DefaultLease), Ahead: max(p.Ahead, 0),
	}
	quick, rest, err := s.claimQuick(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	claims = quick
	if rest {
		a.Max -= len(quick)
		more, err := s.claim(ctx, a)
		if err != nil && (len(quick) == 0 || errors.Is(err, db.ErrCommitUnknown)) {
			// Not known whether the rest committed: the caller looks up
			// what its worker holds, the quick claim's jobs among them.
			return nil, err
		}
		// Should the rest fail, the quick claim's jobs, committed, run.
		claims = append(quick, more...)
		byDue(claims)
	}
	failpoint.Hit(failpoint.AfterClaimCommit)
	return claims, nil
}

// claimQuick claims a's jobs with the dialect's ClaimQuick, when it has
// one, unless some of the jobs last found due needed more writes after
// their claims; rest says the ordinary claim is to take the rest (all of them,
// when claimQuick did not try).
func (s *Store) claimQuick(ctx context.Context, a ClaimArgs) ([]db.Claim, bool, error) {
	q, ok := s.seen.quiet(a.Worker, a.Types)
	qc, can := s.d.(QuickClaimer)
	if !ok || !can || s.unquick.Load() || s.health.full() {
		return nil, true, nil
	}
	claims, rest, err := qc.ClaimQuick(ctx, s.txClock(), a, q)
	s.health.saw(err, len(claims) > 0)
	byDue(claims)
	if rest {
		// Some due jobs need the ordinary claim: so may the next ones, and
		// a claim in two transactions costs a round trip more than the
		// ordinary claim alone.
		s.unquick.Store(true)
	}
	return claims, rest, err
}

// byDue sorts claims by their jobs' due times, the order they are claimed
// in.
func byDue(claims []db.Claim) {
	slices.SortFunc(claims, func(a, b db.Claim) int { return a.Job.NextRunAt.Compare(*b.Job.NextRunAt) })
}

// quickClaimable reports whether a claim of j writes nothing after it (see
// QuickClaimer): j is a one-off job without notifications (so, without a
// ping), which startFiring passes as claimed.
func quickClaimable(j db.Job) bool { return !j.Recurring() && j.Notify == nil }

// claim leases due jobs as a says and writes their runs in one transaction
// with what they need after their claims: the worker's record, the misfire
// policy, pings.
func (s *Store) claim(ctx context.Context, a ClaimArgs) ([]db.Claim, error) {
	var (
		claims []db.Claim
		seenAt time.Time // when the claim recorded its worker; zero: it did not
	)
	err := s.inTx(ctx, func(tx Tx) error {
		// The claim first: it reads the transaction's clock with it, where
		// the worker's record (seldom written) needs it before.
		got, err := tx.JobsClaim(ctx, a)
		if err != nil {
			return err
		}
		now := tx.Now()
		recorded, err := s.recordWorker(ctx, tx, a.Worker, a.Types, now)
		if err != nil {
			return err
		}
		if recorded {
			seenAt = now
		}
		if len(got) == 0 && !recorded {
			return errNothingWritten
		}
		byDue(got)
		claims = got[:0]
		var pings []db.Event
		for _, c := range got {
			c, ok, err := s.startFiring(ctx, tx, c)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			claims = append(claims, c)
			if pinged(c.Job) {
				start := s.stored(lifecycle.StartsAt(c.Job, c.Job.UpdatedAt)) // the claim's time
				pings = append(pings, s.event(c.Job, db.EventStarted, start, db.RunEvent{RunID: c.RunID,
					Slot: c.Job.Slot, Attempt: c.Job.Attempt, Generation: c.Job.LeaseGeneration, StartedAt: &start}))
			}
		}
		if len(pings) > 0 {
			return tx.EventsInsert(ctx, pings)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	if !seenAt.IsZero() {
		s.seen.recorded(a.Worker, a.Types, seenAt)
	}
	if len(claims) > 0 && !slices.ContainsFunc(claims, func(c db.Claim) bool { return !quickClaimable(c.Job) }) {
		s.unquick.Store(false) // the due jobs are quick ones again
	}
	return claims, nil
}

// distinct is types without repeats, in order: a store's claim picks up to
// its limit of each type it is given, and would count a repeated type's
// jobs twice against the limit.
func distinct(types []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(types)))
}

// startFiring applies the misfire policy to a just-claimed recurring job. It
// returns the claim as it will run, or ok=false when the policy runs nothing
// now and the claim was undone.
func (s *Store) startFiring(ctx context.Context, tx Tx, c db.Claim) (db.Claim, bool, error) {
	j, now := c.Job, c.Job.UpdatedAt // the claim's time (see Tx.JobsClaim)
	switch {
	case !j.Recurring():
		return c, true, nil
	case j.Triggered:
		// The handler sees the run's own time; the row keeps the
		// schedule's pending slot.
		c.Job.Slot = s.storedPtr(now)
		return c, true, nil
	case j.Attempt > 1:
		// lifecycle.RetryPending before the claim's increment: the slot
		// runs late, and the slots that passed meanwhile are the overlap
		// policy's when the firing ends.
		return c, true, nil
	}
	sched, err := parse(j)
	if unparseable(err) {
		// The claim is undone, its run and its attempt: the slot never
		// ran, and no retry of it is pending.
		if err := tx.RunsDelete(ctx, []int64{c.RunID}); err != nil {
			return db.Claim{}, false, fmt.Errorf("undo run of job %s: %w", j.ID, err)
		}
		was := j
		was.State, was.Attempt = db.StateReady, j.Attempt-1
		_, err = s.setAside(ctx, tx, j, was, err)
		return db.Claim{}, false, err
	}
	if err != nil {
		return db.Claim{}, false, err
	}
	f := lifecycle.Claimed(sched, j.Misfire, *j.Slot, now, s.MisfireGrace, s.CatchUpWindow, schedule.Offset(j.ID, time.Duration(j.Jitter)))
	if f.Run && f.Slot.Equal(*j.Slot) {
		return c, true, nil
	}
	// The claim wrote a run of the slot the job was waiting for; the
	// policy runs another slot or none.
	if err := tx.RunsDelete(ctx, []int64{c.RunID}); err != nil {
		return db.Claim{}, false, fmt.Errorf("undo run of misfired job %s: %w", j.ID, err)
	}
	for _, m := range s.splitStepped(f.Missed) {
		if err := s.insertMissed(ctx, tx, j.ID, m); err != nil {
			return db.Claim{}, false, err
		}
	}
	to := j
	to.Slot, to.MissedSlots = s.storedPtr(f.Slot), j.MissedSlots+f.Missed.Total
	if !f.Run {
		to.State, to.LeaseOwner, to.LeaseUntil, to.Attempt = db.StateReady, "", nil, 0
		to.NextRunAt = s.storedPtr(lifecycle.DueAt(j.ID, f.Slot, time.Duration(j.Jitter)))
		_, err := s.update(ctx, tx, j, to)
		return db.Claim{}, false, err
	}
	to.Attempt = 1
	if to, err = s.update(ctx, tx, j, to); err != nil {
		return db.Claim{}, false, err
	}
	ids, err := tx.RunsInsert(ctx, []db.Run{{
		JobID: j.ID, Slot: to.Slot, Attempt: to.Attempt, Generation: j.LeaseGeneration, WorkerID: j.LeaseOwner,
		StartedAt: s.storedPtr(lifecycle.StartsAt(to, now)), Outcome: db.OutcomeRunning,
	}})
	if err != nil {
		return db.Claim{}, false, fmt.Errorf("insert run of misfired job %s: %w", j.ID, err)
	}
	return db.Claim{Job: to, RunID: ids[0]}, true, nil
}

// RunHeartbeat extends a live lease; see db.Store.
func (s *Store) RunHeartbeat(ctx context.Context, p db.RunHeartbeatParams) (db.Heartbeat, error) {
	var (
		hb    db.Heartbeat
		ended error // a remote run ended here, past its timeout
	)
	err := s.inTx(ctx, func(tx Tx) error {
		lease := p.Lease
		if p.Remote || lease == 0 {
			held, err := tx.JobsLeased(ctx, []Lease{{p.JobID, p.Generation}})
			if err != nil {
				return fmt.Errorf("read leased job: %w", err)
			}
			if len(held) == 1 && holds(held[0], Lease{p.JobID, p.Generation}, s.stored(tx.Now())) {
				if p.Remote {
					if servePool(held[0]) {
						return db.ServeRunError(held[0])
					}
					if ended, err = s.endPastTimeout(ctx, tx, held[0]); ended != nil || err != nil {
						return err
					}
				}
				if lease == 0 {
					lease = time.Duration(held[0].LeaseFor) // as long as the claim leased it for
				}
			}
		}
		until := s.stored(tx.Now().Add(cmp.Or(lease, db.DefaultLease)))
		cancel, leaseUntil, err := tx.Heartbeat(ctx, p.JobID, p.Generation, until)
		if errors.Is(err, db.ErrNotFound) {
			return db.ErrStale
		}
		hb = db.Heartbeat{LeaseUntil: leaseUntil, CancelRequested: cancel}
		return err
	})
	if err == nil && ended != nil {
		err = ended
	}
	if err != nil {
		return db.Heartbeat{}, wrap(err, "heartbeat %s/%d", p.JobID, p.Generation)
	}
	return hb, nil
}

// RunReapExpired returns expired leases; see db.Store. Every write is fenced
// by the generation it read, so reapers on several nodes reap each lease
// once.
func (s *Store) RunReapExpired(ctx context.Context) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx Tx) error {
		jobs, err := tx.JobsExpired(ctx, maxSweep)
		if err != nil {
			return err
		}
		ps := make([]db.RunFinishParams, len(jobs))
		for i, j := range jobs {
			ps[i] = db.RunFinishParams{
				JobID: j.ID, Generation: j.LeaseGeneration, Outcome: db.OutcomeLeaseExpired, Retryable: true,
				Error: fmt.Sprintf("lease expired at %s: worker %s stopped heartbeating", j.LeaseUntil.Format(time.RFC3339Nano), j.LeaseOwner),
			}
		}
		err = s.finish(ctx, tx, pointers(jobs), ps)
		n = len(jobs)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reap expired leases: %w", err)
	}
	return n, nil
}

// finishLeased finishes the runs of ps inside tx, each under its lease,
// and returns each one's result. One whose generation no longer holds a
// live lease changes nothing but the record of its late outcome, and its
// result is db.ErrStale; unless it repeats the report its run already
// ended with (a worker that lost the answer to it sends it again), which
// was recorded: its result is the job as it is now, marked repeated.
func (s *Store) finishLeased(ctx context.Context, tx Tx, ps []db.RunFinishParams) ([]finishResult, error) {
	leases := make([]Lease, len(ps))
	for i, p := range ps {
		leases[i] = Lease{p.JobID, p.Generation}
	}
	held, err := tx.JobsLeased(ctx, leases)
	if err != nil {
		return nil, fmt.Errorf("read leased jobs: %w", err)
	}
	now := s.stored(tx.Now())                 // as precise as the lease's end
	byLease := make(map[Lease]int, len(held)) // index into held
	for k, j := range held {
		if l := (Lease{j.ID, j.LeaseGeneration}); holds(j, l, now) {
			byLease[l] = k
		}
	}
	var (
		jobs    = make([]*db.Job, 0, len(byLease)) // into held, which finish moves on
		live    = make([]db.RunFinishParams, 0, len(byLease))
		stale   []int                  // indexes into ps
		order   = make([]int, len(ps)) // index into jobs, or -1 when stale or refused
		refused map[int]db.Job         // by index into ps: remote reports of sked serve's own runs
	)
	for i := range ps {
		k, ok := byLease[leases[i]]
		if ok && ps[i].Remote && servePool(held[k]) {
			if refused == nil {
				refused = map[int]db.Job{}
			}
			order[i], refused[i] = -1, held[k]
			continue
		}
		if !ok {
			order[i], stale = -1, append(stale, i)
			continue
		}
		delete(byLease, leases[i]) // a lease finished twice in one group: the second is stale
		order[i] = len(jobs)
		jobs, live = append(jobs, &held[k]), append(live, ps[i])
	}
	if err := s.finish(ctx, tx, jobs, live); err != nil {
		return nil, err
	}
	results := make([]finishResult, len(ps))
	for i, k := range order {
		if k >= 0 {
			results[i].job = jobs[k]
		}
	}
	for i, j := range refused {
		results[i].err = db.ServeRunError(j)
	}
	if len(stale) > 0 {
		// After finish, so that a report repeated within this group sees
		// its run ended by the first.
		current := make(map[string]*db.Job, len(held))
		for k := range held {
			current[held[k].ID] = &held[k]
		}
		if err := s.finishStale(ctx, tx, ps, stale, current, results); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// remoteTimeoutGrace is how long past its timeout a remote worker's run
// may go on, measured from its start on the store's clock, before a
// renewal ends it: the worker's own end of it (later started, by the
// claim's way there) comes first.
const remoteTimeoutGrace = time.Minute

// endPastTimeout ends, inside tx, the run of j (a live lease renewed by a
// remote worker) when it has gone on past its job's timeout and
// remoteTimeoutGrace: as timed_out, retried while attempts are left, as
// the pool ends its own. It then returns the conflict the renewal answers,
// which tells the worker to stop; a worker that ignores timeouts would
// otherwise renew its run for ever.
func (s *Store) endPastTimeout(ctx context.Context, tx Tx, j db.Job) (ended error, err error) {
	runs, err := tx.RunsOf(ctx, []Lease{{j.ID, j.LeaseGeneration}})
	if err != nil {
		return nil, fmt.Errorf("read the run of %s/%d: %w", j.ID, j.LeaseGeneration, err)
	}
	timeout := cmp.Or(time.Duration(j.Timeout), db.DefaultTimeout)
	// Added one at a time: timeout+remoteTimeoutGrace wraps round to a
	// negative duration for a timeout within a minute of the longest.
	if len(runs) != 1 || runs[0].StartedAt == nil || !tx.Now().After(runs[0].StartedAt.Add(timeout).Add(remoteTimeoutGrace)) {
		return nil, nil
	}
	err = s.finish(ctx, tx, []*db.Job{&j}, []db.RunFinishParams{{JobID: j.ID, Generation: j.LeaseGeneration,
		Outcome: db.OutcomeTimedOut, Retryable: true,
		Error: fmt.Sprintf("timed out after %s: worker %s went on renewing its lease, and the server ended the run", timeout, j.LeaseOwner)}})
	if err != nil {
		return nil, fmt.Errorf("end the run of %s/%d past its timeout: %w", j.ID, j.LeaseGeneration, err)
	}
	// The job's state as the run ended (ready for its retry, or dead), not
	// running: the answer tells the worker the job moved on without it.
	return &db.ConflictError{State: j.State, Msg: fmt.Sprintf(
		"the run of job %s passed its timeout (%s) and was ended timed_out; stop it (its report is kept as its late outcome)", j.ID, timeout)}, nil
}

// holds reports whether l is j's live lease at now: j is running under
// l's generation, and the lease has not ended. Only a live lease may be
// renewed, or its run finished by its worker's report.
func holds(j db.Job, l Lease, now time.Time) bool {
	return j.ID == l.JobID && j.LeaseGeneration == l.Generation && j.State == db.StateRunning &&
		j.LeaseUntil != nil && !j.LeaseUntil.Before(now)
}

// servePool reports whether j's lease is held by one of sked serve's own
// pools, whose runs no remote worker may renew or report.
func servePool(j db.Job) bool { return db.ServeWorker(j.LeaseOwner) }

// finishStale answers into results[i] the reports ps[i], i in stale, whose
// lease is no longer live. A repeat of the report its run ended with
// (outcome, error and output) is marked repeated, with the job as it is
// now from current, the rows this transaction read or wrote; a job not
// among them (claimed again since) is left for commitGroup to read once
// the transaction has ended, so that no row is locked out of the group's
// order and no second connection is waited for inside the transaction.
// Any other report is db.ErrStale, and its outcome is recorded on its run
// as the late outcome.
func (s *Store) finishStale(ctx context.Context, tx Tx, ps []db.RunFinishParams, stale []int, current map[string]*db.Job, results []finishResult) error {
	leases := make([]Lease, len(stale))
	for k, i := range stale {
		leases[k] = Lease{ps[i].JobID, ps[i].Generation}
	}
	runs, err := tx.RunsOf(ctx, leases)
	if err != nil {
		return fmt.Errorf("read runs of stale reports: %w", err)
	}
	ended := make(map[Lease]db.Run, len(runs))
	for _, r := range runs {
		ended[Lease{r.JobID, r.Generation}] = r
	}
	var late []RunEnd
	for k, i := range stale {
		r, ok := ended[leases[k]]
		switch {
		case ok && ps[i].Remote && db.ServeWorker(r.WorkerID):
			results[i].err = db.ErrStale // sked serve's own run: a remote report records nothing on it
		case ok && repeats(ps[i], r):
			results[i] = finishResult{job: current[ps[i].JobID], repeated: true} // no job: read after the commit
		default:
			results[i].err = db.ErrStale
			if ok && takesLate(r) {
				late = append(late, runEnd(ps[i], false))
			}
		}
	}
	if len(late) > 0 {
		if err := tx.RunsLate(ctx, late); err != nil {
			return fmt.Errorf("record late outcomes: %w", err)
		}
	}
	return nil
}

// takesLate reports whether r records the outcome its worker reports after
// its lease moved on: a run still running, or ended by the server (its
// lease expired, or it was timed out while its worker renewed it), that
// has no late outcome yet. A timed_out run its worker reported itself
// takes one too (the run cannot tell who ended it): a worker sends
// nothing after its own report but a repeat, which is no news.
func takesLate(r db.Run) bool {
	return r.Generation > 0 && r.LateOutcome == "" &&
		(r.Outcome == db.OutcomeRunning || r.Outcome == db.OutcomeLeaseExpired || r.Outcome == db.OutcomeTimedOut)
}

// repeats reports whether p is the report that ended r, sent again: the
// same outcome, error and output (p's as RunFinish made them text, as r
// keeps them). Another report of r's lease was never recorded, so it is not
// answered as if it had been.
func repeats(p db.RunFinishParams, r db.Run) bool {
	return r.Outcome == p.Outcome && r.Error == p.Error && r.Output == p.Output
}

// finish closes the runs of jobs' current leases as ps say and moves each
// job on, in place, inside tx, with few statements for all of them. Every
// write is fenced by the lease generation read in the same transaction.
func (s *Store) finish(ctx context.Context, tx Tx, jobs []*db.Job, ps []db.RunFinishParams) error {
	if len(jobs) == 0 {
		return nil
	}
	now := tx.Now()
	updates := make([]JobUpdate, 0, len(jobs))
	ends := make([]RunEnd, len(jobs))
	var (
		missed []db.Run
		events []db.Event
	)
	for i, after := range jobs {
		j := *after // as read; after is moved on
		// The run's start: a schedule's next firing is decided from it, and
		// the events of a ping or of a firing that gave up tell it. A
		// one-off run that ends otherwise is not read.
		var (
			sched *schedule.Schedule
			run   = db.Run{StartedAt: &now}
			err   error
		)
		if j.Recurring() {
			if sched, err = parse(j); unparseable(err) {
				// The run ends as reported; the job waits for a mend. A
				// run handed back was not an attempt: its slot never ran.
				was := j
				if lifecycle.HandedBack(&j, ps[i], now) {
					was.Attempt = max(j.Attempt-1, 0)
				}
				if *after, err = s.setAside(ctx, tx, j, was, err); err != nil {
					return err
				}
				ends[i] = runEnd(ps[i], false)
				continue
			}
			if err != nil {
				return err
			}
			if run, err = liveRun(ctx, tx, j, now); err != nil {
				return err
			}
		}
		r := lifecycle.Finished(&j, sched, ps[i], *run.StartedAt, now, s.RandFunc)
		if !j.Recurring() && (pinged(j) || r.GaveUp) {
			if run, err = liveRun(ctx, tx, j, now); err != nil {
				return err
			}
		}
		missed = append(missed, s.missedRuns(j.ID, r.Passed, now)...)
		for _, m := range s.splitStepped(r.Missed) {
			missed = append(missed, s.missedRuns(j.ID, m, now)...)
		}
		*after = s.finished(j, r, ps[i].Outcome, now)
		updates = append(updates, JobUpdate{Job: *after, From: db.StateRunning})
		ends[i] = runEnd(ps[i], r.GaveUp)
		events = append(events, s.runEvents(j, *after, r, ps[i], run, now)...)
		if j.PauseRequested && after.State == db.StatePaused {
			// The pause asked for during the run begins: on the timeline,
			// by sked, as a pause that runs out is ended.
			events = append(events, s.controlEvent(db.WithActor(ctx, skedActor), tx, db.EventPaused, j.ID,
				controlDetail(db.EventPaused, j, *after)))
		}
	}
	if len(missed) > 0 {
		if _, err := tx.RunsInsert(ctx, missed); err != nil {
			return fmt.Errorf("insert missed runs: %w", err)
		}
	}
	if len(events) > 0 {
		if err := tx.EventsInsert(ctx, events); err != nil {
			return fmt.Errorf("record events: %w", err)
		}
	}
	if len(updates) > 0 {
		if err := tx.JobsUpdate(ctx, updates); err != nil {
			return fmt.Errorf("update finished jobs: %w", err)
		}
	}
	if err := tx.RunsEnd(ctx, ends); err != nil {
		return fmt.Errorf("close runs: %w", err)
	}
	return s.wakeIfDue(ctx, tx, jobs...)
}

// pointers points at each of jobs.
func pointers(jobs []db.Job) []*db.Job {
	out := make([]*db.Job, len(jobs))
	for i := range jobs {
		out[i] = &jobs[i]
	}
	return out
}

// liveRun is the run of j's lease, read in tx before it is closed, with
// its StartedAt set: now when it has none, or when there is no such run
// (then nothing else is set).
func liveRun(ctx context.Context, tx Tx, j db.Job, now time.Time) (db.Run, error) {
	run, err := tx.RunLive(ctx, j.ID, j.LeaseGeneration)
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return db.Run{}, fmt.Errorf("read run of %s: %w", j.ID, err)
	}
	if run.StartedAt == nil {
		run.StartedAt = &now
	}
	return run, nil
}

// runEnd is how the run of p's lease ended.
func runEnd(p db.RunFinishParams, gaveUp bool) RunEnd {
	return RunEnd{Lease: Lease{p.JobID, p.Generation}, Outcome: p.Outcome, Error: p.Error, Output: p.Output, GaveUp: gaveUp}
}

// finished is j as it leaves the run that ended at now with outcome, moved
// on as r says.
func (s *Store) finished(j db.Job, r lifecycle.Result, outcome db.Outcome, now time.Time) db.Job {
	j.State, j.Attempt, j.LastError, j.Triggered = r.State, r.Attempt, r.LastError, r.Triggered
	if r.State != db.StateReady || j.Slot == nil || !r.Slot.Equal(*j.Slot) {
		j.RescheduledAt = nil // the firing ended; the next is the new schedule's
	}
	j.Slot, j.NextRunAt = s.storedPtr(r.Slot), s.storedPtr(r.NextRunAt)
	j.LeaseOwner, j.LeaseUntil, j.CancelRequested = "", nil, false
	if j.PauseRequested {
		// Paused during the run: the pause begins now.
		if j.State == db.StateReady {
			j.State, j.Triggered, j.QuietSince = db.StatePaused, false, nil
		} else {
			j.PauseReason, j.PauseUntil = "", nil
		}
		j.PauseRequested = false
	}
	j.MissedSlots += r.Passed.Total + r.Missed.Total
	if outcome == db.OutcomeSucceeded {
		// Any run that succeeds ends a quiet spell, an extra run too.
		j.LastSuccessAt, j.QuietSince = s.storedPtr(now), nil
	}
	switch failing := lifecycle.Failing(j, r, outcome); {
	case !failing:
		j.FailingSince = nil
	case j.FailingSince == nil:
		j.FailingSince = s.storedPtr(now)
	}
	j.UpdatedAt = s.stored(now)
	j.KeepWatchFrom()
	return j
}

// insertMissed writes one missed run per slot of m.
func (s *Store) insertMissed(ctx context.Context, tx Tx, jobID string, m lifecycle.Missed) error {
	if len(m.Slots) == 0 {
		return nil
	}
	if _, err := tx.RunsInsert(ctx, s.missedRuns(jobID, m, tx.Now())); err != nil {
		return fmt.Errorf("insert missed runs of %s: %w", jobID, err)
	}
	return nil
}

// missedRuns are the runs that record, at now, m's slots of job as missed:
// one a slot, and one for the span of the rest; none (nil) when m is empty,
// as it is at the end of most runs.
func (s *Store) missedRuns(jobID string, m lifecycle.Missed, now time.Time) []db.Run {
	if len(m.Slots) == 0 && m.Rest == nil {
		return nil
	}
	runs := make([]db.Run, len(m.Slots), len(m.Slots)+1)
	for i, slot := range m.Slots {
		runs[i] = db.Run{JobID: jobID, Slot: s.storedPtr(slot), FinishedAt: s.storedPtr(now), Outcome: db.OutcomeMissed, Reason: m.Reason}
	}
	if r := m.Rest; r != nil {
		runs = append(runs, db.Run{JobID: jobID, Slot: s.storedPtr(r.First), LastSlot: s.storedPtr(r.Last), SlotCount: r.Count,
			FinishedAt: s.storedPtr(now), Outcome: db.OutcomeMissed, Reason: m.Reason})
	}
	return runs
}

// splitStepped relabels the missed slots that a forward clock step jumped
// over as clock_step; the rest keep their reason. The span of the slots past
// those listed (m.Rest) goes with the last listed slot, whose reason is
// that of the slots the span continues.
func (s *Store) splitStepped(m lifecycle.Missed) []lifecycle.Missed {
	if len(m.Slots) == 0 && m.Rest == nil {
		return nil // nothing missed, as at the end of most runs
	}
	if s.ClockGuard == nil || len(m.Slots) == 0 {
		return []lifecycle.Missed{m}
	}
	stepped := lifecycle.Missed{Reason: db.MissedClockStep}
	kept := lifecycle.Missed{Reason: m.Reason}
	var last *lifecycle.Missed // the group of the slot last listed
	for _, slot := range m.Slots {
		last = &kept
		if s.ClockGuard.JumpedOver(slot) {
			last = &stepped
		}
		last.Slots = append(last.Slots, slot)
		last.Total++
	}
	if r := m.Rest; r != nil {
		last.Rest = r
		last.Total += r.Count
	}
	return []lifecycle.Missed{stepped, kept}
}

// Prune deletes a batch of old history in one transaction; see db.Store.
func (s *Store) Prune(ctx context.Context, p db.PruneParams) (db.Pruned, error) {
	p.Limit = cmp.Or(p.Limit, maxSweep)
	var out db.Pruned
	err := s.inTx(ctx, func(tx Tx) error {
		below, err := runsCeiling(ctx, tx, p.Before.Add(pruneMargin))
		if err != nil {
			return fmt.Errorf("find the runs to look at: %w", err)
		}
		out, err = tx.Prune(ctx, p, below)
		return err
	})
	if err != nil {
		return db.Pruned{}, fmt.Errorf("prune: %w", err)
	}
	return out, nil
}

// pruneMargin is how long after a prune's instant a run must have started
// for runsCeiling to take it as a bound. A run's row is written when it is
// claimed, at most the claim's Ahead before its start, and it finishes
// after that; the margin covers that, and a clock that stepped back a
// little. A bound taken too low only keeps some old runs until a later
// pass: it never deletes a run that finished after the prune's instant.
const pruneMargin = time.Hour

// runsCeiling returns the id of the first run it finds that started at or
// after t, by a binary search of the runs' starts by id (a few dozen reads
// of the primary key); math.MaxInt64 when it finds none. Every run from
// that one on was written after it, so it finished after t less the
// margin, and after the prune's instant. The last batch of a prune pass
// (the one that finds less than its limit) then reads the runs up to about
// t, not every run since the prune's instant: a schedule firing every
// minute writes 43,200 runs a month, and the batch holds the writer.
func runsCeiling(ctx context.Context, tx Tx, t time.Time) (int64, error) {
	ceiling := int64(math.MaxInt64)
	lo, hi := int64(0), int64(math.MaxInt64)
	for lo < hi {
		mid := lo + (hi-lo)/2
		id, started, ok, err := tx.RunStartedFrom(ctx, mid)
		switch {
		case err != nil:
			return 0, err
		case !ok:
			hi = mid
		case started.Before(t):
			lo = id + 1
		default:
			ceiling, hi = id, mid
		}
	}
	return ceiling, nil
}

// text is s as every store keeps a run's text: without NUL bytes, which
// PostgreSQL's text refuses, and with what is not UTF-8 replaced by U+FFFD,
// so that a report sent again is the one recorded, byte for byte.
func text(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
}

// tail keeps, as text, the last db.OutputTailBytes of s, from the first
// rune that begins in them.
func tail(s string) string { return clip.Tail(text(s), db.OutputTailBytes) }
