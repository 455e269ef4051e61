// Package lifecycle decides, as pure functions, what a store writes when a
// job is claimed, when its run ends and when a paused schedule resumes:
// retries with backoff, dead, the next slot of a recurring job, and the
// misfire and overlap policies with the slots they record as missed. Every
// backend applies the same decisions; none of them reads a clock.
package lifecycle

import (
	"fmt"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/schedule"
)

// MaxMissedRows bounds the missed slots listed one a row for one event (a
// night of downtime under "@every 1s" is 30,000 slots); the rest are
// recorded as one span (Missed.Rest), so that every slot is accounted for.
const MaxMissedRows = 10000

// Missed is the slots an event passed over without running them.
type Missed struct {
	Slots  []time.Time // the earliest of them, at most MaxMissedRows
	Total  int64       // how many in all
	Reason string      // db.Missed*
	// Rest is the slots after Slots, when there are more than
	// MaxMissedRows; nil otherwise.
	Rest *Span
}

// Span is Count consecutive slots of a schedule, from First to Last.
type Span struct {
	First, Last time.Time
	Count       int64
}

// Firing is what a just-claimed recurring job does.
type Firing struct {
	// Run is false when the misfire policy runs nothing now: the claim is
	// undone and the job waits for Slot.
	Run  bool
	Slot time.Time // the slot to run, or to wait for
	// Missed is what the policy passed over, reason downtime.
	Missed Missed
}

// Claimed applies the misfire policy to a recurring job claimed at now for
// its current slot; offset is the job's inside its jitter (each slot is due
// that long after its time). A slot that is late but whose successor is
// not yet due simply runs (late, not lost); only when later slots are due
// too does the policy decide: run_once runs the latest of them, skip runs
// the latest only if it is at most grace late, run_all runs them in order
// from the oldest inside the catch-up window.
func Claimed(s *schedule.Schedule, misfire string, slot, now time.Time, grace, window, offset time.Duration) Firing {
	dueBy := now.Add(-offset) // the slots due by now are those at or before it
	next := s.Next(slot)
	if next.IsZero() || next.After(dueBy) {
		return Firing{Run: true, Slot: slot}
	}
	latest := latestAtOrBefore(s, slot, dueBy)
	switch misfire {
	case db.MisfireSkip:
		if dueBy.Sub(latest) <= grace {
			return Firing{Run: true, Slot: latest, Missed: span(s, slot, latest, db.MissedDowntime)}
		}
		return Firing{Run: false, Slot: s.Next(latest), Missed: span(s, slot, latest.Add(time.Nanosecond), db.MissedDowntime)}
	case db.MisfireRunAll:
		first := slot
		if cutoff := now.Add(-window); first.Before(cutoff) {
			first = firstAtOrAfter(s, slot, cutoff)
		}
		return Firing{Run: true, Slot: first, Missed: span(s, slot, first, db.MissedDowntime)}
	default: // db.MisfireRunOnce
		return Firing{Run: true, Slot: latest, Missed: span(s, slot, latest, db.MissedDowntime)}
	}
}

// Result is how a job moves on after a run ends.
type Result struct {
	State     db.JobState
	Slot      time.Time // the slot of the next firing (unchanged on retry)
	NextRunAt time.Time // zero in final states
	Attempt   int
	LastError string
	GaveUp    bool // the firing's attempts are spent (recorded on the run)
	Missed    Missed
	// Passed is what the firing passed over besides Missed: its own slot
	// when it never ran and is not run again, or the new schedule's slots
	// before it when the schedule changed while it was claimed ahead (see
	// Finished); empty otherwise.
	Passed    Missed
	Triggered bool // an operator's extra run is still to happen
	// Extra is set when the run that ended was an operator's extra run of
	// a schedule (JobTrigger), not one of its firings.
	Extra bool
}

// Failing reports whether the schedule of j is failing once a run of j
// ended with outcome and j moved on as r says. A schedule is failing from
// a firing that gave up until a firing succeeds: what it tells is whether
// the schedule's own slots run. An operator's extra run (r.Extra) is not
// one of them and leaves it as it was, whether it fails or succeeds. A
// one-off job is never failing: one that gives up is dead.
func Failing(j db.Job, r Result, outcome db.Outcome) bool {
	switch {
	case !j.Recurring():
		return false
	case r.Extra:
		return j.FailingSince != nil
	case outcome == db.OutcomeSucceeded:
		return false
	}
	return r.GaveUp || j.FailingSince != nil
}

// RetryPending reports whether recurring job j, not running, waits to
// retry its current firing: the firing's slot has run and failed (or its
// lease was reaped), so the slot is in the ledger already, as those runs.
// A retry runs its slot late, whatever the misfire policy; pausing,
// skipping or rescheduling the job drops it.
func RetryPending(j db.Job) bool { return j.Recurring() && j.Attempt > 0 }

// NextSlot is the first slot of s, j's schedule, after j's current firing:
// after its slot, or after the moment the schedule changed while the
// firing ran (j.RescheduledAt), whichever is later. The zero time when s
// never fires again.
func NextSlot(j db.Job, s *schedule.Schedule) time.Time {
	from := db.Deref(j.Slot)
	if j.RescheduledAt != nil && j.RescheduledAt.After(from) {
		from = *j.RescheduledAt
	}
	return s.Next(from)
}

// PassedWhileRunning is what a change of schedule at now passes over of
// recurring job j, whose firing runs on schedule old: the slots of old
// after the firing (or after an earlier change during it) up to now,
// reason skipped. The new schedule's slots count from now (see NextSlot).
// old is nil when the stored schedule no longer parses.
func PassedWhileRunning(j db.Job, old *schedule.Schedule, now time.Time) Missed {
	if old == nil {
		return Missed{}
	}
	first := NextSlot(j, old)
	if first.IsZero() {
		return Missed{}
	}
	return span(old, first, now.Add(time.Nanosecond), db.MissedSkipped)
}

// StartsAt is when the run of j, claimed at now, starts: now, or j's due
// time if it was claimed ahead of it (see db.RunClaimParams.Ahead).
func StartsAt(j db.Job, now time.Time) time.Time {
	if j.NextRunAt != nil && j.NextRunAt.After(now) {
		return *j.NextRunAt
	}
	return now
}

// Finished decides what a job does after its run, started at startedAt (its
// claim, or its due time when it was claimed ahead of it), ended at now
// with p.Outcome. s is nil for one-off jobs. rnd draws the backoff
// jitter.
func Finished(j *db.Job, s *schedule.Schedule, p db.RunFinishParams, startedAt, now time.Time, rnd func() float64) Result {
	slot := db.Deref(j.Slot)
	outcome := ended(j, p)
	switch {
	case HandedBack(j, p, now) && j.RescheduledAt != nil && s != nil && !j.Triggered && j.Attempt <= 1 && !onSchedule(s, slot):
		// The firing's first run never started, and its schedule was
		// replaced while it was held by one without its slot: the firing
		// is passed over, as the change passed over the old schedule's
		// slots, and the job moves on to the new schedule from the
		// change. (A slot the new schedule has too is owed still, and a
		// retry handed back has run: both keep their place below.)
		from := *j
		from.Slot, from.RescheduledAt = j.RescheduledAt, nil // the new schedule's firings count from the change
		r := nextFiring(&from, s, slot, startedAt, now, j.LastError)
		r.Passed = Missed{Slots: []time.Time{slot}, Total: 1, Reason: db.MissedSkipped}
		return r
	case HandedBack(j, p, now):
		// Handed back at shutdown, or never started: not the job's fault,
		// not an attempt. It is due as before, in its old place.
		return Result{State: db.StateReady, Slot: slot, NextRunAt: heldPlace(j, now), Attempt: max(j.Attempt-1, 0), LastError: j.LastError, Triggered: j.Triggered}
	case j.Triggered && s != nil:
		// An operator's extra run: one attempt, and the schedule's pending
		// slot stays as it was, with the attempts its firing has made (a
		// retry still to come stays a retry, and waits its backoff again
		// from now: the trigger took the time it was due at).
		r := Result{State: db.StateReady, Slot: slot, NextRunAt: DueAt(j.ID, slot, time.Duration(j.Jitter)), Attempt: max(j.Attempt-1, 0), LastError: j.LastError, Extra: true}
		if retry := now.Add(db.Backoff(r.Attempt, time.Duration(j.Backoff), rnd)); r.Attempt > 0 && retry.After(r.NextRunAt) {
			r.NextRunAt = retry
		}
		if outcome != db.OutcomeSucceeded && outcome != db.OutcomeCancelled {
			r.LastError, r.GaveUp = p.Error, true
		}
		return r
	}
	switch outcome {
	case db.OutcomeSucceeded:
		if s == nil {
			return Result{State: db.StateDone, Slot: slot, Attempt: j.Attempt}
		}
		return nextFiring(j, s, slot, startedAt, now, "")
	case db.OutcomeCancelled:
		if s == nil {
			return Result{State: db.StateCancelled, Slot: slot, Attempt: j.Attempt, LastError: p.Error}
		}
		return nextFiring(j, s, slot, startedAt, now, p.Error)
	}
	// failed, timed_out, lease_expired
	if p.Retryable && j.Attempt < j.MaxAttempts {
		next := now.Add(db.Backoff(j.Attempt, time.Duration(j.Backoff), rnd))
		if outcome == db.OutcomeLeaseExpired {
			// Its worker vanished; the job did not fail.
			next = heldPlace(j, now)
		}
		return Result{State: db.StateReady, Slot: slot, NextRunAt: next, Attempt: j.Attempt, LastError: p.Error}
	}
	if s == nil {
		return Result{State: db.StateDead, Slot: slot, Attempt: j.Attempt, LastError: p.Error, GaveUp: true}
	}
	r := nextFiring(j, s, slot, startedAt, now, p.Error)
	r.GaveUp = true
	return r
}

// ended is how the run of j ended, as p reports it: cancelled, however it
// ended otherwise than succeeded (it failed, was handed back, or its
// worker vanished), when a stop was asked for and accepted (cancel-run),
// as if the handler had stopped.
func ended(j *db.Job, p db.RunFinishParams) db.Outcome {
	if j.CancelRequested && p.Outcome != db.OutcomeSucceeded {
		return db.OutcomeCancelled
	}
	return p.Outcome
}

// HandedBack reports whether the run of j that ended at now as p reports
// never ran through no fault of the job's: handed back (at shutdown, or
// by the start guard), or its lease ended before the job was due (it was
// claimed ahead, and its worker died or its server was replaced: a worker
// starts no job before it is due). Such a run is not an attempt.
func HandedBack(j *db.Job, p db.RunFinishParams, now time.Time) bool {
	outcome := ended(j, p)
	return outcome == db.OutcomeReleased ||
		outcome == db.OutcomeLeaseExpired && j.NextRunAt != nil && j.NextRunAt.After(now)
}

// heldPlace is when a job whose run ended through no fault of its own
// (handed back, or its worker vanished) is due again: when it was due
// before it was held, so that claims take it before the jobs that fell due
// after it; now if it had no due time.
func heldPlace(j *db.Job, now time.Time) time.Time {
	if j.NextRunAt == nil {
		return now
	}
	return *j.NextRunAt
}

// nextFiring moves a recurring job from the firing at slot to its next slot,
// computed from the slot (see NextSlot) and never from the finish time, applying the
// overlap policy to slots that passed while it ran.
func nextFiring(j *db.Job, s *schedule.Schedule, slot, startedAt, now time.Time, lastErr string) Result {
	next := NextSlot(*j, s)
	r := Result{State: db.StateReady, Slot: next, LastError: lastErr}
	offset := schedule.Offset(j.ID, time.Duration(j.Jitter))
	dueBy := now.Add(-offset) // the slots due by now are those at or before it
	if at := j.RescheduledAt; at != nil && at.Before(slot) {
		// Claimed ahead of its slot, and the schedule changed before the
		// slot came: the new schedule's slots before it passed while the
		// firing held the job.
		r.Passed = span(s, s.Next(*at), slot, db.MissedOverlap)
	}
	switch {
	case next.IsZero():
		// The schedule never fires again.
		return Result{State: db.StateDone, Slot: slot, LastError: lastErr, Passed: r.Passed}
	case next.After(dueBy):
	case j.Misfire == db.MisfireRunAll && !next.After(startedAt.Add(-offset)):
		// A run_all catch-up (the next slot was due when this firing, or
		// its retry, was claimed): it runs right away. The first
		// attempt's claim is not kept, so the slots that passed while a
		// retry waited are caught up too: late, never lost.
	default:
		latest := latestAtOrBefore(s, next, dueBy)
		if j.Overlap == db.OverlapQueueOne {
			r.Slot = latest
			r.Missed = span(s, next, latest, db.MissedOverlap)
		} else {
			r.Slot = s.Next(latest)
			r.Missed = span(s, next, latest.Add(time.Nanosecond), db.MissedOverlap)
		}
	}
	r.NextRunAt = DueAt(j.ID, r.Slot, time.Duration(j.Jitter))
	return r
}

// Resumed is where a paused recurring job, waiting for slot, resumes as of
// at: its first slot due at or after at (offset is the job's inside its
// jitter: each slot is due that long after its time), with the slots from
// slot on that were due before at recorded missed (reason paused). A slot
// not due before at is kept.
func Resumed(s *schedule.Schedule, slot, at time.Time, offset time.Duration) (time.Time, Missed) {
	dueBefore := at.Add(-offset) // the slots due before at are those before it
	if !slot.Before(dueBefore) {
		return slot, Missed{}
	}
	latest := latestAtOrBefore(s, slot, dueBefore.Add(-time.Nanosecond))
	return s.Next(latest), span(s, slot, dueBefore, db.MissedPaused)
}

// Rescheduled moves recurring job j, waiting (ready or paused) at now on
// schedule old, to schedule next, after a change of its schedule, zone or
// jitter. It returns the new pending slot: next's first after now (the
// caller takes back the old schedule's slots skipped ahead of now). And it
// returns what the move passes over: the slots of old from the first not yet in the
// ledger (a failed firing's slot is, as its runs) that passed by now,
// reason skipped; for a paused job, those a resume at now would record as
// slept through, reason paused. A slot of old that passed but was not yet
// due (its offset inside the jitter had not come), or that falls at now on
// a paused job, stays the pending slot when it is a slot of next too. old
// is nil when the stored schedule no longer parses: the change mends it,
// and no slot of it is known.
func Rescheduled(j db.Job, old, next *schedule.Schedule, now time.Time) (time.Time, Missed) {
	if old == nil {
		return next.Next(now), Missed{}
	}
	from := db.Deref(j.Slot)
	if RetryPending(j) {
		from = NextSlot(j, old)
	}
	if from.IsZero() {
		return next.Next(now), Missed{}
	}
	offset := schedule.Offset(j.ID, time.Duration(j.Jitter))
	reason, passed := db.MissedSkipped, Missed{}
	if j.State == db.StatePaused {
		reason = db.MissedPaused
		_, passed = Resumed(old, from, now, offset) // as a resume now would record them
	} else {
		passed = span(old, from, now.Add(-offset).Add(time.Nanosecond), reason) // those due by now
	}
	// A slot of old that passed but is not yet accounted for is owed
	// still: when it is a slot of next too (only the jitter changed, say),
	// it stays pending, late. Otherwise it is passed over too.
	if owed := firstUnaccounted(old, from, passed); !owed.After(now) && onSchedule(next, owed) {
		return owed, passed
	}
	return next.Next(now), span(old, from, now.Add(time.Nanosecond), reason)
}

// onSchedule reports whether t is a slot of s; any instant is one of an
// @every schedule, whose chain may start anywhere.
func onSchedule(s *schedule.Schedule, t time.Time) bool {
	return s.Every() || s.Next(t.Add(-time.Nanosecond)).Equal(t)
}

// firstUnaccounted is the first slot of s from from on that m, the slots
// from from on that were passed over, leaves out.
func firstUnaccounted(s *schedule.Schedule, from time.Time, m Missed) time.Time {
	switch {
	case m.Rest != nil:
		return s.Next(m.Rest.Last)
	case len(m.Slots) > 0:
		return s.Next(m.Slots[len(m.Slots)-1])
	}
	return from
}

// DueAt is when a job's slot is due: the slot plus the job's fixed offset
// inside its jitter, so that top-of-the-hour schedules spread out.
func DueAt(jobID string, slot time.Time, jitter time.Duration) time.Time {
	return slot.Add(schedule.Offset(jobID, jitter))
}

// span lists the slots from first (included) up to end (excluded), first
// being on the schedule's grid.
func span(s *schedule.Schedule, first, end time.Time, reason string) Missed {
	if !first.Before(end) {
		return Missed{}
	}
	rest, n := s.Slots(first, end.Add(-time.Nanosecond), MaxMissedRows-1)
	m := Missed{Slots: append([]time.Time{first}, rest...), Total: int64(n) + 1, Reason: reason}
	if listed := int64(len(m.Slots)); m.Total > listed {
		m.Rest = &Span{First: s.Next(m.Slots[listed-1]), Last: latestAtOrBefore(s, first, end.Add(-time.Nanosecond)), Count: m.Total - listed}
	}
	return m
}

// latestAtOrBefore is the last slot at or before now, starting from first
// (on the grid, at or before now).
func latestAtOrBefore(s *schedule.Schedule, first, now time.Time) time.Time {
	if s.Every() {
		d := s.Next(first).Sub(first)
		return first.Add(now.Sub(first) / d * d)
	}
	// Look back over growing windows for a slot near now, then walk to the
	// last one; this stays cheap however long ago first was.
	for _, w := range []time.Duration{time.Second, time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour} {
		c := s.Next(now.Add(-w))
		if c.IsZero() || c.After(now) || c.Before(first) {
			continue
		}
		for {
			n := s.Next(c)
			if n.IsZero() || n.After(now) {
				return c
			}
			c = n
		}
	}
	c := first
	for {
		n := s.Next(c)
		if n.IsZero() || n.After(now) {
			return c
		}
		c = n
	}
}

// firstAtOrAfter is the first slot at or after t, on the grid of first.
func firstAtOrAfter(s *schedule.Schedule, first, t time.Time) time.Time {
	if s.Every() {
		d := s.Next(first).Sub(first)
		k := (t.Sub(first) + d - 1) / d
		return first.Add(k * d)
	}
	return s.Next(t.Add(-time.Nanosecond))
}

// FirstSlot is the first firing of a new job created at now: its runAt (now
// when unset) for a one-off job, the first slot after now for a schedule;
// due is that slot plus the job's offset. The error is a
// *db.ValidationError when the schedule does not parse or never fires.
func FirstSlot(p db.JobCreateParams, id string, now time.Time) (slot, due time.Time, err error) {
	slot = p.RunAt
	if p.Schedule != "" {
		sched, err := schedule.Parse(p.Schedule, p.Timezone)
		if err != nil {
			return slot, due, &db.ValidationError{Field: "schedule", Msg: err.Error()}
		}
		if slot = sched.Next(now); slot.IsZero() {
			return slot, due, &db.ValidationError{Field: "schedule", Msg: fmt.Sprintf("%q never fires", p.Schedule)}
		}
	}
	if slot.IsZero() {
		slot = now
	}
	return slot, DueAt(id, slot, p.Jitter), nil
}
