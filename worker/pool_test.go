package worker_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/worker"
)

// startPool runs a pool on store until the test ends and returns it with a
// function that stops it and waits for Run to return.
func startPool(t *testing.T, store *sqlite.Store, cfg worker.PoolConfig) (*worker.Pool, func()) {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = store
	}
	cfg.NextDueFunc = store.JobNextDue
	cfg.NowFunc = store.Now
	if cfg.MaxIdle == 0 {
		cfg.MaxIdle = time.Hour // wake-ups and due times must do the work
	}
	p := worker.NewPool(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return p, stop
}

func create(t *testing.T, s db.Store, p db.JobCreateParams) db.Job {
	t.Helper()
	j, _, err := s.JobCreate(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// waitState polls until the job reaches state; it fails after 10 s.
func waitState(t *testing.T, s db.Store, id string, state db.JobState) db.Job {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := s.JobGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == state {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s, want %s", id, j.State, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func runs(t *testing.T, s db.Store, id string) []db.Run {
	t.Helper()
	r, _, err := s.RunList(context.Background(), db.RunListParams{JobID: id, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPool_RunsAndRecords(t *testing.T) {
	s := sqlitetest.Open(t)
	var got atomic.Value
	p, _ := startPool(t, s, worker.PoolConfig{Handlers: map[string]worker.HandlerFunc{
		"greet": func(ctx context.Context, j *worker.Job) error {
			got.Store(*j)
			j.Output.Write([]byte("hello"))
			return nil
		},
	}})
	j := create(t, s, db.JobCreateParams{Type: "greet", IdempotencyKey: "k"})
	p.Wake()
	waitState(t, s, j.ID, db.StateDone)
	seen := got.Load().(worker.Job)
	if seen.ID != j.ID || seen.Attempt != 1 || seen.Generation != 1 || seen.IdempotencyKey != "k" {
		t.Fatalf("handler saw %+v", seen)
	}
	r := runs(t, s, j.ID)
	if len(r) != 1 || r[0].Outcome != db.OutcomeSucceeded || r[0].Output != "hello" || r[0].WorkerID != "local" {
		t.Fatalf("runs = %+v", r)
	}
}

// TestPool_SleepsUntilDue has no wake-up and a one-hour idle: only the
// dispatcher's sleep until the earliest due time can start the job.
func TestPool_SleepsUntilDue(t *testing.T) {
	s := sqlitetest.Open(t)
	j := create(t, s, db.JobCreateParams{Type: "later", RunAt: time.Now().Add(200 * time.Millisecond)})
	startPool(t, s, worker.PoolConfig{Handlers: map[string]worker.HandlerFunc{
		"later": func(context.Context, *worker.Job) error { return nil },
	}})
	waitState(t, s, j.ID, db.StateDone)
}

// TestPool_ClaimsAhead: a job due in 2 s is claimed 1.5 s ahead, and its
// handler still starts no sooner than it is due.
func TestPool_ClaimsAhead(t *testing.T) {
	s := sqlitetest.Open(t)
	j := create(t, s, db.JobCreateParams{Type: "later", RunAt: time.Now().Add(2 * time.Second)})
	started := make(chan time.Time, 1)
	startPool(t, s, worker.PoolConfig{ClaimAhead: 1500 * time.Millisecond, Handlers: map[string]worker.HandlerFunc{
		"later": func(context.Context, *worker.Job) error { started <- time.Now(); return nil },
	}})
	claimed := waitState(t, s, j.ID, db.StateRunning)
	var at time.Time
	select {
	case at = <-started:
		t.Fatalf("the handler started at %s, before the job was seen running, and it is due at %s", at, claimed.NextRunAt)
	default:
	}
	if !time.Now().Before(*claimed.NextRunAt) {
		t.Fatalf("the job was claimed after it was due (%s), not ahead", claimed.NextRunAt)
	}
	at = <-started
	if at.Before(*claimed.NextRunAt) {
		t.Fatalf("the handler started at %s, before the job was due at %s", at, claimed.NextRunAt)
	}
	if r := runs(t, s, j.ID); !r[0].StartedAt.Equal(*claimed.NextRunAt) {
		t.Fatalf("run started at %s, want the due time %s", r[0].StartedAt, claimed.NextRunAt)
	}
	waitState(t, s, j.ID, db.StateDone)
}

// TestPool_ShutdownBeforeDue: a job claimed ahead and not yet due when the
// pool stops is handed back unstarted, due when it was.
func TestPool_ShutdownBeforeDue(t *testing.T) {
	s := sqlitetest.Open(t)
	j := create(t, s, db.JobCreateParams{Type: "later", MaxAttempts: 1, RunAt: time.Now().Add(3 * time.Second)})
	var calls atomic.Int32
	_, stop := startPool(t, s, worker.PoolConfig{ClaimAhead: 2500 * time.Millisecond, Handlers: map[string]worker.HandlerFunc{
		"later": func(context.Context, *worker.Job) error { calls.Add(1); return nil },
	}})
	claimed := waitState(t, s, j.ID, db.StateRunning)
	stop()
	got, err := s.JobGet(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != db.StateReady || got.Attempt != 0 || !got.NextRunAt.Equal(*claimed.NextRunAt) || calls.Load() != 0 {
		t.Fatalf("after shutdown: %s attempt %d due %s, %d handler calls; want ready, attempt 0, due %s, no call",
			got.State, got.Attempt, got.NextRunAt, calls.Load(), claimed.NextRunAt)
	}
	if r := runs(t, s, j.ID); len(r) != 1 || r[0].Outcome != db.OutcomeReleased {
		t.Fatalf("runs = %+v, want one released", r)
	}
}

// TestPool_CancelRunBeforeDue: the run of a job claimed ahead and stopped
// with cancel-run before it is due never starts: its handler is not
// called, and the run ends cancelled.
func TestPool_CancelRunBeforeDue(t *testing.T) {
	s := sqlitetest.Open(t)
	j := create(t, s, db.JobCreateParams{Type: "later", RunAt: time.Now().Add(20 * time.Second)})
	var calls atomic.Int32
	p, _ := startPool(t, s, worker.PoolConfig{ClaimAhead: 19900 * time.Millisecond, Lease: 80 * time.Second, Handlers: map[string]worker.HandlerFunc{
		"later": func(context.Context, *worker.Job) error { calls.Add(1); return nil },
	}})
	claimed := waitState(t, s, j.ID, db.StateRunning)
	if _, err := s.JobRequestCancelRun(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	if !p.CancelRun(j.ID, claimed.LeaseGeneration) {
		t.Fatal("CancelRun of a run claimed ahead reported the pool does not hold it")
	}
	// Recorded at once, not when it would have been due.
	if got := waitState(t, s, j.ID, db.StateCancelled); time.Now().After(*claimed.NextRunAt) {
		t.Fatalf("cancelled at %s, after it was due (%s): its slot was held until then", got.UpdatedAt, claimed.NextRunAt)
	}
	if r := runs(t, s, j.ID); len(r) != 1 || r[0].Outcome != db.OutcomeCancelled || calls.Load() != 0 {
		t.Fatalf("runs %+v, %d handler calls; want one run, cancelled, and no call", r, calls.Load())
	}
}

// countingStore counts the claims a pool makes.
type countingStore struct {
	*sqlite.Store
	claims atomic.Int32
}

func (c *countingStore) RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error) {
	c.claims.Add(1)
	return c.Store.RunClaim(ctx, p)
}

// repeatingStore answers every claim with the claims of the first one
// that found jobs too, as a server answers a claim sent after a lost answer
// (wire.ClaimResendHeader) with what it holds for the worker.
type repeatingStore struct {
	*sqlite.Store
	mu    sync.Mutex
	first []db.Claim
}

func (r *repeatingStore) RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error) {
	claims, err := r.Store.RunClaim(ctx, p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first == nil && len(claims) > 0 {
		r.first = claims
		return claims, err
	}
	return append(claims, r.first...), err
}

// TestPool_ClaimAnsweredAgain: a claim answered again with a job the pool
// runs already, or ran (the same generation), does not start it again.
func TestPool_ClaimAnsweredAgain(t *testing.T) {
	s := sqlitetest.Open(t)
	var calls atomic.Int32
	release := make(chan struct{})
	rs := &repeatingStore{Store: s}
	p, _ := startPool(t, s, worker.PoolConfig{Store: rs, Slots: 4, MaxIdle: 10 * time.Millisecond, Handlers: map[string]worker.HandlerFunc{
		"slow": func(ctx context.Context, _ *worker.Job) error { calls.Add(1); <-release; return nil },
	}})
	j := create(t, s, db.JobCreateParams{Type: "slow"})
	p.Wake()
	waitState(t, s, j.ID, db.StateRunning)
	for range 5 { // claims, each answering the running job again
		p.Wake()
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	waitState(t, s, j.ID, db.StateDone)
	for range 5 { // and after it ended: the store read it before its end was recorded
		p.Wake()
		time.Sleep(20 * time.Millisecond)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times; want once", n)
	}
}

// cancelAskedStore answers claims with a cancel already asked for, as a
// claim answered again after its first answer was lost may be.
type cancelAskedStore struct{ *sqlite.Store }

func (c cancelAskedStore) RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error) {
	claims, err := c.Store.RunClaim(ctx, p)
	for i := range claims {
		if _, rerr := c.Store.JobRequestCancelRun(ctx, claims[i].Job.ID); rerr != nil {
			return nil, rerr
		}
		claims[i].Job.CancelRequested = true
	}
	return claims, err
}

// TestPool_ClaimWithCancelAsked: a claim answered with a cancel already
// asked for does not start its handler; the run ends cancelled.
func TestPool_ClaimWithCancelAsked(t *testing.T) {
	s := sqlitetest.Open(t)
	var calls atomic.Int32
	p, _ := startPool(t, s, worker.PoolConfig{Store: cancelAskedStore{s}, Handlers: map[string]worker.HandlerFunc{
		"asked": func(context.Context, *worker.Job) error { calls.Add(1); return nil },
	}})
	j := create(t, s, db.JobCreateParams{Type: "asked"})
	p.Wake()
	waitState(t, s, j.ID, db.StateCancelled)
	if n := calls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times; want none", n)
	}
}

// TestPool_FreedSlotsDoNotClaim: once a claim has taken every due job,
// runs ending (freeing slots) make no claim: nothing became due.
func TestPool_FreedSlotsDoNotClaim(t *testing.T) {
	s := sqlitetest.Open(t)
	var jobs []db.Job
	for range 10 {
		jobs = append(jobs, create(t, s, db.JobCreateParams{Type: "quick"}))
	}
	cs := &countingStore{Store: s}
	p, _ := startPool(t, s, worker.PoolConfig{Store: cs, Slots: 16, Handlers: map[string]worker.HandlerFunc{
		"quick": func(context.Context, *worker.Job) error { return nil },
	}})
	for _, j := range jobs {
		waitState(t, s, j.ID, db.StateDone)
	}
	last := create(t, s, db.JobCreateParams{Type: "quick"})
	p.Wake()
	waitState(t, s, last.ID, db.StateDone)
	if n := cs.claims.Load(); n != 2 {
		t.Fatalf("%d claims, want 2: one took the first ten jobs, one the job the wake-up announced", n)
	}
}

func TestPool_RetryThenDead(t *testing.T) {
	s := sqlitetest.Open(t)
	var calls atomic.Int32
	p, _ := startPool(t, s, worker.PoolConfig{Handlers: map[string]worker.HandlerFunc{
		"flaky": func(context.Context, *worker.Job) error { calls.Add(1); return errors.New("upstream down") },
		"bad":   func(context.Context, *worker.Job) error { return worker.Permanent(errors.New("bad payload")) },
	}})
	flaky := create(t, s, db.JobCreateParams{Type: "flaky", MaxAttempts: 3, Backoff: 10 * time.Millisecond})
	bad := create(t, s, db.JobCreateParams{Type: "bad", MaxAttempts: 3})
	p.Wake()
	j := waitState(t, s, flaky.ID, db.StateDead)
	if calls.Load() != 3 || j.LastError != "upstream down" {
		t.Fatalf("calls = %d, lastError %q", calls.Load(), j.LastError)
	}
	waitState(t, s, bad.ID, db.StateDead)
	if r := runs(t, s, bad.ID); len(r) != 1 || !r[0].GaveUp {
		t.Fatalf("a permanent failure retried: %+v", r)
	}
}

func TestPool_Timeout(t *testing.T) {
	s := sqlitetest.Open(t)
	p, _ := startPool(t, s, worker.PoolConfig{Handlers: map[string]worker.HandlerFunc{
		"slow": func(ctx context.Context, _ *worker.Job) error { <-ctx.Done(); return ctx.Err() },
	}})
	j := create(t, s, db.JobCreateParams{Type: "slow", MaxAttempts: 1, Timeout: 50 * time.Millisecond})
	p.Wake()
	waitState(t, s, j.ID, db.StateDead)
	if r := runs(t, s, j.ID); r[0].Outcome != db.OutcomeTimedOut {
		t.Fatalf("outcome = %s, want timed_out", r[0].Outcome)
	}
}

// TestPool_RenewsLease runs a handler for several lease lengths while the
// reaper runs: the renewals keep the lease, so the run is not reaped.
func TestPool_RenewsLease(t *testing.T) {
	s := sqlitetest.Open(t)
	// Leases stay well above a write's latency under -race.
	p, _ := startPool(t, s, worker.PoolConfig{Lease: 600 * time.Millisecond, Handlers: map[string]worker.HandlerFunc{
		"long": func(ctx context.Context, _ *worker.Job) error {
			select {
			case <-time.After(2 * time.Second):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&worker.Reaper{Store: s, Interval: 20 * time.Millisecond}).Run(ctx)
	j := create(t, s, db.JobCreateParams{Type: "long", MaxAttempts: 1})
	p.Wake()
	waitState(t, s, j.ID, db.StateDone)
	if r := runs(t, s, j.ID); len(r) != 1 || r[0].Outcome != db.OutcomeSucceeded {
		t.Fatalf("runs = %+v", r)
	}
}

func TestPool_CancelRun(t *testing.T) {
	s := sqlitetest.Open(t)
	started := make(chan struct{})
	p, _ := startPool(t, s, worker.PoolConfig{Lease: 600 * time.Millisecond, Handlers: map[string]worker.HandlerFunc{
		"stoppable": func(ctx context.Context, _ *worker.Job) error { close(started); <-ctx.Done(); return ctx.Err() },
	}})
	j := create(t, s, db.JobCreateParams{Type: "stoppable"})
	p.Wake()
	<-started
	if _, err := s.JobRequestCancelRun(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, j.ID, db.StateCancelled)
	if r := runs(t, s, j.ID); r[0].Outcome != db.OutcomeCancelled {
		t.Fatalf("outcome = %s", r[0].Outcome)
	}
}

// TestPool_CancelRunAtOnce stops a run with CancelRun: with a lease of an
// hour its heartbeat would not come for twenty minutes, so the run ends
// cancelled only if CancelRun stopped it.
func TestPool_CancelRunAtOnce(t *testing.T) {
	s := sqlitetest.Open(t)
	started := make(chan struct{})
	p, _ := startPool(t, s, worker.PoolConfig{Lease: time.Hour, Handlers: map[string]worker.HandlerFunc{
		"stoppable": func(ctx context.Context, _ *worker.Job) error { close(started); <-ctx.Done(); return ctx.Err() },
	}})
	j := create(t, s, db.JobCreateParams{Type: "stoppable"})
	if p.CancelRun(j.ID, 1) {
		t.Fatal("CancelRun of a job the pool does not hold reported it held")
	}
	p.Wake()
	<-started
	asked, err := s.JobRequestCancelRun(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p.CancelRun(j.ID, asked.LeaseGeneration+1) {
		t.Fatal("CancelRun of another generation than the running one's reported it held")
	}
	if !p.CancelRun(j.ID, asked.LeaseGeneration) {
		t.Fatal("CancelRun of the running job reported the pool does not hold it")
	}
	waitState(t, s, j.ID, db.StateCancelled)
	if r := runs(t, s, j.ID); r[0].Outcome != db.OutcomeCancelled {
		t.Fatalf("outcome = %s", r[0].Outcome)
	}
}

// TestPool_CancelRunOfOneFiring plays sked serve's cancel-run
// (server.cancelsAtOnce): the store records the request on the running
// firing, and then the pool is told to stop the job's run. Between the two,
// that firing ends and the schedule's next firing is claimed; the pool
// stops that one, which nobody asked to stop.
func TestPool_CancelRunOfOneFiring(t *testing.T) {
	s := sqlitetest.Open(t)
	started := make(chan int64, 2)
	release := make(chan struct{})
	p, _ := startPool(t, s, worker.PoolConfig{Handlers: map[string]worker.HandlerFunc{
		"tick": func(ctx context.Context, j *worker.Job) error {
			started <- j.Generation
			if j.Generation == 1 {
				<-release
				return nil
			}
			<-ctx.Done()
			return ctx.Err()
		},
	}})
	j := create(t, s, db.JobCreateParams{Type: "tick", Schedule: "@every 1s"})
	<-started
	if _, err := s.JobRequestCancelRun(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	close(release) // the first firing ends before its stop arrives
	if gen := <-started; gen != 2 {
		t.Fatalf("second firing has generation %d", gen)
	}
	if p.CancelRun(j.ID, 1) { // the rest of the cancel-run of generation 1
		t.Fatal("the cancel-run recorded on generation 1 stopped generation 2, which nobody asked to stop")
	}
	asked, err := s.JobRequestCancelRun(context.Background(), j.ID)
	if err != nil || asked.LeaseGeneration != 2 {
		t.Fatalf("cancel-run of the second firing: generation %d, %v", asked.LeaseGeneration, err)
	}
	if !p.CancelRun(j.ID, 2) {
		t.Fatal("CancelRun of the running second firing reported the pool does not hold it")
	}
	waitState(t, s, j.ID, db.StateReady)
}

// TestPool_ShutdownReleases stops a pool whose handler outlives the grace
// period: the job is handed back, ready, without spending an attempt.
func TestPool_ShutdownReleases(t *testing.T) {
	s := sqlitetest.Open(t)
	// Both jobs exist before the pool starts, so its first claim takes both.
	stuck := create(t, s, db.JobCreateParams{Type: "stuck", MaxAttempts: 1})
	quick := create(t, s, db.JobCreateParams{Type: "quick"})
	started := make(chan struct{})
	var finished atomic.Bool
	_, stop := startPool(t, s, worker.PoolConfig{Grace: 50 * time.Millisecond, Handlers: map[string]worker.HandlerFunc{
		"stuck": func(ctx context.Context, _ *worker.Job) error { close(started); <-ctx.Done(); return ctx.Err() },
		"quick": func(ctx context.Context, _ *worker.Job) error {
			<-started
			time.Sleep(10 * time.Millisecond)
			finished.Store(true)
			return nil
		},
	}})
	<-started
	stop()
	j, _ := s.JobGet(context.Background(), stuck.ID)
	if j.State != db.StateReady || j.Attempt != 0 {
		t.Fatalf("stuck job after shutdown: %s attempt %d, want ready attempt 0", j.State, j.Attempt)
	}
	if r := runs(t, s, stuck.ID); r[0].Outcome != db.OutcomeReleased {
		t.Fatalf("outcome = %s, want released", r[0].Outcome)
	}
	if q, _ := s.JobGet(context.Background(), quick.ID); q.State != db.StateDone || !finished.Load() {
		t.Fatalf("quick job was not let finish within the grace period: %s", q.State)
	}
}

// TestPool_SpareWorkersLeave runs a spike that needs a worker goroutine per
// slot, then a trickle of runs one at a time, faster than every spare
// worker's idle time could lapse if the runs went round them: the most
// recently idle worker takes each run, so the spares time out.
func TestPool_SpareWorkersLeave(t *testing.T) {
	s := sqlitetest.Open(t)
	const slots = 20
	// Long enough for every worker of the spike to be idle at once on a
	// loaded machine before the first times out.
	const idle = time.Second
	var started sync.WaitGroup
	started.Add(slots)
	release := make(chan struct{})
	var trickled atomic.Int64
	p := worker.NewPool(worker.PoolConfig{
		Store: s, NextDueFunc: s.JobNextDue, NowFunc: s.Now, Slots: slots, MaxIdle: time.Hour,
		Handlers: map[string]worker.HandlerFunc{
			"spike":   func(context.Context, *worker.Job) error { started.Done(); <-release; return nil },
			"trickle": func(context.Context, *worker.Job) error { trickled.Add(1); return nil },
		},
	})
	worker.SetWorkerIdle(p, idle)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	for range slots {
		create(t, s, db.JobCreateParams{Type: "spike"})
	}
	p.Wake()
	started.Wait()
	close(release)
	for deadline := time.Now().Add(10 * time.Second); p.IdleWorkers() < slots; {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle workers after the spike, want %d", p.IdleWorkers(), slots)
		}
		time.Sleep(time.Millisecond)
	}

	// A run every idle/slots or so: round robin would keep every worker.
	var last db.Job
	for end := time.Now().Add(4 * idle); time.Now().Before(end); {
		last = create(t, s, db.JobCreateParams{Type: "trickle"})
		p.Wake()
		time.Sleep(idle / slots / 2)
	}
	waitState(t, s, last.ID, db.StateDone)
	if n := p.IdleWorkers(); n > slots/2 {
		t.Fatalf("%d workers still idle after %d runs one at a time; want the spares gone, at most %d left", n, trickled.Load(), slots/2)
	}
}

// TestPool_IdleShowsItself: a pool with nothing due still claims (every
// MaxIdle), so the store keeps seeing it alive, with the types it serves,
// and records it again db.WorkerSeenEvery later (GET /workers, sked add's
// warning for a type nobody serves); when it stops, it says so.
func TestPool_IdleShowsItself(t *testing.T) {
	s := sqlitetest.Open(t)
	var (
		mu  sync.Mutex
		now = time.Now().UTC().Truncate(time.Second)
	)
	s.NowFunc = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	_, stop := startPool(t, s, worker.PoolConfig{WorkerID: "idle-1", Slots: 2, MaxIdle: time.Millisecond,
		Handlers: map[string]worker.HandlerFunc{"quick": func(context.Context, *worker.Job) error { return nil }}})
	seenAt := func(want time.Time) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ws, err := s.Workers(context.Background(), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if len(ws) == 1 && ws[0].ID == "idle-1" && ws[0].LastSeen.Equal(want) && slices.Equal(ws[0].Types, []string{"quick"}) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("workers %+v; want idle-1 serving [quick], last seen %s", ws, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	start := now
	seenAt(start)
	mu.Lock()
	now = now.Add(db.WorkerSeenEvery)
	mu.Unlock()
	seenAt(start.Add(db.WorkerSeenEvery))
	stop()
	ws, err := s.Workers(context.Background(), time.Time{})
	if err != nil || len(ws) != 1 || ws[0].StoppedAt == nil || !ws[0].StoppedAt.Equal(now) {
		t.Fatalf("after the pool stopped: %+v (%v); want idle-1 stopped at %s", ws, err, now)
	}
}
