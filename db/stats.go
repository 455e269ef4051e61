package db

import (
	"context"
	"time"
)

// Stats is what the database says about the queue at one instant, for
// metrics. Every count covers the jobs present in the database.
type Stats struct {
	// ReadyOldestDue is the due time of the oldest ready job that is due
	// (next_run_at at or before now); zero when none is.
	ReadyOldestDue time.Time
	// DueNextMinute counts the ready jobs due within a minute of now,
	// including those already overdue: the backlog a worker fleet faces.
	DueNextMinute int64
	// DueByType is ReadyOldestDue and DueNextMinute for each job type with
	// a ready job due within a minute; other types are absent.
	DueByType map[string]Due
	// JobsByState counts jobs per state; every state is present.
	JobsByState map[JobState]int64
	// RunningByType counts running jobs per type; types with none are absent.
	RunningByType map[string]int64
	// MissedSlots is the sum of the jobs' missed-slot counters. Retention
	// never deletes recurring jobs, so it only grows.
	MissedSlots int64
	// QuietSchedules counts recurring jobs, not cancelled, whose dead-man's
	// switch fired: no success within their expectSuccessWithin.
	QuietSchedules int64
	// FailingSchedules counts recurring jobs, not cancelled, whose last
	// firing gave up (FailingSince is set until a firing succeeds).
	FailingSchedules int64
}

// Due is how far behind the ready jobs of one type are.
type Due struct {
	// Oldest is the due time of the type's oldest ready job that is due;
	// zero when none is yet.
	Oldest time.Time
	// NextMinute counts the type's ready jobs due within a minute of now,
	// overdue ones included.
	NextMinute int64
}

// AddDue counts d, the ready jobs of typ, into st, by type and in all; a
// store calls it once per type.
func (st *Stats) AddDue(typ string, d Due) {
	if d.NextMinute == 0 {
		return
	}
	st.DueByType[typ] = d
	st.DueNextMinute += d.NextMinute
	if !d.Oldest.IsZero() && (st.ReadyOldestDue.IsZero() || d.Oldest.Before(st.ReadyOldestDue)) {
		st.ReadyOldestDue = d.Oldest
	}
}

// Age is how long a job due at due has waited by now: 0 for the zero time
// (none is due) or a due time still ahead.
func Age(due, now time.Time) time.Duration {
	if due.IsZero() {
		return 0
	}
	return max(now.Sub(due), 0)
}

// NewStats is Stats with every state counted at zero, for a store to fill.
func NewStats() Stats {
	st := Stats{JobsByState: make(map[JobState]int64, len(AllStates)), RunningByType: map[string]int64{}, DueByType: map[string]Due{}}
	for _, state := range AllStates {
		st.JobsByState[state] = 0
	}
	return st
}

// StatsReader reads queue statistics for metrics; part of Store.
type StatsReader interface {
	// Stats reads the statistics as of now, the store's clock. It only
	// reads, through the partial indexes where it can.
	Stats(ctx context.Context, now time.Time) (Stats, error)
}

// AllStates lists every job state, in lifecycle order.
var AllStates = []JobState{StateReady, StateRunning, StateDone, StateDead, StateCancelled, StatePaused}

// ReadyChecker tells whether the database can serve: it is reachable, takes
// writes and has the schema this binary expects; part of Store.
type ReadyChecker interface {
	// Ready returns nil when the database is ready, else an error saying
	// what is wrong. It changes nothing.
	Ready(ctx context.Context) error
}
