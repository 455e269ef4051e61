package handlers

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sked-dev/sked/db"
)

// remoteLeases are the leases this API handed to remote workers (POST
// /claims) that are not over as far as it knows: neither reported through
// it (complete, or a stale heartbeat or completion) nor run out, nor, while
// it waits for them, found over in the store (a worker that moved to
// another node reports there). Shutdown waits for them (API.Drain), so that
// those workers can still renew and report through this server while it
// stops.
type remoteLeases struct {
	store db.Store // whose clock lease ends are read on
	log   *slog.Logger

	mu      sync.Mutex
	held    map[string]heldLease // by job id; guarded by mu
	pruneAt int                  // prune ended leases when held grows past this; guarded by mu
	changed chan struct{}        // closed and replaced when a lease ends; guarded by mu
}

// heldLease is one lease of remoteLeases.
type heldLease struct {
	generation int64
	until      time.Time
}

// minPruneAt is the fewest leases remoteLeases holds before it looks for
// ended ones to drop.
const minPruneAt = 64

func newRemoteLeases(store db.Store, log *slog.Logger) *remoteLeases {
	return &remoteLeases{store: store, log: log, held: map[string]heldLease{}, pruneAt: minPruneAt, changed: make(chan struct{})}
}

// hold records that job id is leased with generation until until. A later
// call for the job (a heartbeat's renewal) moves until.
func (l *remoteLeases) hold(id string, generation int64, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.held[id]; ok && cur.generation > generation {
		return
	}
	l.put(id, generation, until)
}

// take holds the leases of claims that it does not hold already, and
// returns their claims, in order: of two answers of this API that could
// carry one lease (a claim's own jobs, and those a claim whose commit's
// answer was lost finds its worker holding), one gets it.
func (l *remoteLeases) take(claims []db.Claim) []db.Claim {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.DeleteFunc(claims, func(c db.Claim) bool {
		if cur, ok := l.held[c.Job.ID]; ok && cur.generation >= c.Job.LeaseGeneration {
			return true
		}
		l.put(c.Job.ID, c.Job.LeaseGeneration, *c.Job.LeaseUntil)
		return false
	})
}

// put records a lease; leases that ran out are dropped now and then, as
// held grows. l.mu is held.
func (l *remoteLeases) put(id string, generation int64, until time.Time) {
	l.held[id] = heldLease{generation: generation, until: until}
	if len(l.held) > l.pruneAt {
		l.prune()
		l.pruneAt = max(minPruneAt, 2*len(l.held))
	}
}

// end records that the lease of job id with generation is over.
func (l *remoteLeases) end(id string, generation int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.held[id]; ok && cur.generation == generation {
		delete(l.held, id)
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

// prune drops the leases that ran out and returns how many are left, the
// earliest end among them and a channel closed when one ends. l.mu is held.
func (l *remoteLeases) prune() (left int, next time.Time, changed <-chan struct{}) {
	now := l.store.Now()
	for id, h := range l.held {
		switch {
		case !h.until.After(now):
			delete(l.held, id)
		case next.IsZero() || h.until.Before(next):
			next = h.until
		}
	}
	return len(l.held), next, l.changed
}

// wait returns when no lease is left, or when ctx is done with how many
// are. Leases end when reported or when they run out, which it looks at
// again at least every second (the store's clock may move by steps), or
// when the store no longer holds them, which it reads at most as often.
func (l *remoteLeases) wait(ctx context.Context) int {
	var read time.Time // when the store was last read
	for {
		l.mu.Lock()
		left, next, changed := l.prune()
		l.mu.Unlock()
		if left == 0 {
			return 0
		}
		if time.Since(read) >= time.Second {
			left = l.dropReleased(ctx)
			read = time.Now() // a second from the end of a slow round
			if left == 0 {
				return 0
			}
		}
		t := time.NewTimer(min(max(next.Sub(l.store.Now()), time.Millisecond), time.Second))
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return left
		}
		t.Stop()
	}
}

// dropReleased ends the leases the store no longer holds, and returns how
// many are left.
func (l *remoteLeases) dropReleased(ctx context.Context) int {
	l.mu.Lock()
	held := maps.Clone(l.held)
	l.mu.Unlock()
	for id, h := range held {
		if ctx.Err() != nil {
			break
		}
		readCtx, cancel := context.WithTimeout(ctx, time.Second)
		still := l.stillHeld(readCtx, id, h.generation)
		cancel()
		if !still {
			l.end(id, h.generation)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// stillHeld reports whether the store still has job id leased with
// generation (running under it); a failed read counts as held, and is
// logged.
func (l *remoteLeases) stillHeld(ctx context.Context, id string, generation int64) bool {
	j, err := l.store.JobGet(ctx, id)
	switch {
	case errors.Is(err, db.ErrNotFound):
		return false
	case err != nil:
		if ctx.Err() == nil { // not a read cut short (the drain's end, or its second)
			l.log.WarnContext(ctx, "read a job that a remote worker held, to see whether its run was reported elsewhere", "job_id", id, "err", err)
		}
		return true
	}
	return j.State == db.StateRunning && j.LeaseGeneration == generation
}

// Drain waits, while the server shuts down (Config.Shutdown closed), for
// the runs of remote workers that claimed through this API: until each has
// been reported, through it or through another node sharing the store, or
// its lease has run out, or ctx is done. The
// API keeps answering meanwhile, so that those workers can renew their
// leases and report their runs; it refuses new claims. It returns how many
// runs were left when ctx ended, 0 when none.
func (a *API) Drain(ctx context.Context) int { return a.h.remote.wait(ctx) }
