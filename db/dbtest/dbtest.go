// Package dbtest is the conformance suite every db.Store backend runs: the
// lifecycle, fencing, cancel races, idempotency, recurrence and misfire, all
// against a real database and a clock the test moves.
package dbtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/lifecycle"
)

// Clock is a settable clock for a store under test. It is safe for
// concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time // guarded by mu
}

// NewClock returns a clock stopped at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// OpenFunc opens a fresh, empty store whose clock is now and whose backoff
// jitter draws rnd.
type OpenFunc func(t *testing.T, now func() time.Time, rnd func() float64) db.Store

// Start is the instant every suite clock starts at: a Monday, 12:00 UTC.
var Start = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// Run runs the whole suite against the backend that open creates.
func Run(t *testing.T, open OpenFunc) {
	for name, fn := range map[string]func(*testing.T, *fixture){
		"JobCreate":              testJobCreate,
		"JobCreateIdempotent":    testJobCreateIdempotent,
		"JobCreateReturns":       testJobCreateReturnsStoredJob,
		"JobList":                testJobList,
		"JobListHealth":          testJobListHealth,
		"RunClaim":               testRunClaim,
		"RunClaimTypes":          testRunClaimTypes,
		"RunClaimTypesOrder":     testRunClaimTypesOrder,
		"RunClaimRace":           testRunClaimRace,
		"RunClaimMixed":          testRunClaimMixed,
		"RunClaimAhead":          testRunClaimAhead,
		"RunHeartbeat":           testRunHeartbeat,
		"HeartbeatClaimedLease":  testHeartbeatClaimedLease,
		"RunFinishStale":         testRunFinishStale,
		"RunFinishReturns":       testRunFinishReturnsStoredJob,
		"RetryThenDead":          testRetryThenDead,
		"PermanentFailure":       testPermanentFailure,
		"Reaper":                 testReaper,
		"ClaimAfterReap":         testClaimAfterReap,
		"Released":               testReleased,
		"Cancel":                 testCancel,
		"CancelClaimRace":        testCancelClaimRace,
		"CancelRun":              testCancelRun,
		"PauseResume":            testPauseResume,
		"Recurring":              testRecurring,
		"RecurringGaveUp":        testRecurringGaveUp,
		"Overlap":                testOverlap,
		"Misfire":                testMisfire,
		"MisfireLongDowntime":    testMisfireLongDowntime,
		"Jitter":                 testJitter,
		"JitterChangedOneOff":    testJitterChangedOneOff,
		"RunList":                testRunList,
		"PauseUntil":             testPauseUntil,
		"PauseReasonNotText":     testPauseReasonNotText,
		"ServeRunNotRemote":      testServeRunNotRemote,
		"RemoteRunTimedOut":      testRemoteRunTimedOut,
		"PayloadEscapedNUL":      testPayloadEscapedNUL,
		"Trigger":                testTrigger,
		"TriggerHealth":          testTriggerHealth,
		"SkipNext":               testSkipNext,
		"Backfill":               testBackfill,
		"BackfillOwnSlots":       testBackfillLeavesTheScheduleItsOwn,
		"DeadMansSwitch":         testDeadMansSwitch,
		"QuietToTheMillisecond":  testQuietToTheMillisecond,
		"QuietAfterResume":       testQuietAfterResume,
		"QuietRecovered":         testQuietRecovered,
		"QuietUnwatched":         testQuietUnwatched,
		"QuietAfterDowntime":     testQuietAfterDowntime,
		"QuietAfterRedefine":     testQuietAfterRedefine,
		"QuietWatchFrom":         testQuietWatchFrom,
		"QuietAfterSkip":         testQuietAfterSkip,
		"QuietSkipThenLonger":    testQuietSkipThenLonger,
		"Prune":                  testPrune,
		"PruneLongHistory":       testPruneLongHistory,
		"RunIDsNeverReused":      testRunIDsNeverReused,
		"JobCreateBatch":         testJobCreateBatch,
		"Ready":                  testReady,
		"RunFinishGroup":         testRunFinishGroup,
		"LateOutcome":            testLateOutcome,
		"ReleasedBeforeDue":      testReleasedBeforeDue,
		"ReleasedKeepsPlace":     testReleasedKeepsPlace,
		"PauseUntilAsOf":         testPauseUntilAsOf,
		"RunFinishAfterClose":    testRunFinishAfterClose,
		"MissedSpan":             testMissedSpan,
		"MissedSpanStepped":      testMissedSpanStepped,
		"KeyAfterCancel":         testKeyAfterCancel,
		"Names":                  testNames,
		"Redefine":               testRedefine,
		"Put":                    testPut,
		"PutRace":                testPutRace,
		"Timeline":               testTimeline,
		"GaveUpStart":            testGaveUpStart,
		"RunsLive":               testRunsLive,
		"Stats":                  testStats,
		"StatsSchedules":         testStatsSchedules,
		"RetryCrossesSlot":       testRetryCrossesSlot,
		"CancelRunReaped":        testCancelRunReaped,
		"FinishRepeated":         testFinishRepeated,
		"FinishRepeatedText":     testFinishRepeatedText,
		"TriggerDuringRetry":     testTriggerDuringRetry,
		"RedefineDuringRetry":    testRedefineDuringRetry,
		"RescheduleRunning":      testRescheduleWhileRunning,
		"RescheduleSkipBack":     testRescheduleAfterSkipBack,
		"PauseDuringRetry":       testPauseDuringRetry,
		"PauseWhileRunning":      testPauseWhileRunning,
		"SkipDuringRetry":        testSkipDuringRetry,
		"ReschedulePassed":       testRescheduleAccountsPassedSlots,
		"RescheduleAfterSkip":    testRescheduleAfterSkip,
		"RescheduleOffset":       testRescheduleKeepsOffset,
		"RescheduleKeepsSlot":    testRescheduleKeepsPassedSlot,
		"TriggeredSlot":          testTriggeredSlot,
		"ControlEvents":          testControlEvents,
		"Workers":                testWorkers,
		"ServeRunNotRemoteStale": testServeRunNotRemoteStale,
		"RemoteRenewalReaped":    testRemoteRenewalReaped,
		"BackfillAfterRedefine":  testBackfillAfterRedefine,
		"JobCreateBatchCrossed":  testJobCreateBatchCrossed,
		"StressLifecycle":        testStressLifecycle,
		"RunsHeld":               testRunsHeld,
		"ActivityLateness":       testActivityLateness,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := NewClock(Start)
			rnd := func() float64 { return 0.5 }
			fn(t, &fixture{T: t, Store: open(t, clock.Now, rnd), Clock: clock, ctx: context.Background()})
		})
	}
}

type fixture struct {
	*testing.T
	Store db.Store
	Clock *Clock
	ctx   context.Context
}

// create inserts a job, failing the test on error.
func (f *fixture) create(p db.JobCreateParams) db.Job {
	f.Helper()
	if p.Type == "" {
		p.Type = "noop"
	}
	j, created, err := f.Store.JobCreate(f.ctx, p)
	if err != nil {
		f.Fatalf("JobCreate(%+v): %v", p, err)
	}
	if !created {
		f.Fatalf("JobCreate(%+v): created = false", p)
	}
	return j
}

func (f *fixture) claim(worker string, max int) []db.Claim {
	f.Helper()
	return f.claimLease(worker, max, 30*time.Second)
}

func (f *fixture) claimLease(worker string, max int, lease time.Duration) []db.Claim {
	f.Helper()
	c, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: worker, Max: max, Lease: lease})
	if err != nil {
		f.Fatalf("RunClaim: %v", err)
	}
	return c
}

func (f *fixture) claimOne(worker string) db.Claim {
	f.Helper()
	c := f.claim(worker, 1)
	if len(c) != 1 {
		f.Fatalf("RunClaim: got %d claims, want 1", len(c))
	}
	return c[0]
}

func (f *fixture) finish(c db.Claim, outcome db.Outcome, retryable bool) db.Job {
	f.Helper()
	j, err := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: c.Job.ID, Generation: c.Job.LeaseGeneration,
		Outcome: outcome, Retryable: retryable, Error: errorFor(outcome)})
	if err != nil {
		f.Fatalf("RunFinish(%s, gen %d, %s): %v", c.Job.ID, c.Job.LeaseGeneration, outcome, err)
	}
	return j
}

func errorFor(o db.Outcome) string {
	if o == db.OutcomeSucceeded {
		return ""
	}
	return "boom"
}

func (f *fixture) get(id string) db.Job {
	f.Helper()
	j, err := f.Store.JobGet(f.ctx, id)
	if err != nil {
		f.Fatalf("JobGet(%s): %v", id, err)
	}
	return j
}

func (f *fixture) runs(id string) []db.Run {
	f.Helper()
	var all []db.Run
	var cursor int64
	for {
		page, next, err := f.Store.RunList(f.ctx, db.RunListParams{JobID: id, Limit: 500, Cursor: cursor})
		if err != nil {
			f.Fatalf("RunList(%s): %v", id, err)
		}
		all = append(all, page...)
		if next == 0 {
			return all
		}
		cursor = next
	}
}

// settled counts the runs of job id that settle slot: all of that slot's
// but those handed back (released), which did not run it.
func (f *fixture) settled(id string, slot time.Time) int {
	f.Helper()
	n := 0
	for _, r := range f.runs(id) {
		if r.Slot != nil && r.Slot.Equal(slot) && r.Outcome != db.OutcomeReleased {
			n++
		}
	}
	return n
}

// outcomes counts a job's runs by outcome (and missed runs by reason, as
// "missed:reason").
func (f *fixture) outcomes(id string) map[string]int {
	f.Helper()
	m := map[string]int{}
	for _, r := range f.runs(id) {
		k := string(r.Outcome)
		if r.Outcome == db.OutcomeMissed {
			k += ":" + r.Reason
		}
		m[k]++
	}
	return m
}

func wantState(t *testing.T, j db.Job, want db.JobState) {
	t.Helper()
	if j.State != want {
		t.Fatalf("job %s state = %s, want %s", j.ID, j.State, want)
	}
}

func wantTime(t *testing.T, what string, got *time.Time, want time.Time) {
	t.Helper()
	if got == nil || !got.Equal(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func wantCounts(t *testing.T, got, want map[string]int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("runs by outcome = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("runs by outcome = %v, want %v", got, want)
		}
	}
}

func testJobCreate(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Type: "http", Payload: json.RawMessage(`{"url":"http://x"}`)})
	wantState(t, j, db.StateReady)
	wantTime(t, "nextRunAt", j.NextRunAt, Start)
	if j.MaxAttempts != db.DefaultsFor("http").MaxAttempts || j.Timeout != db.Duration(db.DefaultTimeout) {
		t.Fatalf("defaults: maxAttempts %d timeout %v", j.MaxAttempts, j.Timeout)
	}
	got := f.get(j.ID)
	if string(got.Payload) != `{"url":"http://x"}` || got.Type != "http" {
		t.Fatalf("JobGet = %+v", got)
	}
	at := Start.Add(time.Hour)
	j = f.create(db.JobCreateParams{RunAt: at, MaxAttempts: 2})
	wantTime(t, "nextRunAt", j.NextRunAt, at)
	if _, err := f.Store.JobGet(f.ctx, "nope"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("JobGet(unknown) err = %v, want ErrNotFound", err)
	}
	j = f.create(db.JobCreateParams{Schedule: "0 * * * *", Timezone: "Europe/London"})
	wantTime(t, "slot", j.Slot, Start.Add(time.Hour))
	if _, _, err := f.Store.JobCreate(f.ctx, db.JobCreateParams{Type: "x", Schedule: "nope"}); !errors.Is(err, db.ErrInvalid) {
		t.Fatalf("bad schedule err = %v, want ErrInvalid", err)
	}
	// Defaults by type: an http job retries for most of a day.
	for typ, want := range map[string]db.Defaults{"http": {MaxAttempts: 25, Backoff: time.Minute}, "noop": {MaxAttempts: 5, Backoff: time.Second}} {
		j := f.create(db.JobCreateParams{Type: typ})
		if j.MaxAttempts != want.MaxAttempts || time.Duration(j.Backoff) != want.Backoff {
			t.Errorf("a %s job's defaults: %d attempts from %s, want %+v", typ, j.MaxAttempts, time.Duration(j.Backoff), want)
		}
	}
}

func testJobCreateIdempotent(t *testing.T, f *fixture) {
	req := db.JobCreateParams{Type: "noop", IdempotencyKey: "k1", Payload: json.RawMessage(`{"n":1}`)}
	first := f.create(req)
	again, created, err := f.Store.JobCreate(f.ctx, req)
	if err != nil || created {
		t.Fatalf("the same request again: created=%v err=%v, want false, nil", created, err)
	}
	if again.ID != first.ID || string(again.Payload) != `{"n":1}` {
		t.Fatalf("the same request again returned %s %s, want the first job %s", again.ID, again.Payload, first.ID)
	}
	other := req
	other.Payload = json.RawMessage(`{"n":2}`)
	var reused *db.KeyReusedError
	if _, _, err := f.Store.JobCreate(f.ctx, other); !errors.As(err, &reused) || !errors.Is(err, db.ErrInvalid) || reused.Job.ID != first.ID {
		t.Fatalf("another request with the same key: %v; want a KeyReusedError naming job %s", err, first.ID)
	}
	jobs, _, err := f.Store.JobList(f.ctx, db.JobListParams{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("JobList: %d jobs, err %v; want 1", len(jobs), err)
	}
}

func testJobList(t *testing.T, f *fixture) {
	for i := range 7 {
		typ := "a"
		if i%2 == 1 {
			typ = "b"
		}
		f.create(db.JobCreateParams{Type: typ})
		f.Clock.Advance(time.Millisecond)
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		jobs, next, err := f.Store.JobList(f.ctx, db.JobListParams{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for i, j := range jobs {
			if seen[j.ID] {
				t.Fatalf("job %s on two pages", j.ID)
			}
			seen[j.ID] = true
			if i > 0 && jobs[i-1].ID < j.ID {
				t.Fatalf("page not newest first")
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 7 || pages != 3 {
		t.Fatalf("paged %d jobs over %d pages, want 7 over 3", len(seen), pages)
	}
	b, _, _ := f.Store.JobList(f.ctx, db.JobListParams{Type: "b"})
	if len(b) != 3 {
		t.Fatalf("type b: %d jobs, want 3", len(b))
	}
	f.claim("w", 1)
	running, _, _ := f.Store.JobList(f.ctx, db.JobListParams{State: db.StateRunning})
	if len(running) != 1 {
		t.Fatalf("state running: %d jobs, want 1", len(running))
	}
}

// testJobListHealth lists the schedules in trouble: failing (the last
// firing gave up) and quiet (no success within expectSuccessWithin).
func testJobListHealth(t *testing.T, f *fixture) {
	f.create(db.JobCreateParams{Schedule: "0 * * * *"}) // well
	failing := f.create(db.JobCreateParams{Type: "f", Schedule: "0 * * * *", MaxAttempts: 1})
	quiet := f.create(db.JobCreateParams{Type: "q", Schedule: "0 * * * *", ExpectSuccessWithin: 2 * time.Hour})
	f.Clock.Set(Start.Add(time.Hour))
	c, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"f"}, Max: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 {
		t.Fatalf("claim of the failing schedule: %d, %v", len(c), err)
	}
	f.finish(c[0], db.OutcomeFailed, false)
	f.Clock.Set(Start.Add(3 * time.Hour))
	if _, err := f.Store.JobQuietSweep(f.ctx); err != nil {
		t.Fatal(err)
	}
	for health, want := range map[string]string{db.HealthFailing: failing.ID, db.HealthQuiet: quiet.ID} {
		jobs, _, err := f.Store.JobList(f.ctx, db.JobListParams{Health: health})
		if err != nil || len(jobs) != 1 || jobs[0].ID != want {
			t.Errorf("health %s: %d jobs (%v); want %s alone", health, len(jobs), err, want)
		}
	}
	// A cancelled schedule is in trouble no more: listed as the stats
	// (sked_schedules_failing) count it.
	if _, err := f.Store.JobCancel(f.ctx, failing.ID); err != nil {
		t.Fatal(err)
	}
	jobs, _, err := f.Store.JobList(f.ctx, db.JobListParams{Health: db.HealthFailing})
	st, serr := f.Store.Stats(f.ctx, f.Clock.Now())
	if err != nil || serr != nil || len(jobs) != 0 || st.FailingSchedules != 0 {
		t.Errorf("health failing after the cancel: %d jobs (%v), stats %d (%v); want none", len(jobs), err, st.FailingSchedules, serr)
	}
}

func testRunClaim(t *testing.T, f *fixture) {
	due := f.create(db.JobCreateParams{})
	f.create(db.JobCreateParams{RunAt: Start.Add(time.Minute)})
	claims := f.claim("w1", 10)
	if len(claims) != 1 || claims[0].Job.ID != due.ID {
		t.Fatalf("claimed %d jobs, want only the due one", len(claims))
	}
	c := claims[0]
	if c.Job.State != db.StateRunning || c.Job.LeaseGeneration != 1 || c.Job.Attempt != 1 || c.Job.LeaseOwner != "w1" {
		t.Fatalf("claimed job = %+v", c.Job)
	}
	wantTime(t, "leaseUntil", c.Job.LeaseUntil, Start.Add(30*time.Second))
	if again := f.claim("w2", 10); len(again) != 0 {
		t.Fatalf("a held job was claimed again by w2")
	}
	runs := f.runs(due.ID)
	if len(runs) != 1 || runs[0].ID != c.RunID || runs[0].Outcome != db.OutcomeRunning || runs[0].WorkerID != "w1" || runs[0].Generation != 1 {
		t.Fatalf("runs = %+v", runs)
	}
	f.Clock.Advance(time.Minute)
	if got := f.claim("w1", 10); len(got) != 1 {
		t.Fatalf("future job not claimed once due")
	}
	for range 5 {
		f.create(db.JobCreateParams{})
	}
	if got := f.claim("w1", 3); len(got) != 3 {
		t.Fatalf("batch claim got %d, want max 3", len(got))
	}
	if next, ok, err := f.Store.JobNextDue(f.ctx, nil); err != nil || !ok || !next.Equal(f.Clock.Now()) {
		t.Fatalf("JobNextDue = %v %v %v", next, ok, err)
	}
}

// testRunClaimMixed: a claim of one-off jobs, a misfired recurring job and
// a pinged job, due in turn, takes the earliest due and writes for each
// what it needs after its claim: the misfire policy runs the recurring
// job's latest slot and records the others missed, the pinged job's start
// is an event. (On PostgreSQL the one-off jobs without notifications are
// claimed by a claim whose COMMIT goes with it, the others by the ordinary
// claim: see engine.QuickClaimer. The claims are of no worker, which needs
// no record.)
func testRunClaimMixed(t *testing.T, f *fixture) {
	at := func(d time.Duration) db.JobCreateParams { return db.JobCreateParams{RunAt: Start.Add(d)} }
	p := at(20 * time.Minute)
	p.Notify = &db.Notify{Ping: "https://hc.example/mixed"}
	pinged := f.create(p)
	a := f.create(at(30 * time.Minute))
	r := f.create(db.JobCreateParams{Schedule: "0 * * * *", Misfire: db.MisfireRunOnce}) // due 13:00
	b := f.create(at(90 * time.Minute))
	c := f.create(at(3 * time.Hour))
	f.Clock.Set(Start.Add(3*time.Hour + 30*time.Minute))

	claim := func(max int, want ...string) []db.Claim {
		t.Helper()
		got := f.claim("", max)
		var ids []string
		for _, c := range got {
			ids = append(ids, c.Job.ID)
			if runs := f.runs(c.Job.ID); runs[0].ID != c.RunID || runs[0].Outcome != db.OutcomeRunning {
				t.Fatalf("claim of %s: run %d, newest run %+v", c.Job.ID, c.RunID, runs[0])
			}
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("claim of %d took %v, want %v (the earliest due, in order)", max, ids, want)
		}
		return got
	}
	got := claim(4, pinged.ID, a.ID, r.ID, b.ID)
	wantTime(t, "misfired job's slot", got[2].Job.Slot, Start.Add(3*time.Hour))
	wantCounts(t, f.outcomes(r.ID), map[string]int{"running": 1, "missed:" + db.MissedDowntime: 2})
	started := func(events []db.Event) bool {
		return slices.ContainsFunc(events, func(e db.Event) bool { return e.JobID == pinged.ID && e.Kind == db.EventStarted })
	}
	if !started(f.eventsAfter(0, nil, started)) {
		t.Fatalf("the pinged job's claim recorded no %s event", db.EventStarted)
	}
	claim(10, c.ID)
}

func testRunClaimTypes(t *testing.T, f *fixture) {
	f.create(db.JobCreateParams{Type: "a"})
	b := f.create(db.JobCreateParams{Type: "b", RunAt: Start.Add(time.Second)})
	c, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"b", "c"}, Max: 5})
	if err != nil || len(c) != 0 {
		t.Fatalf("claim of b before due: %v %v", c, err)
	}
	next, ok, err := f.Store.JobNextDue(f.ctx, []string{"b"})
	if err != nil || !ok || !next.Equal(*b.NextRunAt) {
		t.Fatalf("JobNextDue(b) = %v %v %v, want %v", next, ok, err, b.NextRunAt)
	}
	f.Clock.Advance(time.Second)
	c, err = f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"b", "c"}, Max: 5})
	if err != nil || len(c) != 1 || c[0].Job.ID != b.ID {
		t.Fatalf("claim of types b,c: %v %v", c, err)
	}
	if _, ok, _ := f.Store.JobNextDue(f.ctx, []string{"zzz"}); ok {
		t.Fatalf("JobNextDue of an unused type says a job waits")
	}
}

// testRunClaimTypesOrder: a claim of some types, or of any, takes the
// earliest due of those types' jobs, however the types' jobs interleave,
// and a backlog of one type does not hide another's jobs from a claim, the
// next-due lookup or the queue's statistics.
func testRunClaimTypesOrder(t *testing.T, f *fixture) {
	at := func(s int) time.Time { return Start.Add(time.Duration(s) * time.Second) }
	var backlog []db.JobCreateParams
	for i := range 300 {
		backlog = append(backlog, db.JobCreateParams{Type: "a", RunAt: at(-600 + i)})
	}
	a, err := f.Store.JobCreateBatch(f.ctx, backlog)
	if err != nil {
		t.Fatal(err)
	}
	var st db.Stats
	b1 := f.create(db.JobCreateParams{Type: "b", RunAt: at(-30)})
	c1 := f.create(db.JobCreateParams{Type: "c", RunAt: at(-20)})
	b2 := f.create(db.JobCreateParams{Type: "b", RunAt: at(-10)})
	f.create(db.JobCreateParams{Type: "c", RunAt: at(30)})
	f.create(db.JobCreateParams{Type: "d", RunAt: at(3600)})

	st, err = f.Store.Stats(f.ctx, Start)
	if err != nil || !st.ReadyOldestDue.Equal(at(-600)) || st.DueNextMinute != 304 {
		t.Fatalf("stats: oldest due %v, due within a minute %d (%v); want %v and 304", st.ReadyOldestDue, st.DueNextMinute, err, at(-600))
	}
	wantDue := map[string]db.Due{"a": {Oldest: at(-600), NextMinute: 300}, "b": {Oldest: at(-30), NextMinute: 2},
		"c": {Oldest: at(-20), NextMinute: 2}} // d's job is not due within the minute
	if !maps.EqualFunc(st.DueByType, wantDue, func(x, y db.Due) bool { return x.Oldest.Equal(y.Oldest) && x.NextMinute == y.NextMinute }) {
		t.Fatalf("stats by type: %v, want %v", st.DueByType, wantDue)
	}
	for _, c := range []struct {
		types []string
		want  time.Time
	}{{nil, at(-600)}, {[]string{"c", "d"}, at(-20)}, {[]string{"d"}, at(3600)}, {[]string{"b", "zzz"}, at(-30)}} {
		if next, ok, err := f.Store.JobNextDue(f.ctx, c.types); err != nil || !ok || !next.Equal(c.want) {
			t.Fatalf("JobNextDue(%v) = %v %v %v, want %v", c.types, next, ok, err, c.want)
		}
	}
	ids := func(cs []db.Claim, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.Job.ID
		}
		return out
	}
	claim := func(max int, types ...string) []string {
		return ids(f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: types, Max: max}))
	}
	if got := claim(2, "c", "b"); !slices.Equal(got, []string{b1.ID, c1.ID}) {
		t.Fatalf("claim of c, b: %v, want %v", got, []string{b1.ID, c1.ID})
	}
	if got := claim(5, "b", "c"); !slices.Equal(got, []string{b2.ID}) {
		t.Fatalf("claim of b, c after: %v, want only %s (the other c is not due)", got, b2.ID)
	}
	if got, want := claim(3), []string{a[0].ID, a[1].ID, a[2].ID}; !slices.Equal(got, want) {
		t.Fatalf("claim of any type: %v, want the earliest of a's backlog %v", got, want)
	}
	f.create(db.JobCreateParams{Type: "b", RunAt: at(-900)})
	if got := claim(2, "b", "a", "b"); len(got) != 2 || got[1] != a[3].ID {
		t.Fatalf("claim of b, a, b: %v, want b's new job, then %s", got, a[3].ID)
	}
}

// testRunClaimRace has many workers claim the same due jobs at once: each job
// is claimed exactly once.
func testRunClaimRace(t *testing.T, f *fixture) {
	const jobs, workers = 200, 8
	for range jobs {
		f.create(db.JobCreateParams{})
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				c, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: string(rune('a' + w)), Max: 7})
				if err != nil {
					t.Error(err)
					return
				}
				if len(c) == 0 {
					return
				}
				mu.Lock()
				for _, cl := range c {
					seen[cl.Job.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != jobs {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), jobs)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("job %s claimed %d times", id, n)
		}
	}
}

// testRunClaimAhead: a claim with Ahead also takes the jobs due within it,
// not those due later; their runs start at the due time, and one handed
// back before it is due, or whose lease ran out before it was due (it
// cannot have started), stays due then and is not charged an attempt.
func testRunClaimAhead(t *testing.T, f *fixture) {
	soon := f.create(db.JobCreateParams{RunAt: Start.Add(200 * time.Millisecond)})
	later := f.create(db.JobCreateParams{RunAt: Start.Add(time.Second)})
	ahead := func(d time.Duration) []db.Claim {
		t.Helper()
		c, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Max: 10, Ahead: d})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := ahead(100 * time.Millisecond); len(c) != 0 {
		t.Fatalf("claimed %d jobs 100ms ahead, want none: the first is due in 200ms", len(c))
	}
	c := ahead(500 * time.Millisecond)
	if len(c) != 1 || c[0].Job.ID != soon.ID {
		t.Fatalf("claimed %+v 500ms ahead, want only the job due in 200ms", c)
	}
	wantTime(t, "claimed nextRunAt", c[0].Job.NextRunAt, Start.Add(200*time.Millisecond))
	runs := f.runs(soon.ID)
	if len(runs) != 1 || runs[0].ID != c[0].RunID {
		t.Fatalf("runs = %+v", runs)
	}
	wantTime(t, "run startedAt", runs[0].StartedAt, Start.Add(200*time.Millisecond))
	released := f.finish(c[0], db.OutcomeReleased, false)
	wantState(t, released, db.StateReady)
	wantTime(t, "nextRunAt after a release before it was due", released.NextRunAt, Start.Add(200*time.Millisecond))
	if c := f.claim("w", 10); len(c) != 0 {
		t.Fatalf("a job handed back before it was due was claimed again early")
	}
	lost, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Max: 10, Ahead: 500 * time.Millisecond, Lease: 50 * time.Millisecond})
	if err != nil || len(lost) != 1 {
		t.Fatalf("claim ahead again: %d claims, %v", len(lost), err)
	}
	f.Clock.Advance(100 * time.Millisecond) // the lease ran out 100 ms before the job was due
	if n, err := f.Store.RunReapExpired(f.ctx); err != nil || n != 1 {
		t.Fatalf("reaped %d, %v; want 1", n, err)
	}
	reaped := f.get(soon.ID)
	if reaped.State != db.StateReady || reaped.Attempt != 0 || !reaped.NextRunAt.Equal(Start.Add(200*time.Millisecond)) {
		t.Fatalf("after its lease ran out before it was due: %s attempt %d due %v; want ready, attempt 0, due as before",
			reaped.State, reaped.Attempt, reaped.NextRunAt)
	}
	f.Clock.Advance(time.Second)
	if c := f.claim("w", 10); len(c) != 2 {
		t.Fatalf("claimed %d jobs once both were due, want 2", len(c))
	}
	wantState(t, f.get(later.ID), db.StateRunning)
	wantCounts(t, f.outcomes(soon.ID), map[string]int{"released": 1, "lease_expired": 1, "running": 1})
}

func testRunHeartbeat(t *testing.T, f *fixture) {
	f.create(db.JobCreateParams{})
	c := f.claimOne("w")
	f.Clock.Advance(20 * time.Second)
	hb, err := f.Store.RunHeartbeat(f.ctx, db.RunHeartbeatParams{JobID: c.Job.ID, Generation: 1, Lease: 30 * time.Second})
	if err != nil || !hb.LeaseUntil.Equal(f.Clock.Now().Add(30*time.Second)) || hb.CancelRequested {
		t.Fatalf("heartbeat = %+v, %v", hb, err)
	}
	if _, err := f.Store.RunHeartbeat(f.ctx, db.RunHeartbeatParams{JobID: c.Job.ID, Generation: 2}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("heartbeat with a wrong generation: err = %v, want ErrStale", err)
	}
	// A renewal never shortens a lease: one whose transaction began before
	// another's (a slow node) may commit after it, and the later end, once
	// answered, must hold. It answers the lease as it is.
	promised := *f.get(c.Job.ID).LeaseUntil
	f.Clock.Advance(-5 * time.Second)
	hb, err = f.Store.RunHeartbeat(f.ctx, db.RunHeartbeatParams{JobID: c.Job.ID, Generation: 1, Lease: 10 * time.Second})
	if err != nil || !hb.LeaseUntil.Equal(promised) {
		t.Fatalf("a renewal to an earlier end = %+v, %v; want the lease kept until %v", hb, err, promised)
	}
	if got := f.get(c.Job.ID).LeaseUntil; !got.Equal(promised) {
		t.Fatalf("after a renewal to an earlier end the lease runs until %v; want %v", got, promised)
	}
	f.Clock.Advance(5 * time.Second)
	// The extended lease keeps the reaper away past the first lease's end.
	f.Clock.Advance(20 * time.Second)
	if n, err := f.Store.RunReapExpired(f.ctx); err != nil || n != 0 {
		t.Fatalf("reaped %d (%v) while the lease was renewed", n, err)
	}
	// A lease that ran out cannot be renewed, even before the reaper runs.
	f.Clock.Advance(31 * time.Second)
	if _, err := f.Store.RunHeartbeat(f.ctx, db.RunHeartbeatParams{JobID: c.Job.ID, Generation: 1}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("heartbeat after expiry: err = %v, want ErrStale", err)
	}
}

// testHeartbeatClaimedLease: a heartbeat that names no lease renews it by
// as long as the claim leased the job for, not by the default lease: a
// worker that claimed for 5 minutes and renews every 100 s keeps its job.
// Two claims of one worker, one after the other (on PostgreSQL the second
// is a quick claim), each renewed so, through the worker protocol and not.
func testHeartbeatClaimedLease(t *testing.T, f *fixture) {
	const lease = 5 * time.Minute
	f.create(db.JobCreateParams{})
	f.create(db.JobCreateParams{})
	f.Clock.Advance(time.Second)
	var claims []db.Claim
	for range 2 {
		c := f.claimLease("w", 1, lease)
		if len(c) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(c))
		}
		claims = append(claims, c[0])
	}
	for round := range 3 {
		f.Clock.Advance(100 * time.Second)
		for i, c := range claims {
			hb, err := f.Store.RunHeartbeat(f.ctx, db.RunHeartbeatParams{JobID: c.Job.ID, Generation: c.Job.LeaseGeneration, Remote: i == 0})
			if want := f.Clock.Now().Add(lease); err != nil || !hb.LeaseUntil.Equal(want) {
				t.Fatalf("round %d, claim %d: heartbeat without a lease = %+v, %v; want the lease until %v", round, i, hb, err, want)
			}
		}
		if n, err := f.Store.RunReapExpired(f.ctx); err != nil || n != 0 {
			t.Fatalf("round %d: reaped %d (%v) while the leases were renewed", round, n, err)
		}
	}
	// A lease named in the heartbeat still wins.
	c := claims[0]
	hb, err := f.Store.RunHeartbeat(f.ctx, db.RunHeartbeatParams{JobID: c.Job.ID, Generation: c.Job.LeaseGeneration, Lease: 20 * time.Minute})
	if want := f.Clock.Now().Add(20 * time.Minute); err != nil || !hb.LeaseUntil.Equal(want) {
		t.Fatalf("heartbeat naming 20m = %+v, %v; want the lease until %v", hb, err, want)
	}
}

func testRunFinishStale(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{})
	c := f.claimOne("w")
	_, err := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: j.ID, Generation: c.Job.LeaseGeneration + 1, Outcome: db.OutcomeSucceeded})
	if !errors.Is(err, db.ErrStale) {
		t.Fatalf("finish with a future generation: err = %v, want ErrStale", err)
	}
	wantState(t, f.get(j.ID), db.StateRunning)
	done := f.finish(c, db.OutcomeSucceeded, false)
	wantState(t, done, db.StateDone)
	if done.NextRunAt != nil || done.LeaseOwner != "" {
		t.Fatalf("done job keeps nextRunAt %v owner %q", done.NextRunAt, done.LeaseOwner)
	}
	_, err = f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: j.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeFailed})
	if !errors.Is(err, db.ErrStale) {
		t.Fatalf("second finish: err = %v, want ErrStale", err)
	}
	wantCounts(t, f.outcomes(j.ID), map[string]int{"succeeded": 1})
}

func testRetryThenDead(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{MaxAttempts: 3, Backoff: 10 * time.Second})
	// rnd is 0.5: the wait is 3/4 of base·2^(attempt-1).
	for attempt, wait := range []time.Duration{7500 * time.Millisecond, 15 * time.Second} {
		c := f.claimOne("w")
		if c.Job.Attempt != attempt+1 {
			t.Fatalf("attempt = %d, want %d", c.Job.Attempt, attempt+1)
		}
		got := f.finish(c, db.OutcomeFailed, true)
		wantState(t, got, db.StateReady)
		wantTime(t, "retry at", got.NextRunAt, f.Clock.Now().Add(wait))
		if got.LastError != "boom" {
			t.Fatalf("lastError = %q", got.LastError)
		}
		if len(f.claim("w", 1)) != 0 {
			t.Fatalf("claimed during backoff")
		}
		f.Clock.Advance(wait)
	}
	c := f.claimOne("w")
	wantState(t, f.finish(c, db.OutcomeTimedOut, true), db.StateDead)
	runs := f.runs(j.ID)
	if !runs[0].GaveUp || runs[0].Outcome != db.OutcomeTimedOut {
		t.Fatalf("last run = %+v, want timed_out and gave up", runs[0])
	}
	wantCounts(t, f.outcomes(j.ID), map[string]int{"failed": 2, "timed_out": 1})
	retried, err := f.Store.JobRetry(f.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, retried, db.StateReady)
	if retried.Attempt != 0 {
		t.Fatalf("retried attempt = %d", retried.Attempt)
	}
	if c := f.claimOne("w"); c.Job.Attempt != 1 {
		t.Fatalf("attempt after retry = %d", c.Job.Attempt)
	}
	if _, err := f.Store.JobRetry(f.ctx, j.ID); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("retry of a running job: err = %v, want ErrConflict", err)
	}
}

func testPermanentFailure(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{MaxAttempts: 5})
	wantState(t, f.finish(f.claimOne("w"), db.OutcomeFailed, false), db.StateDead)
	dead, _, _ := f.Store.JobList(f.ctx, db.JobListParams{State: db.StateDead})
	if len(dead) != 1 || dead[0].ID != j.ID {
		t.Fatalf("dead list = %v", dead)
	}
}

func testReaper(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{MaxAttempts: 2, Backoff: time.Second})
	first := f.claimOne("w1")
	f.Clock.Advance(30 * time.Second)
	if n, _ := f.Store.RunReapExpired(f.ctx); n != 0 {
		t.Fatalf("reaped a lease at its last instant")
	}
	f.Clock.Advance(time.Millisecond)
	if n, err := f.Store.RunReapExpired(f.ctx); err != nil || n != 1 {
		t.Fatalf("reaped %d, %v; want 1", n, err)
	}
	// Due again at once, in its old place: before a job that fell due
	// while it was held.
	reaped := f.get(j.ID)
	wantState(t, reaped, db.StateReady)
	wantTime(t, "next run of the reaped job", reaped.NextRunAt, *first.Job.NextRunAt)
	later := f.create(db.JobCreateParams{})
	second := f.claimOne("w2")
	if second.Job.ID != j.ID {
		t.Fatalf("claimed %s first; want the reaped job %s, due before it", second.Job.ID, j.ID)
	}
	if second.Job.LeaseGeneration != first.Job.LeaseGeneration+1 {
		t.Fatalf("generation %d after %d", second.Job.LeaseGeneration, first.Job.LeaseGeneration)
	}
	// The first worker wakes up: everything it writes is refused.
	if _, err := f.Store.RunHeartbeat(f.ctx, db.RunHeartbeatParams{JobID: j.ID, Generation: first.Job.LeaseGeneration}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("stale heartbeat: %v", err)
	}
	if _, err := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: j.ID, Generation: first.Job.LeaseGeneration, Outcome: db.OutcomeSucceeded}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("stale finish: %v", err)
	}
	wantState(t, f.get(j.ID), db.StateRunning)
	// The second lease expires too: attempts are spent, the job is dead.
	f.Clock.Advance(31 * time.Second)
	if n, _ := f.Store.RunReapExpired(f.ctx); n != 1 {
		t.Fatalf("second reap: %d", n)
	}
	wantState(t, f.get(j.ID), db.StateDead)
	wantCounts(t, f.outcomes(j.ID), map[string]int{"lease_expired": 2})
	wantState(t, f.get(later.ID), db.StateReady)
}

// testClaimAfterReap claims a job whose lease was just reaped in a
// transaction whose clock was read before the reaper's: on PostgreSQL a
// claim's statement runs after its clock is read and can see a commit made
// in between. The ledger must not show the new run starting before the
// reaped one ended.
func testClaimAfterReap(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{MaxAttempts: 2})
	f.claimOne("w1")
	f.Clock.Advance(31 * time.Second)
	if n, err := f.Store.RunReapExpired(f.ctx); err != nil || n != 1 {
		t.Fatalf("reaped %d, %v; want 1", n, err)
	}
	reapedAt := f.Clock.Now()
	f.Clock.Set(reapedAt.Add(-5 * time.Millisecond)) // read before the reap committed
	second := f.claimOne("w2")
	if second.Job.UpdatedAt.Before(reapedAt) {
		t.Fatalf("the claim dated the job %v, before the reap at %v", second.Job.UpdatedAt, reapedAt)
	}
	runs := f.runs(j.ID) // newest first
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	if runs[0].StartedAt.Before(*runs[1].FinishedAt) {
		t.Fatalf("run %d started %v, before run %d ended (%s) at %v",
			runs[0].Generation, runs[0].StartedAt, runs[1].Generation, runs[1].Outcome, runs[1].FinishedAt)
	}
}

func testReleased(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{MaxAttempts: 1})
	got := f.finish(f.claimOne("w"), db.OutcomeReleased, false)
	wantState(t, got, db.StateReady)
	if got.Attempt != 0 {
		t.Fatalf("a released run counted as an attempt: %d", got.Attempt)
	}
	wantState(t, f.finish(f.claimOne("w"), db.OutcomeSucceeded, false), db.StateDone)
	wantCounts(t, f.outcomes(j.ID), map[string]int{"released": 1, "succeeded": 1})
}

func testCancel(t *testing.T, f *fixture) {
	ready := f.create(db.JobCreateParams{})
	got, err := f.Store.JobCancel(f.ctx, ready.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, got, db.StateCancelled)
	if len(f.claim("w", 5)) != 0 {
		t.Fatalf("cancelled job claimed")
	}
	if _, err := f.Store.JobCancel(f.ctx, ready.ID); err != nil {
		t.Fatalf("cancel of a cancelled job: %v", err)
	}
	if _, err := f.Store.JobCancel(f.ctx, "nope"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("cancel of unknown: %v", err)
	}
	held := f.create(db.JobCreateParams{})
	c := f.claimOne("w9")
	_, err = f.Store.JobCancel(f.ctx, held.ID)
	var conflict *db.ConflictError
	if !errors.As(err, &conflict) || conflict.Run == nil || conflict.Run.ID != c.RunID || conflict.Run.WorkerID != "w9" {
		t.Fatalf("cancel of a held job: err = %v, want a conflict naming run %d", err, c.RunID)
	}
	wantState(t, f.get(held.ID), db.StateRunning)
	f.finish(c, db.OutcomeSucceeded, false)
	if _, err := f.Store.JobCancel(f.ctx, held.ID); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("cancel of a done job: %v", err)
	}
}

// testCancelClaimRace races cancels against claims on the same due jobs:
// every job ends either cancelled and never run, or claimed with its cancel
// refused; never both, never neither.
func testCancelClaimRace(t *testing.T, f *fixture) {
	const n = 100
	ids := make([]string, n)
	for i := range ids {
		ids[i] = f.create(db.JobCreateParams{}).ID
	}
	var (
		mu        sync.Mutex
		claimed   = map[string]bool{}
		cancelled = map[string]bool{}
		refused   = map[string]bool{}
		wg        sync.WaitGroup
	)
	for w := range 4 {
		wg.Go(func() {
			for range n {
				c, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: string(rune('a' + w)), Max: 3})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, cl := range c {
					claimed[cl.Job.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	for k := range 4 {
		wg.Go(func() {
			for i := k; i < n; i += 4 {
				_, err := f.Store.JobCancel(f.ctx, ids[i])
				mu.Lock()
				switch {
				case err == nil:
					cancelled[ids[i]] = true
				case errors.Is(err, db.ErrConflict):
					refused[ids[i]] = true
				default:
					t.Error(err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	f.claim("late", n) // whatever no racer took
	for _, id := range ids {
		j := f.get(id)
		switch {
		case cancelled[id] && (claimed[id] || j.State != db.StateCancelled || len(f.runs(id)) != 0):
			t.Fatalf("job %s: cancel won but claimed=%v state=%s runs=%d", id, claimed[id], j.State, len(f.runs(id)))
		case refused[id] && j.State != db.StateRunning:
			t.Fatalf("job %s: cancel refused but state %s", id, j.State)
		case !cancelled[id] && !refused[id]:
			t.Fatalf("job %s: cancel neither won nor was refused", id)
		}
	}
}

func testCancelRun(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{})
	if _, err := f.Store.JobRequestCancelRun(f.ctx, j.ID); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("cancel-run of a ready job: %v", err)
	}
	c := f.claimOne("w")
	if _, err := f.Store.JobRequestCancelRun(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	hb, err := f.Store.RunHeartbeat(f.ctx, db.RunHeartbeatParams{JobID: j.ID, Generation: c.Job.LeaseGeneration})
	if err != nil || !hb.CancelRequested {
		t.Fatalf("heartbeat after cancel-run = %+v %v, want CancelRequested", hb, err)
	}
	wantState(t, f.finish(c, db.OutcomeCancelled, false), db.StateCancelled)
	wantCounts(t, f.outcomes(j.ID), map[string]int{"cancelled": 1})
}

func testPauseResume(t *testing.T, f *fixture) {
	one := f.create(db.JobCreateParams{})
	if _, err := f.Store.JobPause(f.ctx, one.ID); err != nil {
		t.Fatal(err)
	}
	if len(f.claim("w", 5)) != 0 {
		t.Fatalf("paused job claimed")
	}
	if _, err := f.Store.JobResume(f.ctx, one.ID); err != nil {
		t.Fatal(err)
	}
	f.claimOne("w")
	if _, err := f.Store.JobPause(f.ctx, one.ID); !errors.Is(err, db.ErrConflict) {
		t.Fatalf("pause of a running job: %v", err)
	}

	// A schedule paused over three of its slots resumes at the next one and
	// records the three as missed (paused).
	rec := f.create(db.JobCreateParams{Schedule: "0 * * * *"})
	if _, err := f.Store.JobPause(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(3*time.Hour + 30*time.Minute)
	got, err := f.Store.JobResume(f.ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, got, db.StateReady)
	wantTime(t, "slot after resume", got.Slot, Start.Add(4*time.Hour))
	wantCounts(t, f.outcomes(rec.ID), map[string]int{"missed:paused": 3})
	if got.MissedSlots != 3 {
		t.Fatalf("missedSlots = %d, want 3", got.MissedSlots)
	}

	// With a jitter, a slot is due at its time plus the job's offset: a
	// resume after the slot's time but before it is due runs it; one after
	// it is due records it slept through.
	var jit db.Job
	for jit.ID == "" || jit.NextRunAt.Sub(*jit.Slot) < time.Minute { // an offset over a minute
		jit = f.create(db.JobCreateParams{Schedule: "0 * * * *", Jitter: 50 * time.Minute})
	}
	slot, due := *jit.Slot, *jit.NextRunAt
	for _, c := range []struct {
		at       time.Time
		wantSlot time.Time
		missed   int
	}{
		{slot.Add(time.Second), slot, 0},                               // passed, not due
		{due, slot, 0},                                                 // due at the resume
		{due.Add(time.Second), slot.Add(time.Hour), 1},                 // due before the resume
		{due.Add(time.Hour + time.Second), slot.Add(2 * time.Hour), 2}, // and the next too
	} {
		if _, err := f.Store.JobPause(f.ctx, jit.ID); err != nil {
			t.Fatal(err)
		}
		f.Clock.Set(c.at)
		got, err := f.Store.JobResume(f.ctx, jit.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantTime(t, "slot after a resume "+c.at.Sub(slot).String()+" after the slot", got.Slot, c.wantSlot)
		if got.MissedSlots != int64(c.missed) {
			t.Fatalf("resumed %s after the slot: missedSlots = %d, want %d", c.at.Sub(slot), got.MissedSlots, c.missed)
		}
	}
}

func testRecurring(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "*/15 * * * *"})
	wantTime(t, "first slot", j.Slot, Start.Add(15*time.Minute))
	for i := 1; i <= 3; i++ {
		slot := Start.Add(time.Duration(i) * 15 * time.Minute)
		f.Clock.Set(slot.Add(time.Second)) // a little late
		c := f.claimLease("w", 1, time.Hour)[0]
		wantTime(t, "claimed slot", c.Job.Slot, slot)
		f.Clock.Advance(10 * time.Minute) // a slow run: the next slot does not drift
		got := f.finish(c, db.OutcomeSucceeded, false)
		wantState(t, got, db.StateReady)
		wantTime(t, "next slot", got.Slot, slot.Add(15*time.Minute))
		wantTime(t, "next due", got.NextRunAt, slot.Add(15*time.Minute))
	}
	wantCounts(t, f.outcomes(j.ID), map[string]int{"succeeded": 3})

	// @every counts elapsed time from the slot.
	e := f.create(db.JobCreateParams{Schedule: "@every 90s"})
	first := *e.Slot
	f.Clock.Set(first)
	got := f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	wantTime(t, "@every next", got.Slot, first.Add(90*time.Second))
}

func testRecurringGaveUp(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *", MaxAttempts: 2, Backoff: time.Second})
	f.Clock.Set(Start.Add(time.Hour))
	f.finish(f.claimOne("w"), db.OutcomeFailed, true)
	f.Clock.Advance(time.Second)
	got := f.finish(f.claimOne("w"), db.OutcomeFailed, true)
	wantState(t, got, db.StateReady) // the schedule lives on
	wantTime(t, "next slot", got.Slot, Start.Add(2*time.Hour))
	if got.Attempt != 0 {
		t.Fatalf("attempt = %d after moving to the next slot", got.Attempt)
	}
	runs := f.runs(j.ID)
	if !runs[0].GaveUp || runs[1].GaveUp {
		t.Fatalf("gaveUp marks = %v, %v; want the last run only", runs[0].GaveUp, runs[1].GaveUp)
	}
}

func testOverlap(t *testing.T, f *fixture) {
	skip := f.create(db.JobCreateParams{Type: "s", Schedule: "*/10 * * * *"})
	queue := f.create(db.JobCreateParams{Type: "q", Schedule: "*/10 * * * *", Overlap: db.OverlapQueueOne})
	f.Clock.Set(Start.Add(10 * time.Minute))
	cs, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Max: 2, Lease: time.Hour})
	if err != nil || len(cs) != 2 {
		t.Fatalf("claimed %d, %v", len(cs), err)
	}
	// Both run 35 minutes: the slots at :20, :30 and :40 pass meanwhile.
	f.Clock.Advance(35 * time.Minute)
	for _, c := range cs {
		got := f.finish(c, db.OutcomeSucceeded, false)
		switch c.Job.ID {
		case skip.ID:
			wantTime(t, "skip: next slot", got.Slot, Start.Add(50*time.Minute))
			wantCounts(t, f.outcomes(skip.ID), map[string]int{"succeeded": 1, "missed:overlap": 3})
		case queue.ID:
			wantTime(t, "queue_one: next slot", got.Slot, Start.Add(40*time.Minute))
			wantCounts(t, f.outcomes(queue.ID), map[string]int{"succeeded": 1, "missed:overlap": 2})
		}
	}
	// queue_one runs the latest passed slot at once, then resumes the grid.
	c, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"q"}, Max: 1})
	if err != nil || len(c) != 1 {
		t.Fatalf("queued run not claimable: %d, %v", len(c), err)
	}
	wantTime(t, "queued slot", c[0].Job.Slot, Start.Add(40*time.Minute))
	wantTime(t, "after queued run", f.finish(c[0], db.OutcomeSucceeded, false).Slot, Start.Add(50*time.Minute))
}

func testMisfire(t *testing.T, f *fixture) {
	type tc struct {
		misfire  string
		down     time.Duration // after the first slot at 13:00
		slot     time.Time     // the slot that runs
		claimed  bool
		missed   int
		nextSlot time.Time // after that run (or when nothing ran)
	}
	for _, c := range []tc{
		{db.MisfireRunOnce, 5*time.Hour + 30*time.Minute, Start.Add(6 * time.Hour), true, 5, Start.Add(7 * time.Hour)},
		{db.MisfireSkip, 5*time.Hour + 30*time.Minute, time.Time{}, false, 6, Start.Add(7 * time.Hour)},
		{db.MisfireSkip, 5*time.Hour + 30*time.Second, Start.Add(6 * time.Hour), true, 5, Start.Add(7 * time.Hour)},
		{db.MisfireRunAll, 5*time.Hour + 30*time.Minute, Start.Add(time.Hour), true, 0, Start.Add(2 * time.Hour)},
	} {
		j := f.create(db.JobCreateParams{Type: c.misfire, Schedule: "0 * * * *", Misfire: c.misfire})
		f.Clock.Set(Start.Add(time.Hour + c.down))
		got, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{c.misfire}, Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		if (len(got) == 1) != c.claimed {
			t.Fatalf("%s down %v: claimed %d", c.misfire, c.down, len(got))
		}
		var after db.Job
		if c.claimed {
			wantTime(t, c.misfire+" slot run", got[0].Job.Slot, c.slot)
			after = f.finish(got[0], db.OutcomeSucceeded, false)
		} else {
			after = f.get(j.ID)
		}
		wantTime(t, c.misfire+" next slot", after.Slot, c.nextSlot)
		counts := f.outcomes(j.ID)
		if counts["missed:downtime"] != c.missed || after.MissedSlots != int64(c.missed) {
			t.Fatalf("%s down %v: missed rows %v, missedSlots %d; want %d", c.misfire, c.down, counts, after.MissedSlots, c.missed)
		}
		f.Clock.Set(Start)
	}
}

func testJitter(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *", Jitter: 10 * time.Minute})
	off := j.NextRunAt.Sub(*j.Slot)
	if off < 0 || off >= 10*time.Minute {
		t.Fatalf("offset %v outside [0, 10m)", off)
	}
	f.Clock.Set(*j.NextRunAt)
	got := f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	if got.NextRunAt.Sub(*got.Slot) != off {
		t.Fatalf("offset changed from %v to %v", off, got.NextRunAt.Sub(*got.Slot))
	}
}

// testJitterChangedOneOff changes the jitter of a one-off job that waits:
// its run is due at its new offset, as each slot of a schedule is.
func testJitterChangedOneOff(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{RunAt: Start.Add(time.Hour)})
	for _, jitter := range []time.Duration{10 * time.Minute, time.Hour, 0} {
		spec := db.SpecOf(f.get(j.ID))
		spec.Jitter = jitter
		got, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: spec})
		if err != nil {
			t.Fatalf("jitter %v: %v", jitter, err)
		}
		wantTime(t, fmt.Sprintf("slot after a change of jitter to %v", jitter), got.Slot, Start.Add(time.Hour))
		wantTime(t, fmt.Sprintf("due time after a change of jitter to %v", jitter), got.NextRunAt, lifecycle.DueAt(j.ID, Start.Add(time.Hour), jitter))
	}
	// A retry waits out its backoff, whatever the jitter.
	r := f.create(db.JobCreateParams{MaxAttempts: 3, Backoff: time.Hour})
	failed := f.finish(f.claimOne("w"), db.OutcomeFailed, true)
	spec := db.SpecOf(failed)
	spec.Jitter = 10 * time.Minute
	got, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: r.ID, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "retry's due time after a change of jitter", got.NextRunAt, *failed.NextRunAt)
}

func testRunList(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{MaxAttempts: 10, Backoff: time.Millisecond})
	for range 5 {
		f.finish(f.claimOne("w"), db.OutcomeFailed, true)
		f.Clock.Advance(time.Second)
	}
	page, next, err := f.Store.RunList(f.ctx, db.RunListParams{JobID: j.ID, Limit: 2})
	if err != nil || len(page) != 2 || next == 0 || page[0].Attempt != 5 {
		t.Fatalf("first page = %d runs, next %d, err %v", len(page), next, err)
	}
	if got := f.runs(j.ID); len(got) != 5 {
		t.Fatalf("all runs = %d", len(got))
	}
	if _, _, err := f.Store.RunList(f.ctx, db.RunListParams{JobID: "nope"}); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("runs of unknown job: %v", err)
	}
}

// testRunsLive reads the live runs of several jobs at once: the running
// run of each one's current lease, none for a job that waits, and none for
// a lease that has moved on.
func testRunsLive(t *testing.T, f *fixture) {
	a := f.create(db.JobCreateParams{MaxAttempts: 3})
	b := f.create(db.JobCreateParams{})
	waiting := f.create(db.JobCreateParams{RunAt: Start.Add(time.Hour)})
	first := map[string]db.Claim{}
	for _, c := range f.claim("w1", 5) {
		first[c.Job.ID] = c
	}
	if len(first) != 2 {
		t.Fatalf("claimed %d jobs, want a and b", len(first))
	}
	f.finish(first[a.ID], db.OutcomeFailed, true)
	f.Clock.Advance(time.Minute)
	again := f.claimOne("w2")

	runs, err := f.Store.RunsLive(f.ctx, []db.Job{f.get(a.ID), f.get(b.ID), f.get(waiting.ID)})
	if err != nil || len(runs) != 2 {
		t.Fatalf("RunsLive = %+v, %v; want the runs of a and b", runs, err)
	}
	want := map[string]db.Claim{a.ID: again, b.ID: first[b.ID]}
	for _, r := range runs {
		c := want[r.JobID]
		if r.ID != c.RunID || r.Generation != c.Job.LeaseGeneration || r.Outcome != db.OutcomeRunning || r.WorkerID != c.Job.LeaseOwner {
			t.Errorf("live run of %s = %+v; want run %d of generation %d, running on %s", r.JobID, r, c.RunID, c.Job.LeaseGeneration, c.Job.LeaseOwner)
		}
	}
	if runs, err := f.Store.RunsLive(f.ctx, []db.Job{first[a.ID].Job}); err != nil || len(runs) != 0 {
		t.Fatalf("RunsLive of a lease that moved on = %+v, %v; want none", runs, err)
	}
	if runs, err := f.Store.RunsLive(f.ctx, nil); err != nil || len(runs) != 0 {
		t.Fatalf("RunsLive of no jobs = %+v, %v; want none", runs, err)
	}
}

// testMisfireLongDowntime takes schedules through days of downtime: the
// counts of runs and missed rows are exact, and the schedule carries on
// afterwards instead of getting stuck behind its backlog.
func testMisfireLongDowntime(t *testing.T, f *fixture) {
	// Every minute, down for three days: run_once runs the latest slot and
	// records the other 4,319 missed.
	once := f.create(db.JobCreateParams{Type: "once", Schedule: "* * * * *"})
	f.Clock.Set(Start.Add(72*time.Hour + 30*time.Second))
	c := f.claimLease("w", 5, time.Hour)
	if len(c) != 1 {
		t.Fatalf("claimed %d after three days down, want 1", len(c))
	}
	wantTime(t, "catch-up slot", c[0].Job.Slot, Start.Add(72*time.Hour))
	after := f.finish(c[0], db.OutcomeSucceeded, false)
	wantTime(t, "next slot", after.Slot, Start.Add(72*time.Hour+time.Minute))
	counts := f.outcomes(once.ID)
	if counts["succeeded"] != 1 || counts["missed:downtime"] != 4319 || after.MissedSlots != 4319 {
		t.Fatalf("after three days: %v, missedSlots %d; want 1 run and 4319 missed", counts, after.MissedSlots)
	}
	// It keeps firing each minute afterwards.
	for i := 1; i <= 3; i++ {
		f.Clock.Set(Start.Add(72*time.Hour + time.Duration(i)*time.Minute))
		got := f.claimLease("w", 5, time.Hour)
		if len(got) != 1 {
			t.Fatalf("minute %d after the catch-up: claimed %d", i, len(got))
		}
		f.finish(got[0], db.OutcomeSucceeded, false)
	}

	// Hourly with run_all, down for two days: the 24 slots inside the
	// catch-up window run one by one, oldest first; the 24 before it are
	// missed.
	f.Clock.Set(Start)
	all := f.create(db.JobCreateParams{Type: "all", Schedule: "0 * * * *", Misfire: db.MisfireRunAll})
	f.Clock.Set(Start.Add(48*time.Hour + 30*time.Minute))
	first := Start.Add(48*time.Hour + 30*time.Minute - 24*time.Hour).Truncate(time.Hour).Add(time.Hour)
	for i := range 24 {
		got, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"all"}, Max: 5, Lease: time.Hour})
		if err != nil || len(got) != 1 {
			t.Fatalf("replay %d: claimed %d, %v", i, len(got), err)
		}
		wantTime(t, "replayed slot", got[0].Job.Slot, first.Add(time.Duration(i)*time.Hour))
		f.finish(got[0], db.OutcomeSucceeded, false)
	}
	if got, _ := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"all"}, Max: 5}); len(got) != 0 {
		t.Fatalf("a slot ran after the replay caught up: %+v", got[0].Job.Slot)
	}
	counts = f.outcomes(all.ID)
	if counts["succeeded"] != 24 || counts["missed:downtime"] != 24 {
		t.Fatalf("run_all after two days: %v; want 24 runs and 24 missed", counts)
	}
	wantTime(t, "next slot after the replay", f.get(all.ID).Slot, Start.Add(49*time.Hour))
}

// testRunFinishReturnsStoredJob checks that the job RunFinish returns is the
// job as stored, for every way a run can end.
func testRunFinishReturnsStoredJob(t *testing.T, f *fixture) {
	type tc struct {
		p         db.JobCreateParams
		outcome   db.Outcome
		retryable bool
	}
	for _, c := range []tc{
		{db.JobCreateParams{}, db.OutcomeSucceeded, false},
		{db.JobCreateParams{MaxAttempts: 3}, db.OutcomeFailed, true},
		{db.JobCreateParams{MaxAttempts: 1}, db.OutcomeTimedOut, true},
		{db.JobCreateParams{}, db.OutcomeCancelled, false},
		{db.JobCreateParams{}, db.OutcomeReleased, false},
		{db.JobCreateParams{Schedule: "*/5 * * * *", Jitter: time.Minute}, db.OutcomeSucceeded, false},
		{db.JobCreateParams{Schedule: "*/5 * * * *", MaxAttempts: 1}, db.OutcomeFailed, true},
	} {
		c.p.Type = string(c.outcome) + c.p.Schedule // claimed below by its own type
		j := f.create(c.p)
		f.Clock.Set(j.NextRunAt.Add(1500 * time.Microsecond))
		cls, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{c.p.Type}, Max: 1, Lease: time.Hour})
		if err != nil || len(cls) != 1 {
			t.Fatalf("claim %s: %d, %v", c.p.Type, len(cls), err)
		}
		cl := cls[0]
		f.Clock.Advance(12*time.Minute + 1234*time.Microsecond) // past two slots of the schedule
		got, err := f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: j.ID, Generation: cl.Job.LeaseGeneration,
			Outcome: c.outcome, Retryable: c.retryable, Error: errorFor(c.outcome)})
		if err != nil {
			t.Fatalf("%s of %+v: %v", c.outcome, c.p, err)
		}
		gotJSON, _ := json.Marshal(got)
		storedJSON, _ := json.Marshal(f.get(j.ID))
		if string(gotJSON) != string(storedJSON) {
			t.Fatalf("%s: RunFinish returned\n%s\nbut the store holds\n%s", c.outcome, gotJSON, storedJSON)
		}
	}
}

// testJobCreateReturnsStoredJob checks that the job JobCreate returns is the
// job as stored, for one-off and recurring jobs with every field set.
func testJobCreateReturnsStoredJob(t *testing.T, f *fixture) {
	f.Clock.Set(Start.Add(1234567 * time.Nanosecond))
	for _, p := range []db.JobCreateParams{
		{},
		{Type: "http", Payload: json.RawMessage(`{"url":"http://x","n":[1,2]}`), RunAt: Start.Add(90*time.Minute + 1500*time.Microsecond),
			MaxAttempts: 7, Timeout: 90 * time.Second, Backoff: 2500 * time.Microsecond, IdempotencyKey: "create-returns"},
		{Schedule: "*/5 * * * *", Timezone: "Europe/London", Jitter: 90 * time.Second, Overlap: db.OverlapQueueOne,
			Misfire: db.MisfireRunAll, ExpectSuccessWithin: 26 * time.Hour},
		{Schedule: "@every 90s"},
	} {
		got := f.create(p)
		gotJSON, _ := json.Marshal(got)
		storedJSON, _ := json.Marshal(f.get(got.ID))
		if string(gotJSON) != string(storedJSON) {
			t.Fatalf("JobCreate(%+v) returned\n%s\nbut the store holds\n%s", p, gotJSON, storedJSON)
		}
	}
	p := db.JobCreateParams{Type: "http", Payload: json.RawMessage(`{"url":"http://x","n":[1,2]}`), RunAt: Start.Add(90*time.Minute + 1500*time.Microsecond),
		MaxAttempts: 7, Timeout: 90 * time.Second, Backoff: 2500 * time.Microsecond, IdempotencyKey: "create-returns"}
	again, created, err := f.Store.JobCreate(f.ctx, p)
	if err != nil || created || again.Type != "http" {
		t.Fatalf("repeat of a request: %+v created=%v err=%v", again, created, err)
	}
	againJSON, _ := json.Marshal(again)
	storedJSON, _ := json.Marshal(f.get(again.ID))
	if string(againJSON) != string(storedJSON) {
		t.Fatalf("a repeated request returned\n%s\nbut the store holds\n%s", againJSON, storedJSON)
	}
}
