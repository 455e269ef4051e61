package dbtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

func testPrune(t *testing.T, f *fixture) {
	p := f.Store
	done := f.create(db.JobCreateParams{Notify: &db.Notify{Ping: "https://hc.example/done"}}) // its runs write events
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	dead := f.create(db.JobCreateParams{MaxAttempts: 1})
	f.finish(f.claimOne("w"), db.OutcomeFailed, false)
	waiting := f.create(db.JobCreateParams{RunAt: Start.Add(48 * time.Hour)})
	rec := f.create(db.JobCreateParams{Schedule: "0 * * * *"})
	f.Clock.Set(Start.Add(time.Hour))
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	// Created and done a second before the prune's instant; its events are
	// the newest, and go with it.
	justBefore := f.create(db.JobCreateParams{Notify: &db.Notify{Ping: "https://hc.example/just"}})
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)

	window := db.RunActivityParams{From: Start.Add(-time.Minute), To: Start.Add(2 * time.Hour)}
	if act, err := p.RunActivity(f.ctx, window); err != nil || act.Finished != 4 {
		t.Fatalf("finished runs before the prune = %d, %v; want 4", act.Finished, err)
	}
	pinged := func(events []db.Event) bool {
		return slices.ContainsFunc(events, func(e db.Event) bool { return e.JobID == done.ID })
	}
	last := func(events []db.Event) bool {
		return len(events) > 0 && events[len(events)-1].JobID == justBefore.ID
	}
	eventsBefore := f.eventsAfter(0, nil, func(e []db.Event) bool { return pinged(e) && last(e) })
	if !pinged(eventsBefore) || !last(eventsBefore) {
		t.Fatalf("events before the prune = %+v; want the pinged jobs', the last one's last", eventsBefore)
	}
	before := db.PruneParams{Before: Start.Add(time.Hour + time.Second), Limit: 10}
	got, err := p.Prune(f.ctx, before)
	if err != nil || got != (db.Pruned{Jobs: 2, Runs: 1}) {
		t.Fatalf("Prune = %+v, %v; want the two done jobs and the schedule's finished run", got, err)
	}
	for _, id := range []string{done.ID, justBefore.ID} {
		if _, err := f.Store.JobGet(f.ctx, id); !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("pruned job: JobGet = %v, want ErrNotFound", err)
		}
	}
	for _, id := range []string{dead.ID, waiting.ID, rec.ID} {
		f.get(id)
	}
	if runs := f.runs(rec.ID); len(runs) != 0 {
		t.Fatalf("runs of the schedule after the prune = %+v", runs)
	}
	// A pruned job leaves no run or event behind: of the window's four
	// finished runs, only the dead job's is left.
	if act, err := p.RunActivity(f.ctx, window); err != nil || act.Finished != 1 {
		t.Fatalf("finished runs after the prune = %d, %v; want 1, the dead job's", act.Finished, err)
	}
	for _, e := range f.events() {
		if e.JobID == done.ID {
			t.Fatalf("event %+v of the pruned job is left", e)
		}
	}
	if again, err := p.Prune(f.ctx, before); err != nil || again != (db.Pruned{}) {
		t.Fatalf("second Prune = %+v, %v; want nothing", again, err)
	}

	// An event written after the prune has an id above those before it,
	// pruned ones included: the notifier reads the timeline after the last
	// id it read, and would pass over an event given an old id.
	newest := eventsBefore[len(eventsBefore)-1].ID
	after := f.create(db.JobCreateParams{Notify: &db.Notify{Ping: "https://hc.example/after"}})
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	ofAfter := func(events []db.Event) bool {
		return slices.ContainsFunc(events, func(e db.Event) bool { return e.JobID == after.ID })
	}
	if events := f.eventsAfter(newest, nil, ofAfter); !ofAfter(events) {
		t.Fatalf("events after id %d, the newest before the prune: %+v; want the new job's (an id given again?)", newest, events)
	}
}

// testPruneLongHistory: a schedule's runs that finished before the prune's
// instant go, and those after it stay, when runs that started well after
// the instant follow them (a prune reads the runs only up to the first run
// it finds that started an hour after the instant).
func testPruneLongHistory(t *testing.T, f *fixture) {
	rec := f.create(db.JobCreateParams{Schedule: "0 * * * *"})
	for h := 1; h <= 6; h++ {
		f.Clock.Set(Start.Add(time.Duration(h) * time.Hour))
		f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	}
	before := db.PruneParams{Before: Start.Add(2*time.Hour + time.Second), Limit: 10}
	if got, err := f.Store.Prune(f.ctx, before); err != nil || got != (db.Pruned{Runs: 2}) {
		t.Fatalf("Prune = %+v, %v; want the runs of the first two slots", got, err)
	}
	var slots []time.Time
	for _, r := range f.runs(rec.ID) {
		slots = append(slots, db.Deref(r.Slot))
	}
	want := []time.Time{Start.Add(6 * time.Hour), Start.Add(5 * time.Hour), Start.Add(4 * time.Hour), Start.Add(3 * time.Hour)}
	if !slices.EqualFunc(slots, want, time.Time.Equal) {
		t.Fatalf("slots of the runs left = %v, want %v", slots, want)
	}
	if again, err := f.Store.Prune(f.ctx, before); err != nil || again != (db.Pruned{}) {
		t.Fatalf("second Prune = %+v, %v; want nothing", again, err)
	}
}

// testRunIDsNeverReused: a run's id is never given again, also once the
// newest runs were pruned: an id kept elsewhere (a run's link, an event's
// runId, a page's cursor) names its own run or none, never a later one.
func testRunIDsNeverReused(t *testing.T, f *fixture) {
	f.create(db.JobCreateParams{})
	newest := f.claimOne("w")
	f.finish(newest, db.OutcomeSucceeded, false)
	f.Clock.Advance(time.Hour)
	if got, err := f.Store.Prune(f.ctx, db.PruneParams{Before: f.Clock.Now(), Limit: 10}); err != nil || got != (db.Pruned{Jobs: 1}) {
		t.Fatalf("Prune = %+v, %v; want the done job, with its run", got, err)
	}
	f.create(db.JobCreateParams{})
	if c := f.claimOne("w"); c.RunID <= newest.RunID {
		t.Fatalf("run id after the newest run (%d) was pruned = %d; want above it", newest.RunID, c.RunID)
	}
}

// events reads the events of every job that EventsAfter has to give.
func (f *fixture) events() []db.Event {
	f.Helper()
	return f.eventsAfter(0, nil, func([]db.Event) bool { return true })
}

// eventsAfter reads EventsAfter(after, kinds) until ok says the answer is
// complete, for at most ten seconds, and returns the last answer. The
// outbox may hold back an event its store has committed while an older
// transaction is still running (on PostgreSQL, any of the server's).
func (f *fixture) eventsAfter(after int64, kinds []string, ok func([]db.Event) bool) []db.Event {
	f.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		events, err := f.Store.EventsAfter(f.ctx, after, kinds, 1000)
		if err != nil {
			f.Fatalf("EventsAfter: %v", err)
		}
		if ok(events) || time.Now().After(deadline) {
			return events
		}
	}
}

func testJobCreateBatch(t *testing.T, f *fixture) {
	b := f.Store
	jobs, err := b.JobCreateBatch(f.ctx, []db.JobCreateParams{
		{Type: "a", IdempotencyKey: "k1"}, {Type: "b"}, {Type: "a", IdempotencyKey: "k1"},
	})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("JobCreateBatch = %d jobs, %v; want 3", len(jobs), err)
	}
	if jobs[0].Type != "a" || jobs[1].Type != "b" || jobs[2].ID != jobs[0].ID {
		t.Fatalf("batch = %+v; want a, b, then a again for the repeated request", jobs)
	}
	// A key already stored: its job comes back, the others are created.
	again, err := b.JobCreateBatch(f.ctx, []db.JobCreateParams{
		{Type: "d"}, {Type: "a", IdempotencyKey: "k1"}, {Type: "e", IdempotencyKey: "k2"},
	})
	if err != nil || len(again) != 3 {
		t.Fatalf("JobCreateBatch with a stored key = %d jobs, %v; want 3", len(again), err)
	}
	if again[1].ID != jobs[0].ID || again[0].Type != "d" || again[2].Type != "e" || again[0].ID == jobs[0].ID || again[2].ID == jobs[0].ID {
		t.Fatalf("batch with a stored key = %+v; want d, the stored job of k1, then e", again)
	}
	for _, j := range again {
		if got := f.get(j.ID); !reflect.DeepEqual(got, j) {
			t.Errorf("job as stored:\n%+v\nas the batch returned it:\n%+v", got, j)
		}
	}
	var reused *db.KeyReusedError
	if _, err := b.JobCreateBatch(f.ctx, []db.JobCreateParams{{Type: "z"}, {Type: "c", IdempotencyKey: "k1"}}); !errors.As(err, &reused) {
		t.Fatalf("a batch reusing a key for another request: %v; want a KeyReusedError", err)
	}
	if list, _, err := f.Store.JobList(f.ctx, db.JobListParams{Type: "z"}); err != nil || len(list) != 0 {
		t.Fatalf("jobs of a refused batch = %+v, %v; want none", list, err)
	}
	_, err = b.JobCreateBatch(f.ctx, []db.JobCreateParams{{Type: "x"}, {Type: "y", Schedule: "not a schedule"}})
	var ve *db.ValidationError
	if !errors.As(err, &ve) || ve.Field != "jobs[1].schedule" {
		t.Fatalf("batch with a bad element: %v; want a ValidationError on jobs[1].schedule", err)
	}
	if list, _, err := f.Store.JobList(f.ctx, db.JobListParams{Type: "x"}); err != nil || len(list) != 0 {
		t.Fatalf("jobs of a refused batch = %+v, %v; want none", list, err)
	}
	// A larger batch without keys (a store may write it another way) keeps
	// every setting of every job.
	varied := []db.JobCreateParams{
		{Type: "plain"},
		{Type: "p", Payload: json.RawMessage(`{"b": 2,  "a": [1]}`), RunAt: Start.Add(time.Hour), MaxAttempts: 7,
			Timeout: time.Minute, Backoff: 3 * time.Second, Jitter: time.Second},
		{Type: "s", Schedule: "*/5 * * * *", Timezone: "Europe/Paris", Overlap: db.OverlapQueueOne, Misfire: db.MisfireSkip,
			ExpectSuccessWithin: time.Hour, Name: "batch-schedule", Notify: &db.Notify{Ping: "https://hc.example/b"}},
	}
	for len(varied) < 12 {
		varied = append(varied, db.JobCreateParams{Type: "filler", Payload: json.RawMessage(`[]`)})
	}
	created, err := b.JobCreateBatch(f.ctx, varied)
	if err != nil || len(created) != len(varied) {
		t.Fatalf("JobCreateBatch of %d without keys = %d jobs, %v", len(varied), len(created), err)
	}
	for _, j := range created {
		if got := f.get(j.ID); !reflect.DeepEqual(got, j) {
			t.Errorf("job as stored:\n%+v\nas the batch returned it:\n%+v", got, j)
		}
	}
	if p := f.get(created[1].ID); string(p.Payload) != `{"b": 2,  "a": [1]}` || p.MaxAttempts != 7 || p.Timeout != db.Duration(time.Minute) {
		t.Errorf("stored job = %+v; want the payload byte for byte, 7 attempts, a minute's timeout", p)
	}
	if s := f.get(created[2].ID); s.Schedule != "*/5 * * * *" || s.Timezone != "Europe/Paris" || s.Overlap != db.OverlapQueueOne ||
		s.Misfire != db.MisfireSkip || s.Name != "batch-schedule" || s.Notify == nil || s.Notify.Ping != "https://hc.example/b" {
		t.Errorf("stored schedule = %+v; want its settings", s)
	}
	if _, err := b.JobCreateBatch(f.ctx, make([]db.JobCreateParams, db.MaxBatch+1)); !errors.Is(err, db.ErrInvalid) {
		t.Fatalf("batch of %d: %v; want ErrInvalid", db.MaxBatch+1, err)
	}
}

func testReady(t *testing.T, f *fixture) {
	if err := f.Store.Ready(f.ctx); err != nil {
		t.Fatalf("Ready on a fresh store = %v", err)
	}
}

// testStats reads the queue's gauges: every state counted (zero for none),
// running jobs by type, the ready jobs due within a minute and the oldest
// of those already due.
func testStats(t *testing.T, f *fixture) {
	f.create(db.JobCreateParams{Type: "r"})
	running := f.claimOne("w")
	f.create(db.JobCreateParams{})
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	overdue := f.create(db.JobCreateParams{RunAt: Start.Add(10 * time.Second)})
	// Due within the minute but not yet: counted, and not the oldest due.
	if st, err := f.Store.Stats(f.ctx, Start); err != nil || st.DueNextMinute != 1 || !st.ReadyOldestDue.IsZero() {
		t.Errorf("before any is due: due within a minute %d, oldest due %v, %v; want 1 and none", st.DueNextMinute, st.ReadyOldestDue, err)
	}
	f.Clock.Advance(time.Minute)
	f.create(db.JobCreateParams{RunAt: f.Clock.Now().Add(30 * time.Second)})
	f.create(db.JobCreateParams{RunAt: f.Clock.Now().Add(2 * time.Hour)})
	cancelled := f.create(db.JobCreateParams{RunAt: f.Clock.Now().Add(2 * time.Hour)})
	if _, err := f.Store.JobCancel(f.ctx, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	st, err := f.Store.Stats(f.ctx, f.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := map[db.JobState]int64{db.StateReady: 3, db.StateRunning: 1, db.StateDone: 1, db.StateDead: 0,
		db.StateCancelled: 1, db.StatePaused: 0}
	if !reflect.DeepEqual(st.JobsByState, want) {
		t.Errorf("jobs by state %v, want %v", st.JobsByState, want)
	}
	if want := map[string]int64{running.Job.Type: 1}; !reflect.DeepEqual(st.RunningByType, want) {
		t.Errorf("running by type %v, want %v", st.RunningByType, want)
	}
	if st.DueNextMinute != 2 || !st.ReadyOldestDue.Equal(*overdue.NextRunAt) {
		t.Errorf("due within a minute %d, oldest due %v; want 2 and %v", st.DueNextMinute, st.ReadyOldestDue, *overdue.NextRunAt)
	}
	if st.MissedSlots != 0 || st.QuietSchedules != 0 {
		t.Errorf("missed slots %d, quiet schedules %d; want 0 and 0", st.MissedSlots, st.QuietSchedules)
	}
}

// testStatsSchedules: the schedules' figures of Stats, which the stores
// read from partial indexes (the missed slots from jobs_recurring alone,
// the failing and quiet ones through jobs_failing and jobs_quiet), are
// what the jobs themselves say, summed over all of them as Stats once
// read them: on one-off jobs and schedules well, with missed slots,
// failing, quiet, cancelled while failing or quiet, and paused while quiet.
func testStatsSchedules(t *testing.T, f *fixture) {
	f.create(db.JobCreateParams{Type: "once"})
	f.create(db.JobCreateParams{Type: "well", Schedule: "0 * * * *"})
	f.create(db.JobCreateParams{Type: "missed", Schedule: "0 * * * *", Misfire: db.MisfireSkip})
	f.create(db.JobCreateParams{Type: "failing", Schedule: "0 * * * *", MaxAttempts: 1})
	cancelledFailing := f.create(db.JobCreateParams{Type: "failing", Schedule: "0 * * * *", MaxAttempts: 1})
	f.Clock.Set(Start.Add(5*time.Hour + 30*time.Minute))
	if c, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"missed"}, Max: 1}); err != nil || len(c) != 0 {
		t.Fatalf("claim of the schedule that skips its missed slots: %d, %v; want none", len(c), err)
	}
	c, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"failing"}, Max: 2, Lease: time.Minute})
	if err != nil || len(c) != 2 {
		t.Fatalf("claim of the failing schedules: %d, %v", len(c), err)
	}
	for _, claim := range c {
		f.finish(claim, db.OutcomeFailed, false)
	}
	if _, err := f.Store.JobCancel(f.ctx, cancelledFailing.ID); err != nil {
		t.Fatal(err)
	}
	f.goneQuiet("quiet")
	paused := f.goneQuiet("quiet-paused")
	if _, err := f.Store.JobPause(f.ctx, paused.ID); err != nil {
		t.Fatal(err)
	}
	cancelledQuiet := f.goneQuiet("quiet-cancelled")
	if _, err := f.Store.JobCancel(f.ctx, cancelledQuiet.ID); err != nil {
		t.Fatal(err)
	}
	jobs, next, err := f.Store.JobList(f.ctx, db.JobListParams{Limit: 100})
	if err != nil || next != "" {
		t.Fatalf("list every job: next %q, %v", next, err)
	}
	var want db.Stats
	for _, j := range jobs {
		if !j.Recurring() {
			continue
		}
		want.MissedSlots += j.MissedSlots
		if j.State == db.StateCancelled {
			continue
		}
		if j.FailingSince != nil {
			want.FailingSchedules++
		}
		if j.ExpectSuccessWithin > 0 && j.QuietSince != nil {
			want.QuietSchedules++
		}
	}
	if want.MissedSlots == 0 || want.FailingSchedules != 1 || want.QuietSchedules != 1 {
		t.Fatalf("the jobs say %d missed slots, %d failing, %d quiet; the test wants some, 1 and 1", want.MissedSlots, want.FailingSchedules, want.QuietSchedules)
	}
	st, err := f.Store.Stats(f.ctx, f.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.MissedSlots != want.MissedSlots || st.FailingSchedules != want.FailingSchedules || st.QuietSchedules != want.QuietSchedules {
		t.Errorf("stats: %d missed slots, %d failing, %d quiet; the jobs say %d, %d and %d",
			st.MissedSlots, st.FailingSchedules, st.QuietSchedules, want.MissedSlots, want.FailingSchedules, want.QuietSchedules)
	}
}

// testJobCreateBatchCrossed: two batches holding the same idempotency keys,
// or the same names, in opposite orders, at the same time: with keys, each
// creates them or answers the other's jobs; with names, one creates them and
// the other is refused for a name. Neither fails otherwise (PostgreSQL
// answered one "deadlock detected" when the batches took the keys' locks in
// their own orders).
func testJobCreateBatchCrossed(t *testing.T, f *fixture) {
	const n = 50
	for round := range 5 {
		for _, named := range []bool{false, true} {
			batch := func(reverse bool) []db.JobCreateParams {
				ps := make([]db.JobCreateParams, n)
				for i := range ps {
					k := i
					if reverse {
						k = n - 1 - i
					}
					if named {
						ps[i] = db.JobCreateParams{Type: "noop", Name: fmt.Sprintf("r%d-n%d", round, k)}
					} else {
						ps[i] = db.JobCreateParams{Type: "noop", IdempotencyKey: fmt.Sprintf("r%d-k%d", round, k)}
					}
				}
				return ps
			}
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for w := range 2 {
				wg.Go(func() { _, errs[w] = f.Store.JobCreateBatch(f.ctx, batch(w == 1)) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil && !(named && errors.Is(err, db.ErrConflict)) {
					t.Fatalf("round %d, named %t: batch: %v", round, named, err)
				}
			}
		}
	}
}

// testActivityLateness: the lateness of RunActivity is a first attempt's
// start after its slot fell due. A backfill runs slots of the past on
// purpose, and is left out: counted, its hours-old slots would fill the
// dashboard's lateness chart.
func testActivityLateness(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Type: "report", Schedule: "0 * * * *"})
	f.Clock.Set(Start.Add(time.Hour + 2*time.Second))
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	b, err := f.Store.JobBackfill(f.ctx, db.JobBackfillParams{ID: j.ID, From: Start.Add(-2 * time.Hour), To: Start.Add(-time.Hour)})
	if err != nil || b.Created != 2 {
		t.Fatalf("backfill = %+v, %v; want 2 jobs", b, err)
	}
	for _, c := range f.claim("w", 2) {
		f.finish(c, db.OutcomeSucceeded, false)
	}
	act, err := f.Store.RunActivity(f.ctx, db.RunActivityParams{From: Start, To: Start.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if act.Finished != 3 || !slices.Equal(act.Lateness, []time.Duration{2 * time.Second}) {
		t.Fatalf("activity = %+v; want 3 finished runs and one lateness of 2s, the schedule's (not its backfills')", act)
	}
}
