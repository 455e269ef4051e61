package db

import (
	"context"
	"strings"
	"time"
)

// MissedSkipped is the reason recorded when an operator skipped a slot.
const MissedSkipped = "skipped"

// ReasonManual marks a run that an operator triggered outside the schedule.
const ReasonManual = "manual"

// MaxBackfill bounds the slots one backfill may create.
const MaxBackfill = 1000

// JobPauseParams pauses a job, optionally until a time.
type JobPauseParams struct {
	ID     string
	Reason string    // shown on the job; may be empty
	Until  time.Time // zero: until resumed by hand
}

// JobBackfillParams asks for one run of each slot of a recurring job in
// [From, To].
type JobBackfillParams struct {
	ID       string
	From, To time.Time
}

// Backfill is the answer to a backfill: the one-off jobs that run the
// range's slots. Repeating a backfill creates nothing new while its jobs
// are kept (retention deletes them once they are old).
type Backfill struct {
	Slots   int      `json:"slots"`   // slots in the range
	Created int      `json:"created"` // jobs created by this call
	JobIDs  []string `json:"jobIds"`  // one job per slot it ran or runs, in slot order
	// LeftToSchedule counts the slots in the range that the schedule runs
	// itself (the one a ready or running job runs or will run next, and
	// later ones): no job is made of them.
	LeftToSchedule int `json:"leftToSchedule"`
}

// The dead-man's switch (Job.ExpectSuccessWithin) is watched by the
// sweeps of the servers' sweepers (JobQuietSweep), each of which records
// that it watched at most every WatchSeenEvery while a schedule has a
// switch. A sweeper that starts (JobWatchStart) when none has watched for
// more than WatchGap finds sked was down: each switch's window starts
// again, so that a schedule whose slots passed meanwhile can run before it
// is quiet. So does a sweeper whose sweep failed (the database out of
// reach while sked ran on), once the database is back: a long outage is
// downtime too. WatchGap is well above WatchSeenEvery and the sweeps'
// interval, so that a quick restart, one node's of several, or a short
// outage is not downtime.
const (
	WatchSeenEvery = time.Minute
	WatchGap       = 3 * time.Minute
)

// Controller is what operators do to schedules beyond the lifecycle, and
// the sweeps that keep schedules honest; part of Store.
type Controller interface {
	// JobPauseUntil pauses a ready job with a reason and an optional time
	// at which JobResumeDue resumes it; a *ConflictError otherwise.
	JobPauseUntil(ctx context.Context, p JobPauseParams) (Job, error)
	// JobTrigger makes a ready job run once now. For a recurring job the
	// run is extra (its run is marked manual) and the schedule's slot is
	// kept; a *ConflictError when the job is not ready.
	JobTrigger(ctx context.Context, id string) (Job, error)
	// JobSkipNext records the pending slot of a ready recurring job as
	// missed (reason skipped) and moves to the following one; the window
	// of its dead-man's switch starts again at the slot skipped
	// (lifecycle.SkipWatchFrom). A *ConflictError for other jobs.
	JobSkipNext(ctx context.Context, id string) (Job, error)
	// JobBackfill creates one one-off job per slot of the recurring job in
	// [From, To], each keyed "backfill:<id>:<slot>" so a repeat creates
	// nothing; at most MaxBackfill slots (else a *ValidationError).
	JobBackfill(ctx context.Context, p JobBackfillParams) (Backfill, error)
	// JobResumeDue resumes paused jobs whose pause-until has passed and
	// returns how many.
	JobResumeDue(ctx context.Context) (int, error)
	// JobQuietSweep marks as quiet the ready and running recurring jobs
	// that went a whole expectSuccessWithin without a success (see
	// Job.WatchedFrom), records that the switches were watched, and
	// returns the jobs it marked. A run that succeeds clears the mark.
	JobQuietSweep(ctx context.Context) ([]Job, error)
	// JobWatchStart is called as a sweeper starts, before its first
	// JobQuietSweep, and after a JobQuietSweep failed, before the next:
	// when no sweep was recorded within WatchGap, sked was down (or its
	// database was), and the window of each watched schedule that is not
	// quiet starts again now, once: the call records a sweep. It returns
	// how many windows it started again.
	JobWatchStart(ctx context.Context) (int, error)
}

// The idempotency keys of the jobs sked creates itself begin with these: a
// backfill's slot, a notification's delivery (notify) and a ping's. A
// client's key may not (ReservedKey), so that no job of its own passes
// for one of them.
const (
	BackfillKeyPrefix = "backfill:"
	NotifyKeyPrefix   = "notify:"
	PingKeyPrefix     = "ping:"
)

// ReservedKey reports whether key begins as the keys of the jobs sked
// creates itself do.
func ReservedKey(key string) bool {
	return strings.HasPrefix(key, BackfillKeyPrefix) || strings.HasPrefix(key, NotifyKeyPrefix) || strings.HasPrefix(key, PingKeyPrefix)
}
