package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sked-dev/sked/db"
)

// Workers lists the workers seen claiming since since; see db.Store.
func (s *Store) Workers(ctx context.Context, since time.Time) ([]db.Worker, error) {
	ws, err := s.d.Workers(ctx, s.stored(since))
	s.health.saw(err, false)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return ws, nil
}

// WorkerStopped records that a worker shut down; see db.Store. Its next
// claim, should it claim again, is recorded at once. While writes fail for
// lack of space it records nothing (as recordWorker), so that a write that
// may change no row does not pass for one that found room.
func (s *Store) WorkerStopped(ctx context.Context, id string) error {
	s.seen.forget(id)
	if s.health.full() {
		return nil
	}
	if err := s.inTx(ctx, func(tx Tx) error { return tx.WorkerStopped(ctx, id) }); err != nil {
		return fmt.Errorf("record worker %s stopped: %w", id, err)
	}
	return nil
}

// seenWorkers is when this store last recorded each worker that claimed
// through it, so that a worker claiming many times a second is written at
// most every db.WorkerSeenEvery.
type seenWorkers struct {
	mu    sync.Mutex
	last  map[string]seenMark // by worker id; guarded by mu
	swept time.Time           // when last was last cleared of old marks; guarded by mu
}

type seenMark struct {
	types []string // the claimed types, distinct and sorted
	at    time.Time
}

// due says whether a claim by worker with types (distinct and sorted) at
// now is to be recorded: the worker is new to this store, claims other
// types, or was last recorded db.WorkerSeenEvery ago or more.
func (w *seenWorkers) due(worker string, types []string, now time.Time) bool {
	q, ok := w.quiet(worker, types)
	return !ok || !q.holds(now)
}

// quiet is when a claim by worker with types (distinct and sorted) is not
// to be recorded; ok=false: at no time, the worker is new to this store
// or claims other types. A claim without a worker never is.
func (w *seenWorkers) quiet(worker string, types []string) (q Quiet, ok bool) {
	if worker == "" {
		return Quiet{}, true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	m, ok := w.last[worker]
	if !ok || !slices.Equal(m.types, types) {
		return Quiet{}, false
	}
	return Quiet{From: m.at, Until: m.at.Add(db.WorkerSeenEvery)}, true
}

// forget drops worker's mark: its next claim is recorded.
func (w *seenWorkers) forget(worker string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, worker)
}

// recorded notes that the claim of worker with types at now was recorded,
// and, at most every db.WorkerSeenEvery, forgets the marks old enough that
// their workers' next claims are due anyway.
func (w *seenWorkers) recorded(worker string, types []string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[string]seenMark{}
	}
	w.last[worker] = seenMark{types: types, at: now}
	if now.Sub(w.swept) < db.WorkerSeenEvery {
		return
	}
	w.swept = now
	for id, m := range w.last {
		if now.Sub(m.at) > db.WorkerSeenEvery {
			delete(w.last, id)
		}
	}
}

// recordWorker writes, in a claim's transaction at now, that worker
// claimed types (distinct, sorted, the claim's own copy) when the claim is
// due to be recorded; it returns whether it wrote. While writes fail for
// lack of space it writes nothing, so that a claim that finds nothing
// still succeeds, as it did before workers were recorded.
func (s *Store) recordWorker(ctx context.Context, tx Tx, worker string, types []string, now time.Time) (bool, error) {
	if s.health.full() || !s.seen.due(worker, types, now) {
		return false, nil
	}
	w := db.Worker{ID: worker, Types: types}
	if err := tx.WorkerSeen(ctx, w, s.stored(now.Add(-db.WorkerForgetAfter))); err != nil {
		return false, fmt.Errorf("record worker %s: %w", worker, err)
	}
	return true, nil
}
