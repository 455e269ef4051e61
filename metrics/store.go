package metrics

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sked-dev/sked/db"
)

var _ db.Store = (*Store)(nil)

// Store is a db.Store that observes the worker-facing calls: it times
// RunClaim and RunFinish, measures each claimed job's start lateness (also
// of the jobs RunsHeld finds a claim leased whose commit's answer was
// lost), counts stale heartbeats and completions, lease expirations, run
// outcomes and the history retention deletes, and the attempt number of
// each recorded run. Every other method passes through unchanged. Hand it to the pool,
// the reaper, the pruner and the worker API alike.
type Store struct {
	db.Store // the store observed; never nil

	m *Metrics

	mu       sync.Mutex
	attempts map[string]claimed // by job id; guarded by mu
	// reading counts the RunsHeld calls reading the store, and ended
	// holds the runs that ended (RunFinish, a stale heartbeat) since the
	// first of them began: a read may hold them still, and RunsHeld does
	// not observe them. Emptied when the last read is observed. Both
	// guarded by mu.
	reading int
	ended   map[run]struct{}
}

// claimed is what RunFinish needs to know of the claim it closes.
type claimed struct {
	generation int64
	attempt    int
}

// run is a job's run, by its lease's generation.
type run struct {
	jobID      string
	generation int64
}

// maxTracked bounds Store.attempts. An entry lives from claim to finish;
// only a remote worker that dies leaves one behind, until the job is claimed
// again. Past the bound the map is cleared, losing the attempt observations
// of the runs in flight, never memory.
const maxTracked = 100_000

// Store returns s observed by m.
func (m *Metrics) Store(s db.Store) *Store {
	if s == nil {
		panic("metrics: Store needs a store")
	}
	return &Store{Store: s, m: m, attempts: map[string]claimed{}, ended: map[run]struct{}{}}
}

// RunClaim claims through the store, timing the call and observing each
// claimed job's lateness against the store's clock.
func (s *Store) RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error) {
	start := time.Now()
	claims, err := s.Store.RunClaim(ctx, p)
	s.m.claimSeconds.Observe(time.Since(start).Seconds())
	s.observeClaims(claims, false)
	return claims, err
}

// RunsHeld reads through the store the jobs a worker holds. Those that no
// claim observed here leased, under the generation held, were leased by a
// claim whose commit's answer was lost (db.ErrCommitUnknown), which the
// pool and POST /claims read this for, to run them: they are observed as
// claims then, once, and counted as adopted. A run that ended while the
// store was read (held there, and finished by then) is not.
func (s *Store) RunsHeld(ctx context.Context, worker string) ([]db.Claim, error) {
	s.mu.Lock()
	s.reading++
	s.mu.Unlock()
	held, err := s.Store.RunsHeld(ctx, worker)
	s.observeClaims(held, true)
	s.mu.Lock()
	if s.reading--; s.reading == 0 {
		clear(s.ended)
	}
	s.mu.Unlock()
	return held, err
}

// observeClaims observes claims: their types for sked_running_jobs, their
// attempts for sked_run_attempts at their finish, and their start
// lateness against the store's clock. With adopted (RunsHeld's), only
// those neither observed already (by job and generation) nor ended since
// the read began, which are counted in sked_claims_adopted_total too.
func (s *Store) observeClaims(claims []db.Claim, adopted bool) {
	if len(claims) == 0 {
		return
	}
	var fresh []db.Claim
	s.mu.Lock()
	if len(s.attempts)+len(claims) > maxTracked {
		clear(s.attempts)
	}
	for _, c := range claims {
		r := run{c.Job.ID, c.Job.LeaseGeneration}
		if had, ok := s.attempts[r.jobID]; adopted && ok && had.generation == r.generation {
			continue
		}
		if _, ok := s.ended[r]; adopted && ok {
			continue
		}
		s.attempts[r.jobID] = claimed{generation: r.generation, attempt: c.Job.Attempt}
		fresh = append(fresh, c)
	}
	s.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	if adopted {
		s.m.adoptedClaims.Add(float64(len(fresh)))
	}
	if s.m.queue != nil {
		s.m.queue.claimed(fresh)
	}
	now := s.m.now()
	for _, c := range fresh {
		if due := c.Job.NextRunAt; due != nil {
			s.m.startLateness.Observe(max(now.Sub(*due).Seconds(), 0))
		}
	}
}

// RunHeartbeat renews through the store and counts a stale refusal.
func (s *Store) RunHeartbeat(ctx context.Context, p db.RunHeartbeatParams) (db.Heartbeat, error) {
	hb, err := s.Store.RunHeartbeat(ctx, p)
	if errors.Is(err, db.ErrStale) {
		s.m.staleWrites.WithLabelValues(staleHeartbeat).Inc()
		s.forget(p.JobID, p.Generation) // the worker abandons the run
	}
	return hb, err
}

// RunFinish records through the store, timing the call and counting the
// outcome (once: not again for a repeated report), or the refusal when it
// is stale.
func (s *Store) RunFinish(ctx context.Context, p db.RunFinishParams) (db.Job, error) {
	start := time.Now()
	var repeated bool
	j, err := s.Store.RunFinish(db.WithRepeatReport(ctx, &repeated), p)
	s.m.finishSeconds.Observe(time.Since(start).Seconds())
	c, ok := s.forget(p.JobID, p.Generation)
	switch {
	case errors.Is(err, db.ErrStale):
		s.m.staleWrites.WithLabelValues(staleFinish).Inc()
	case err != nil, repeated: // a repeat was counted when first recorded
	default:
		s.m.runs.WithLabelValues(s.m.types.label(j.Type), string(p.Outcome)).Inc()
		if ok && p.Outcome != db.OutcomeReleased {
			s.m.runAttempts.Observe(float64(c.attempt))
		}
	}
	return j, err
}

// RunReapExpired reaps through the store and counts the expirations.
func (s *Store) RunReapExpired(ctx context.Context) (int, error) {
	n, err := s.Store.RunReapExpired(ctx)
	s.m.leaseExpirations.Add(float64(n))
	return n, err
}

// Prune deletes history through the store and counts what went, or the
// failure.
func (s *Store) Prune(ctx context.Context, p db.PruneParams) (db.Pruned, error) {
	n, err := s.Store.Prune(ctx, p)
	s.m.pruned.WithLabelValues(prunedJobs).Add(float64(n.Jobs))
	s.m.pruned.WithLabelValues(prunedRuns).Add(float64(n.Runs))
	s.m.pruned.WithLabelValues(prunedEvents).Add(float64(n.Events))
	if err != nil && ctx.Err() == nil {
		s.m.pruneErrors.Inc()
	}
	return n, err
}

// forget drops the claim of jobID if it is the one of generation, and
// returns it; while RunsHeld reads the store, it notes the run ended.
func (s *Store) forget(jobID string, generation int64) (claimed, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reading > 0 {
		s.ended[run{jobID, generation}] = struct{}{}
	}
	c, ok := s.attempts[jobID]
	if !ok || c.generation != generation {
		return claimed{}, false
	}
	delete(s.attempts, jobID)
	return c, true
}
