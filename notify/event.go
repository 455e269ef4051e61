package notify

import (
	"cmp"
	"fmt"
	"time"

	"github.com/sked-dev/sked/db"
)

// The events of jobs, built from what the store returns. Each key is made
// from what stays the same when the event is emitted again (after a crash,
// on another node), so that it is told once.

// GaveUp is the run_gave_up event of run r, with which a firing of job j
// spent its attempts (r.GaveUp): one-off or recurring, with the slot, the
// attempts, the last error and the tail of the output. Its key is the run.
func GaveUp(j db.Job, r db.Run) Event {
	e := jobEvent(KindGaveUp, j)
	e.RunID, e.Slot, e.Attempts, e.MaxAttempts = r.ID, db.Deref(r.Slot), r.Attempt, j.MaxAttempts
	e.Error, e.Output = cmp.Or(r.Error, j.LastError), r.Output
	e.At = cmp.Or(db.Deref(r.FinishedAt), j.UpdatedAt)
	e.Key = fmt.Sprintf("gave_up:%s:%d", j.ID, r.ID)
	return e
}

// Recovered is the schedule_recovered event of job j, a run of which
// succeeded at at after the job had gone quiet or given up: the time of
// the recovered event the store put on the job's timeline with that
// success. The key is the job and that time, so that one recovery,
// delivered again (after a restart, by another node), is told once.
func Recovered(j db.Job, at time.Time) Event {
	e := jobEvent(KindRecovered, j)
	e.At = at
	e.Key = fmt.Sprintf("recovered:%s:%s", j.ID, at.Format(time.RFC3339Nano))
	return e
}

// Quiet is the schedule_quiet event of job j, whose dead-man's switch of
// within went off at at: the time of the quiet event the store put on the
// job's timeline as it marked the job quiet (its QuietSince). The key is
// the job and that time, so that one quiet spell is told once.
func Quiet(j db.Job, at time.Time, within db.Duration) Event {
	e := jobEvent(KindQuiet, j)
	e.ExpectSuccessWithin, e.Error = within, j.LastError
	e.At = at
	e.Key = fmt.Sprintf("quiet:%s:%s", j.ID, e.At.Format(time.RFC3339Nano))
	return e
}

// Dead is the job_dead event of job j, which went dead at j.UpdatedAt
// when its run r ended: the event carries the run's error and the tail of
// its output.
func Dead(j db.Job, r db.Run) Event {
	e := jobEvent(KindDead, j)
	e.RunID, e.Attempts, e.MaxAttempts = r.ID, j.Attempt, j.MaxAttempts
	e.Error, e.Output = cmp.Or(r.Error, j.LastError), r.Output
	e.At = j.UpdatedAt
	e.Key = fmt.Sprintf("dead:%s:%s", j.ID, j.UpdatedAt.Format(time.RFC3339Nano))
	return e
}

// ClockStep is the clock_step event of the wall clock stepping back from
// from to to, which holds firing until it passes from again.
func ClockStep(from, to time.Time) Event {
	return Event{
		Kind: KindClockStep, At: to, Key: "clock:" + to.Format(time.RFC3339Nano),
		Title:   "sked: the wall clock went back",
		Message: fmt.Sprintf("The wall clock stepped back from %s to %s; sked holds firing until it passes %s.", from, to, from),
	}
}

// jobEvent is an event of kind about job j.
func jobEvent(kind string, j db.Job) Event {
	return Event{Kind: kind, JobID: j.ID, JobName: j.Name, JobType: j.Type, Schedule: j.Schedule}
}
