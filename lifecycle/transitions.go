package lifecycle

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/schedule"
)

// The decisions below check a job's state, read in the store's transaction,
// against an operator's request. Each returns the *db.ConflictError the
// store returns as is, or says whether the request changes nothing.

// Cancel decides a cancel of j: ready, paused and dead jobs become cancelled,
// a cancelled one is a no-op (noop); running and done jobs are a conflict.
// live reads the run of j's current lease; it is called only when j is
// running, so that the conflict can name the run.
func Cancel(j db.Job, live func() (*db.Run, error)) (noop bool, err error) {
	switch j.State {
	case db.StateCancelled:
		return true, nil
	case db.StateReady, db.StatePaused, db.StateDead:
		return false, nil
	case db.StateRunning:
		run, err := live()
		if err != nil {
			return false, err
		}
		return false, &db.ConflictError{State: j.State, Run: run, Msg: fmt.Sprintf(
			"job %s is running on worker %s (run %d, attempt %d); it cannot be cancelled now: ask the handler to stop with POST /jobs/%s/cancel-run",
			j.ID, j.LeaseOwner, run.ID, j.Attempt, j.ID)}
	default:
		return false, &db.ConflictError{State: j.State, Msg: fmt.Sprintf("job %s is already %s", j.ID, j.State)}
	}
}

// Pause decides a pause of j as p asks: a ready or paused job is paused
// (again, with p's reason and end), and a running recurring job pauses
// when its run ends (j.PauseRequested); pausing a paused job with neither,
// or with the reason and end it has, is a no-op, as is asking again for
// the pause a running job will make. Other states are a conflict; a
// reason that is not text every store keeps (db.CheckText) or is longer
// than db.MaxReasonLen, and an end not after now, the transaction's time,
// are a *db.ValidationError.
func Pause(j db.Job, p db.JobPauseParams, now time.Time) (noop bool, err error) {
	if err := db.CheckText("reason", p.Reason); err != nil {
		return false, err
	}
	if len(p.Reason) > db.MaxReasonLen {
		return false, &db.ValidationError{Field: "reason", Msg: fmt.Sprintf("reason is %d bytes long; at most %d are allowed", len(p.Reason), db.MaxReasonLen)}
	}
	if !p.Until.IsZero() && !p.Until.After(now) {
		return false, &db.ValidationError{Field: "until", Msg: fmt.Sprintf("until %s is not in the future (it is %s now): "+
			"give a later time, or none to pause until resumed", p.Until.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339))}
	}
	switch {
	case j.State == db.StatePaused, j.State == db.StateReady, j.State == db.StateRunning && j.Recurring():
	default:
		return false, &db.ConflictError{State: j.State, Msg: fmt.Sprintf("job %s is %s; only a ready job, or a running schedule (which pauses when its run ends), can be paused", j.ID, j.State)}
	}
	sameEnd := p.Until.IsZero() && j.PauseUntil == nil || j.PauseUntil != nil && j.PauseUntil.Equal(p.Until)
	pausing := j.State == db.StatePaused || j.PauseRequested
	return pausing && (p.Reason == "" && p.Until.IsZero() || p.Reason == j.PauseReason && sameEnd), nil
}

// Resume decides a resume of j: a paused job resumes (see Resumed), a
// running one that was to pause when its run ends no longer does, a ready
// one is a no-op, others are a conflict.
func Resume(j db.Job) (noop bool, err error) {
	switch {
	case j.State == db.StateReady:
		return true, nil
	case j.State == db.StatePaused, j.State == db.StateRunning && j.PauseRequested:
		return false, nil
	default:
		return false, &db.ConflictError{State: j.State, Msg: fmt.Sprintf("job %s is %s; only a paused job can be resumed", j.ID, j.State)}
	}
}

// Retry decides a retry of j: only a dead job goes back to ready.
func Retry(j db.Job) error {
	if j.State != db.StateDead {
		return &db.ConflictError{State: j.State, Msg: fmt.Sprintf("job %s is %s; only a dead job can be retried", j.ID, j.State)}
	}
	return nil
}

// CancelRun decides a request to stop j's handler: only a running job can
// be asked.
func CancelRun(j db.Job) error {
	if j.State != db.StateRunning {
		return &db.ConflictError{State: j.State, Msg: fmt.Sprintf("job %s is %s; only a running job can be asked to stop", j.ID, j.State)}
	}
	return nil
}

// Trigger decides an extra run of j at now: only a ready job that is not
// yet due can be triggered.
func Trigger(j db.Job, now time.Time) error {
	switch {
	case j.State != db.StateReady:
		return &db.ConflictError{State: j.State, Msg: fmt.Sprintf("job %s is %s; only a ready job can be triggered", named(j), j.State)}
	case !j.NextRunAt.After(now):
		return &db.ConflictError{State: j.State, Msg: fmt.Sprintf("job %s is already due and runs now", named(j))}
	}
	return nil
}

// SkipNext decides a skip of j's pending slot: only a ready recurring job
// whose next run is its schedule's (not a triggered extra run) can skip it.
func SkipNext(j db.Job) error {
	if j.Recurring() && j.State == db.StateReady && j.Triggered {
		return &db.ConflictError{State: j.State, Msg: fmt.Sprintf("job %s has an operator's run (sked trigger) due before its pending slot; skip the slot once that run has started", named(j))}
	}
	if !j.Recurring() || j.State != db.StateReady {
		kind := "one-off"
		if j.Recurring() {
			kind = "recurring"
		}
		return &db.ConflictError{State: j.State, Msg: fmt.Sprintf("job %s is a %s %s job; only the pending slot of a ready recurring job can be skipped", named(j), j.State, kind)}
	}
	return nil
}

// named is how the conflicts of a ready job, which the API answers as
// they are, call j: by its name, as an operator does, else by its id.
func named(j db.Job) string { return cmp.Or(j.Name, j.ID) }

// BackfillRange checks p's range at now, the transaction's time: a
// backwards range, or one that ends in the future (its slots have not
// passed), is a *db.ValidationError.
func BackfillRange(p db.JobBackfillParams, now time.Time) error {
	switch {
	case p.To.Before(p.From):
		return &db.ValidationError{Field: "to", Msg: "to must not be before from"}
	case p.To.After(now):
		return &db.ValidationError{Field: "to", Msg: "to is in the future; backfill covers slots that have passed"}
	}
	return nil
}

// Backfillable says whether j can be backfilled: a *db.ConflictError for a
// one-off job.
func Backfillable(j db.Job) error {
	if !j.Recurring() {
		return &db.ConflictError{State: j.State, Msg: fmt.Sprintf("job %s is a one-off job; only a schedule can be backfilled", j.ID)}
	}
	return nil
}

// Backfill decides a backfill of recurring job j, on its schedule s, over
// [p.From, p.To] (checked by BackfillRange): it returns the slots to run,
// how many it left to the schedule and how many the range holds, or a
// *db.ValidationError for a range that holds more than db.MaxBackfill. The
// slots to run leave out the slot a
// ready or running j is running or will run next, and any after it: they
// are the schedule's own, and a backfill of them would run a slot twice, at
// the same time while it runs. (A paused job runs none of the slots it
// sleeps through: they are recorded missed, and may be backfilled.)
func Backfill(j db.Job, s *schedule.Schedule, p db.JobBackfillParams) (run []time.Time, left, total int, err error) {
	slots, total := s.Slots(p.From.Add(-time.Nanosecond), p.To, db.MaxBackfill)
	if total > db.MaxBackfill {
		return nil, 0, 0, &db.ValidationError{Field: "to", Msg: fmt.Sprintf("the range holds %d slots; backfill at most %d at a time", total, db.MaxBackfill)}
	}
	n := len(slots)
	if (j.State == db.StateReady || j.State == db.StateRunning) && j.Slot != nil {
		slots = slices.DeleteFunc(slots, func(slot time.Time) bool { return !slot.Before(*j.Slot) })
	}
	return slots, n - len(slots), total, nil
}

// WatchAgain is when the window of j's dead-man's switch starts as it
// starts again at at (a resume, sked's return from downtime): at, unless
// a skipped slot starts it later already (see SkipWatchFrom), which a
// window started again before that slot comes must not undo.
func WatchAgain(j db.Job, at time.Time) time.Time {
	if from := j.WatchedFrom(); from.After(at) {
		return from
	}
	return at
}

// SkipWatchFrom is when the window of j's dead-man's switch starts as
// its pending slot is skipped at now: at that slot, as if it had run, so
// that the gap the skip leaves before the next slot is no false alarm; or
// at now, when that slot has passed (a pending retry given up).
func SkipWatchFrom(j db.Job, now time.Time) time.Time {
	if j.Slot != nil && j.Slot.After(now) {
		return WatchAgain(j, *j.Slot)
	}
	return WatchAgain(j, now)
}

// GoesQuiet reports whether j's dead-man's switch goes off at now: j is
// not quiet yet, and no run succeeded within its ExpectSuccessWithin since
// its window began (db.Job.WatchedFrom).
func GoesQuiet(j db.Job, now time.Time) bool {
	return j.ExpectSuccessWithin > 0 && j.QuietSince == nil && now.Sub(j.WatchedFrom()) > time.Duration(j.ExpectSuccessWithin)
}
