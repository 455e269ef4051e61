package db

import (
	"context"
	"time"
)

// PruneParams says which history one Prune call deletes.
type PruneParams struct {
	Before time.Time // delete what finished before this instant
	Limit  int       // at most this many jobs and this many runs
}

// Pruned counts what one Prune call deleted.
type Pruned struct {
	Jobs   int // one-off jobs, each with its runs and events
	Runs   int // runs of recurring jobs
	Events int // events of recurring jobs
}

// Pruner deletes old history; part of Store.
//
// What goes: one-off jobs that are done or cancelled and last changed before
// p.Before, with their runs and events; finished runs of recurring jobs that
// finished before p.Before, and their events from before p.Before. What stays: every job that can still change
// (ready, running, paused), dead jobs (the dead-letter list, until someone
// retries or cancels them), recurring jobs themselves, and running runs.
type Pruner interface {
	// Prune deletes up to p.Limit jobs and up to p.Limit runs in one
	// transaction. Callers repeat it until it deletes fewer than p.Limit of
	// both. Deleting is idempotent: two nodes pruning at once is safe.
	Prune(ctx context.Context, p PruneParams) (Pruned, error)
}
