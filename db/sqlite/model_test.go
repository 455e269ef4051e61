package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/sqlite"
)

// modelLease is the lease every claim of the model test takes.
const modelLease = 30 * time.Second

// mJob is the model's view of one job: what the store must say about it.
type mJob struct {
	id          string
	recurring   bool
	state       db.JobState
	attempt     int
	maxAttempts int
	gen         int64                        // lease generation: only ever grows, by one per claim
	leaseUntil  time.Time                    // while running
	cancelReq   bool                         // while running
	pauseReq    bool                         // while running: a recurring job paused during its run
	triggered   bool                         // recurring: an operator's extra run is due, or running
	slot        time.Time                    // recurring: the slot of the current firing
	nextRunAt   time.Time                    // read from the store: backoff and slots are lifecycle's business
	reported    map[int64]db.RunFinishParams // what each generation's worker reported while it held the lease
}

// model drives a real store with random operations on a test clock and
// checks after each one that the store agrees with a small model of the job
// lifecycle.
type model struct {
	ctx   context.Context
	store *sqlite.Store
	clock *dbtest.Clock
	jobs  []*mJob
	steps *atomic.Int64
}

// TestStore_Model is the state-machine test of the store: rapid draws
// sequences of create (one-off and recurring), claim, heartbeat, finish
// (succeeded, failed retryable or permanent, cancelled, released; with the
// live or a stale generation), cancel, cancel-run request, reap, pause,
// resume, retry, trigger, reschedule and clock moves. After every step the store's jobs and runs
// must match the model: states, attempts, generations that only grow and
// are never reused, at most one live lease per job, 409s for cancels of held
// jobs, stale writes refused, dead after max attempts.
// -rapid.checks (default 100) and -rapid.steps (default 30) bound it.
func TestStore_Model(t *testing.T) {
	var steps atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "sked-model-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		s, err := sqlite.Open(context.Background(), filepath.Join(dir, "sked.db"))
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		m := &model{ctx: context.Background(), store: s, clock: dbtest.NewClock(dbtest.Start), steps: &steps}
		s.NowFunc, s.RandFunc = m.clock.Now, func() float64 { return 0.5 }
		rt.Repeat(m.actions())
	})
	t.Logf("%d operations checked against the model", steps.Load())
}

func (m *model) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"":               m.check,
		"create":         m.create,
		"claim":          m.claim,
		"heartbeat":      m.heartbeat,
		"finish":         m.finish,
		"cancel":         m.cancel,
		"requestCancel":  m.requestCancel,
		"reap":           m.reap,
		"pause":          m.pause,
		"resume":         m.resume,
		"retry":          m.retry,
		"trigger":        m.trigger,
		"reschedule":     m.reschedule,
		"advance":        m.advance,
		"advanceToLease": m.advanceToLease,
	}
}

func (m *model) create(t *rapid.T) {
	m.steps.Add(1)
	p := db.JobCreateParams{Type: "t", MaxAttempts: rapid.IntRange(1, 3).Draw(t, "maxAttempts"), Backoff: time.Second}
	if rapid.Bool().Draw(t, "recurring") {
		p.Schedule = "@every 10s"
	} else {
		p.RunAt = m.clock.Now().Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "inSeconds")) * time.Second)
	}
	j, created, err := m.store.JobCreate(m.ctx, p)
	if err != nil || !created {
		t.Fatalf("create: created=%t, %v", created, err)
	}
	mj := &mJob{id: j.ID, recurring: p.Schedule != "", state: db.StateReady, maxAttempts: p.MaxAttempts, reported: map[int64]db.RunFinishParams{}}
	m.sync(t, mj, j)
	m.jobs = append(m.jobs, mj)
}

// pick draws one of the jobs, skipping the step when there are none.
func (m *model) pick(t *rapid.T) *mJob {
	if len(m.jobs) == 0 {
		t.Skip("no jobs yet")
	}
	return m.jobs[rapid.IntRange(0, len(m.jobs)-1).Draw(t, "job")]
}

// sync takes from the store what the model does not predict: when the job
// is next due and, for a recurring job, its slot.
func (m *model) sync(t *rapid.T, mj *mJob, j db.Job) {
	mj.nextRunAt = time.Time{}
	if j.NextRunAt != nil {
		mj.nextRunAt = *j.NextRunAt
	}
	if j.Slot != nil {
		mj.slot = *j.Slot
	}
	if mj.state == db.StateReady && mj.nextRunAt.IsZero() {
		t.Fatalf("job %s is ready with no next_run_at", mj.id)
	}
}

func (m *model) claim(t *rapid.T) {
	m.steps.Add(1)
	limit := rapid.IntRange(1, 3).Draw(t, "max")
	now := m.clock.Now()
	var due []*mJob
	for _, mj := range m.jobs {
		if mj.state == db.StateReady && !mj.nextRunAt.After(now) {
			due = append(due, mj)
		}
	}
	claims, err := m.store.RunClaim(m.ctx, db.RunClaimParams{WorkerID: "w", Max: limit, Lease: modelLease})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(claims) != min(limit, len(due)) {
		t.Fatalf("claim max %d: got %d jobs, want %d of %d due", limit, len(claims), min(limit, len(due)), len(due))
	}
	latest := time.Time{}
	for _, c := range claims {
		mj := m.byID(t, c.Job.ID)
		if !slices.Contains(due, mj) {
			t.Fatalf("claimed job %s, which is %s and due at %s (now %s)", mj.id, mj.state, mj.nextRunAt, now)
		}
		latest = maxTime(latest, mj.nextRunAt)
		wantAttempt := mj.attempt + 1
		if mj.recurring && !mj.triggered && !c.Job.Slot.Equal(mj.slot) {
			wantAttempt = 1 // the misfire policy moved the firing to a later slot
		}
		if c.Job.LeaseGeneration != mj.gen+1 || c.Job.Attempt != wantAttempt || c.RunID == 0 {
			t.Fatalf("claim of %s: generation %d attempt %d run %d, want generation %d attempt %d",
				mj.id, c.Job.LeaseGeneration, c.Job.Attempt, c.RunID, mj.gen+1, wantAttempt)
		}
		mj.state, mj.gen, mj.attempt, mj.cancelReq = db.StateRunning, mj.gen+1, wantAttempt, false
		mj.leaseUntil = now.Add(modelLease)
		m.sync(t, mj, c.Job)
	}
	for _, mj := range due {
		if mj.state == db.StateReady && mj.nextRunAt.Before(latest) {
			t.Fatalf("job %s due at %s was passed over for one due at %s", mj.id, mj.nextRunAt, latest)
		}
	}
}

// drawGeneration is the live generation or, sometimes, a stale or future one.
func drawGeneration(t *rapid.T, mj *mJob) int64 {
	return mj.gen + int64(rapid.SampledFrom([]int{0, 0, 0, -1, 1}).Draw(t, "generationOffset"))
}

// holds reports whether gen holds mj's live lease now.
func (m *model) holds(mj *mJob, gen int64) bool {
	return mj.state == db.StateRunning && gen == mj.gen && !m.clock.Now().After(mj.leaseUntil)
}

func (m *model) heartbeat(t *rapid.T) {
	m.steps.Add(1)
	mj := m.pick(t)
	gen := drawGeneration(t, mj)
	hb, err := m.store.RunHeartbeat(m.ctx, db.RunHeartbeatParams{JobID: mj.id, Generation: gen, Lease: modelLease})
	if !m.holds(mj, gen) {
		if !errors.Is(err, db.ErrStale) {
			t.Fatalf("heartbeat of %s with generation %d (live %d, %s): got %v, want ErrStale", mj.id, gen, mj.gen, mj.state, err)
		}
		return
	}
	if err != nil || hb.CancelRequested != mj.cancelReq || !hb.LeaseUntil.Equal(m.clock.Now().Add(modelLease)) {
		t.Fatalf("heartbeat of %s: got %+v, %v; want cancel %t", mj.id, hb, err, mj.cancelReq)
	}
	mj.leaseUntil = hb.LeaseUntil
}

func (m *model) finish(t *rapid.T) {
	m.steps.Add(1)
	mj := m.pick(t)
	gen := drawGeneration(t, mj)
	p := db.RunFinishParams{JobID: mj.id, Generation: gen}
	switch rapid.IntRange(0, 4).Draw(t, "outcome") {
	case 0:
		p.Outcome = db.OutcomeSucceeded
	case 1:
		p.Outcome, p.Retryable, p.Error = db.OutcomeFailed, true, "retryable"
	case 2:
		p.Outcome, p.Error = db.OutcomeFailed, "permanent"
	case 3:
		p.Outcome, p.Error = db.OutcomeCancelled, "asked to stop"
	case 4:
		p.Outcome = db.OutcomeReleased
	}
	j, err := m.store.RunFinish(m.ctx, p)
	if !m.holds(mj, gen) {
		if r, ok := mj.reported[gen]; ok && r.Outcome == p.Outcome && r.Error == p.Error {
			// The worker repeats the report it made: answered as recorded.
			if err != nil || j.State != mj.state || j.LeaseGeneration != mj.gen {
				t.Fatalf("repeated finish of %s with generation %d, %s: %s generation %d, %v; want it answered as recorded: %s generation %d",
					mj.id, gen, p.Outcome, j.State, j.LeaseGeneration, err, mj.state, mj.gen)
			}
			return
		}
		if !errors.Is(err, db.ErrStale) {
			t.Fatalf("finish of %s with generation %d (live %d, %s, lease until %s, now %s): got %v, want ErrStale",
				mj.id, gen, mj.gen, mj.state, mj.leaseUntil, m.clock.Now(), err)
		}
		return
	}
	if err != nil {
		t.Fatalf("finish of %s: %v", mj.id, err)
	}
	mj.reported[gen] = p
	m.ended(mj, p)
	m.sync(t, mj, j)
}

// ended moves the model's job on after its run ended with p.
func (m *model) ended(mj *mJob, p db.RunFinishParams) {
	if mj.cancelReq && p.Outcome != db.OutcomeSucceeded {
		p.Outcome = db.OutcomeCancelled // a stop was asked for: the run ends the firing however it ended
	}
	mj.cancelReq, mj.leaseUntil = false, time.Time{}
	nextFiring := func() { mj.state, mj.attempt = db.StateReady, 0 }
	switch {
	case p.Outcome == db.OutcomeReleased:
		mj.state, mj.attempt = db.StateReady, max(mj.attempt-1, 0) // an extra run handed back is still to run
	case mj.triggered:
		// An operator's extra run, however it ended: the attempt it took
		// is given back, and the schedule's firing waits as it was.
		mj.state, mj.attempt, mj.triggered = db.StateReady, max(mj.attempt-1, 0), false
	case p.Outcome == db.OutcomeSucceeded && mj.recurring, p.Outcome == db.OutcomeCancelled && mj.recurring:
		nextFiring()
	case p.Outcome == db.OutcomeSucceeded:
		mj.state = db.StateDone
	case p.Outcome == db.OutcomeCancelled:
		mj.state = db.StateCancelled
	case p.Retryable && mj.attempt < mj.maxAttempts:
		mj.state = db.StateReady
	case mj.recurring:
		nextFiring() // the firing gave up; the schedule goes on
	default:
		mj.state = db.StateDead
	}
	if mj.pauseReq && mj.state == db.StateReady {
		mj.state, mj.triggered = db.StatePaused, false // paused during the run: the pause begins now
	}
	mj.pauseReq = false
}

func (m *model) cancel(t *rapid.T) {
	m.steps.Add(1)
	mj := m.pick(t)
	j, err := m.store.JobCancel(m.ctx, mj.id)
	switch mj.state {
	case db.StateReady, db.StatePaused, db.StateDead, db.StateCancelled:
		if err != nil || j.State != db.StateCancelled {
			t.Fatalf("cancel of %s job %s: got %s, %v", mj.state, mj.id, j.State, err)
		}
		mj.state, mj.triggered = db.StateCancelled, false
		m.sync(t, mj, j)
	default:
		var conflict *db.ConflictError
		if !errors.As(err, &conflict) || conflict.State != mj.state {
			t.Fatalf("cancel of %s job %s: got %v, want a conflict", mj.state, mj.id, err)
		}
		if mj.state == db.StateRunning && (conflict.Run == nil || conflict.Run.Generation != mj.gen || conflict.Run.Outcome != db.OutcomeRunning) {
			t.Fatalf("cancel of running job %s: conflict names run %+v, want the live run of generation %d", mj.id, conflict.Run, mj.gen)
		}
	}
}

// transition calls op on a drawn job and checks the answer (see check).
func (m *model) transition(t *rapid.T, what string, op func(context.Context, string) (db.Job, error), to db.JobState, from ...db.JobState) (*mJob, bool) {
	m.steps.Add(1)
	return m.transitionOf(t, what, m.pick(t), op, to, from...)
}

// transitionOf calls op on mj and checks the answer: a conflict unless the
// job is in one of from, else the job in state to.
func (m *model) transitionOf(t *rapid.T, what string, mj *mJob, op func(context.Context, string) (db.Job, error), to db.JobState, from ...db.JobState) (*mJob, bool) {
	j, err := op(m.ctx, mj.id)
	if !slices.Contains(from, mj.state) {
		if !errors.Is(err, db.ErrConflict) {
			t.Fatalf("%s of %s job %s: got %v, want a conflict", what, mj.state, mj.id, err)
		}
		return mj, false
	}
	if err != nil || j.State != to {
		t.Fatalf("%s of %s job %s: got %s, %v; want %s", what, mj.state, mj.id, j.State, err, to)
	}
	was := mj.state
	mj.state = to
	if was != to {
		defer m.sync(t, mj, j)
	}
	return mj, was != to
}

func (m *model) requestCancel(t *rapid.T) {
	if mj, _ := m.transition(t, "request cancel", m.store.JobRequestCancelRun, db.StateRunning, db.StateRunning); mj.state == db.StateRunning {
		mj.cancelReq = true
	}
}

func (m *model) pause(t *rapid.T) {
	m.steps.Add(1)
	mj := m.pick(t)
	if mj.state == db.StateRunning && mj.recurring {
		// It goes on running, and pauses when the run ends.
		j, err := m.store.JobPause(m.ctx, mj.id)
		if err != nil || j.State != db.StateRunning || !j.PauseRequested {
			t.Fatalf("pause of running schedule %s: got %s, requested %v, %v; want running, to pause", mj.id, j.State, j.PauseRequested, err)
		}
		mj.pauseReq = true
		return
	}
	if _, moved := m.transitionOf(t, "pause", mj, m.store.JobPause, db.StatePaused, db.StateReady, db.StatePaused); moved {
		mj.triggered = false // a pause drops an operator's extra run still to come
	}
}

func (m *model) resume(t *rapid.T) {
	m.steps.Add(1)
	mj := m.pick(t)
	if mj.state == db.StateRunning && mj.pauseReq {
		j, err := m.store.JobResume(m.ctx, mj.id)
		if err != nil || j.State != db.StateRunning || j.PauseRequested {
			t.Fatalf("resume of running schedule %s to pause: got %s, requested %v, %v; want running, no pause", mj.id, j.State, j.PauseRequested, err)
		}
		mj.pauseReq = false
		return
	}
	if mj, moved := m.transitionOf(t, "resume", mj, m.store.JobResume, db.StateReady, db.StatePaused, db.StateReady); moved && mj.recurring {
		mj.attempt = 0
	}
}

func (m *model) retry(t *rapid.T) {
	if mj, moved := m.transition(t, "retry", m.store.JobRetry, db.StateReady, db.StateDead); moved {
		mj.attempt = 0
	}
}

// trigger asks for an extra run of a ready job now: a conflict when it is
// not ready, or due already.
func (m *model) trigger(t *rapid.T) {
	m.steps.Add(1)
	mj := m.pick(t)
	j, err := m.store.JobTrigger(m.ctx, mj.id)
	if mj.state != db.StateReady || !mj.nextRunAt.After(m.clock.Now()) {
		if !errors.Is(err, db.ErrConflict) {
			t.Fatalf("trigger of %s job %s due at %s (now %s): got %v, want a conflict", mj.state, mj.id, mj.nextRunAt, m.clock.Now(), err)
		}
		return
	}
	if err != nil || j.State != db.StateReady || !j.NextRunAt.Equal(m.clock.Now()) || j.Triggered != mj.recurring {
		t.Fatalf("trigger of ready job %s: got %s due %v triggered %t, %v; want ready, due now", mj.id, j.State, j.NextRunAt, j.Triggered, err)
	}
	mj.triggered = mj.recurring
	m.sync(t, mj, j)
}

// reschedule changes a recurring job's schedule from one interval to the
// other (a cancelled job's is a conflict): its state stays; a waiting firing's retry is dropped (the new
// schedule's slot is a firing of its own), a running one ends as it began,
// and an extra run in flight takes back its attempt when it ends.
func (m *model) reschedule(t *rapid.T) {
	m.steps.Add(1)
	mj := m.pick(t)
	if !mj.recurring {
		t.Skip("a one-off job has no schedule")
	}
	j, err := m.store.JobGet(m.ctx, mj.id)
	if err != nil {
		t.Fatal(err)
	}
	spec := db.SpecOf(j)
	spec.Schedule = map[string]string{"@every 10s": "@every 7s", "@every 7s": "@every 10s"}[j.Schedule]
	j, err = m.store.JobRedefine(m.ctx, db.JobRedefineParams{ID: mj.id, Spec: spec})
	if mj.state == db.StateCancelled {
		if !errors.Is(err, db.ErrConflict) {
			t.Fatalf("reschedule of cancelled job %s: got %v, want a conflict", mj.id, err)
		}
		return
	}
	if err != nil || j.State != mj.state || j.Schedule != spec.Schedule {
		t.Fatalf("reschedule of %s job %s to %q: got %s %q, %v", mj.state, mj.id, spec.Schedule, j.State, j.Schedule, err)
	}
	switch {
	case mj.state == db.StateReady, mj.state == db.StatePaused:
		mj.attempt = 0
	case mj.state == db.StateRunning && mj.triggered:
		mj.attempt = 1 // the pending firing has made no attempt; the extra run's end takes this one back
	}
	if mj.state != db.StateRunning {
		m.sync(t, mj, j)
	}
}

func (m *model) reap(t *rapid.T) {
	m.steps.Add(1)
	now := m.clock.Now()
	var expired []*mJob
	for _, mj := range m.jobs {
		if mj.state == db.StateRunning && mj.leaseUntil.Before(now) {
			expired = append(expired, mj)
		}
	}
	n, err := m.store.RunReapExpired(m.ctx)
	if err != nil || n != len(expired) {
		t.Fatalf("reap at %s: got %d, %v; want %d", now, n, err, len(expired))
	}
	for _, mj := range expired {
		m.ended(mj, db.RunFinishParams{Outcome: db.OutcomeLeaseExpired, Retryable: true})
		j, err := m.store.JobGet(m.ctx, mj.id)
		if err != nil {
			t.Fatal(err)
		}
		m.sync(t, mj, j)
	}
}

func (m *model) advance(t *rapid.T) {
	m.steps.Add(1)
	m.clock.Advance(time.Duration(rapid.IntRange(1, 20_000).Draw(t, "ms")) * time.Millisecond)
}

// advanceToLease moves the clock to the edge of a live lease: exactly its
// end (still live) or one millisecond past it (expired).
func (m *model) advanceToLease(t *rapid.T) {
	m.steps.Add(1)
	mj := m.pick(t)
	if mj.state != db.StateRunning || mj.leaseUntil.Before(m.clock.Now()) {
		t.Skip("no live lease")
	}
	m.clock.Set(mj.leaseUntil.Add(time.Duration(rapid.IntRange(0, 1).Draw(t, "pastMs")) * time.Millisecond))
}

func (m *model) byID(t *rapid.T, id string) *mJob {
	for _, mj := range m.jobs {
		if mj.id == id {
			return mj
		}
	}
	t.Fatalf("store returned job %s, which the model never created", id)
	return nil
}

// check compares every job and its runs with the model.
func (m *model) check(t *rapid.T) {
	for _, mj := range m.jobs {
		j, err := m.store.JobGet(m.ctx, mj.id)
		if err != nil {
			t.Fatal(err)
		}
		if err := mj.compare(j); err != nil {
			t.Fatalf("job %s: %v", mj.id, err)
		}
		runs, _, err := m.store.RunList(m.ctx, db.RunListParams{JobID: mj.id, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if err := mj.compareRuns(runs); err != nil {
			t.Fatalf("job %s: %v", mj.id, err)
		}
	}
}

func (mj *mJob) compare(j db.Job) error {
	if j.State != mj.state || j.Attempt != mj.attempt || j.LeaseGeneration != mj.gen || j.PauseRequested != mj.pauseReq {
		return fmt.Errorf("store says %s attempt %d generation %d pause requested %t; model says %s attempt %d generation %d pause requested %t",
			j.State, j.Attempt, j.LeaseGeneration, j.PauseRequested, mj.state, mj.attempt, mj.gen, mj.pauseReq)
	}
	if mj.state != db.StateRunning {
		if j.LeaseUntil != nil || j.LeaseOwner != "" {
			return fmt.Errorf("%s job holds a lease until %s", j.State, j.LeaseUntil)
		}
		return nil
	}
	if j.LeaseUntil == nil || !j.LeaseUntil.Equal(mj.leaseUntil) || j.CancelRequested != mj.cancelReq {
		return fmt.Errorf("lease until %v cancel %t; model says %s cancel %t", j.LeaseUntil, j.CancelRequested, mj.leaseUntil, mj.cancelReq)
	}
	return nil
}

// compareRuns checks the ledger: one run per generation, generations 1 to
// the job's, at most one running run and only while the job is running.
func (mj *mJob) compareRuns(runs []db.Run) error {
	gens := map[int64]bool{}
	running := 0
	for _, r := range runs {
		if r.Outcome == db.OutcomeMissed {
			continue
		}
		if gens[r.Generation] || r.Generation < 1 || r.Generation > mj.gen {
			return fmt.Errorf("run %d has generation %d: reused or never issued (job at %d)", r.ID, r.Generation, mj.gen)
		}
		gens[r.Generation] = true
		if r.Outcome == db.OutcomeRunning {
			running++
			if r.Generation != mj.gen {
				return fmt.Errorf("run %d of generation %d is still running; the job is at %d", r.ID, r.Generation, mj.gen)
			}
		} else if r.FinishedAt == nil {
			return fmt.Errorf("run %d ended %s without finished_at", r.ID, r.Outcome)
		}
	}
	if want := map[bool]int{true: 1, false: 0}[mj.state == db.StateRunning]; running != want {
		return fmt.Errorf("%d running runs while the job is %s", running, mj.state)
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
