package db

import (
	"context"
	"time"
)

// RunActivityParams selects the runs RunActivity summarises: those that
// finished, or first attempts that started, in (From, To], among the newest
// Scan runs.
type RunActivityParams struct {
	From, To time.Time
	// Scan bounds the work: only the newest Scan runs (by run id) are
	// looked at, so a run that started before them and finished inside the
	// window is not counted. Zero means DefaultActivityScan.
	Scan int
	// MaxLateness bounds how many lateness samples are returned; zero
	// means DefaultActivitySamples.
	MaxLateness int
}

// RunActivity is what runs did in a window, for the dashboard's charts.
type RunActivity struct {
	// Finished counts the runs that ended in the window, whatever their
	// outcome; missed slots are not runs and are not counted.
	Finished int64
	// Lateness holds, for first attempts that started in the window, the
	// start minus the due time (slot plus the job's offset), newest first,
	// at most MaxLateness of them. Retries are left out: their delay is the
	// backoff, not lateness; so are backfills, which run past slots on
	// purpose.
	Lateness []time.Duration
}

// Bounds of RunActivityParams when left zero.
const (
	DefaultActivityScan    = 100_000
	DefaultActivitySamples = 500
)

// ActivityReader summarises recent runs for the dashboard; part of Store.
type ActivityReader interface {
	// RunActivity reads the runs of p's window. It only reads.
	RunActivity(ctx context.Context, p RunActivityParams) (RunActivity, error)
}
