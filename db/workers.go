package db

import (
	"context"
	"time"
)

// Worker is a worker as its claims show it: the types it asks for and when
// it first and last asked. A store records a worker when it claims (with
// or without finding a job), at most every WorkerSeenEvery. A worker
// busy on all its slots claims nothing, and its LastSeen stays where its
// last claim left it.
type Worker struct {
	ID        string
	Types     []string // the types it claims; empty: any type
	FirstSeen time.Time
	LastSeen  time.Time
	// StoppedAt is when it said it shut down (its pool stopped), nil while
	// it has not since its last claim.
	StoppedAt *time.Time
}

// WorkerSeenEvery is how often a store records a worker that keeps
// claiming with the same types (a claim with other types at once). A pool
// with a free slot claims every second or so, finding jobs or not
// (worker.DefaultMaxIdle), and a remote worker's claim is recorded as it
// begins its wait on the server, so a live worker's LastSeen is at most
// about this old, or its claim wait, unless it is busy on all its slots.
// Each record is a write: on an idle server, the only ones (a commit, with
// its fsync, of two pages for each worker at this interval), so that an
// SD card's or flash disk's wear stays small.
const WorkerSeenEvery = time.Minute

// WorkerForgetAfter is how long a store keeps a worker that has stopped
// claiming: a worker's ID names one process (host/pid), so each restart
// adds one.
const WorkerForgetAfter = 7 * 24 * time.Hour

// WorkerLister keeps the record of the workers a store has seen claim;
// part of Store.
type WorkerLister interface {
	// Workers returns the workers that claimed at or after since, the
	// most recently seen first.
	Workers(ctx context.Context, since time.Time) ([]Worker, error)
	// WorkerStopped records that worker id shut down, as of the store's
	// clock: it claims no more. A worker with no record is no error.
	WorkerStopped(ctx context.Context, id string) error
}
