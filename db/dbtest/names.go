package dbtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

// testKeyAfterCancel checks that a cancelled job's idempotency key can be
// used again, by any request.
func testKeyAfterCancel(t *testing.T, f *fixture) {
	first := f.create(db.JobCreateParams{IdempotencyKey: "k", RunAt: Start.Add(time.Hour)})
	if _, err := f.Store.JobCancel(f.ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	second := f.create(db.JobCreateParams{Type: "other", IdempotencyKey: "k"})
	if second.ID == first.ID {
		t.Fatalf("a create with a cancelled job's key returned the cancelled job")
	}
	if again, created, err := f.Store.JobCreate(f.ctx, db.JobCreateParams{Type: "other", IdempotencyKey: "k"}); err != nil || created || again.ID != second.ID {
		t.Fatalf("the same request again: %s created=%v %v; want job %s", again.ID, created, err, second.ID)
	}
}

// testNames checks names: unique among jobs not cancelled, accepted
// wherever an id is, listed by name, free again once cancelled.
func testNames(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Name: "nightly-backup", Schedule: "0 3 * * *"})
	if j.Name != "nightly-backup" || f.get(j.ID).Name != "nightly-backup" {
		t.Fatalf("created job's name = %q, stored %q", j.Name, f.get(j.ID).Name)
	}
	var conflict *db.ConflictError
	if _, _, err := f.Store.JobCreate(f.ctx, db.JobCreateParams{Type: "noop", Name: "nightly-backup"}); !errors.As(err, &conflict) {
		t.Fatalf("a second job of the same name: %v; want a ConflictError", err)
	}
	if _, err := f.Store.JobCreateBatch(f.ctx, []db.JobCreateParams{{Type: "a", Name: "twin"}, {Type: "b", Name: "twin"}}); !errors.As(err, &conflict) {
		t.Fatalf("a batch naming two jobs alike: %v; want a ConflictError", err)
	}
	// Larger batches (a store may write them another way) are refused
	// whole too: a name held by a stored job, or by two of the batch.
	for _, taken := range []string{"nightly-backup", "twin"} {
		batch := []db.JobCreateParams{{Type: "batch-named", Name: "twin"}}
		for len(batch) < 11 {
			batch = append(batch, db.JobCreateParams{Type: "batch-named"})
		}
		batch = append(batch, db.JobCreateParams{Type: "batch-named", Name: taken})
		if _, err := f.Store.JobCreateBatch(f.ctx, batch); !errors.As(err, &conflict) {
			t.Fatalf("a batch of %d naming a job %q: %v; want a ConflictError", len(batch), taken, err)
		}
		if list, _, err := f.Store.JobList(f.ctx, db.JobListParams{Type: "batch-named"}); err != nil || len(list) != 0 {
			t.Fatalf("jobs of a refused batch = %d, %v; want none", len(list), err)
		}
	}
	if got := f.get("nightly-backup"); got.ID != j.ID {
		t.Fatalf("JobGet by name = %s, want %s", got.ID, j.ID)
	}
	if list, _, err := f.Store.JobList(f.ctx, db.JobListParams{Name: "nightly-backup"}); err != nil || len(list) != 1 || list[0].ID != j.ID {
		t.Fatalf("JobList by name = %+v, %v", list, err)
	}
	paused, err := f.Store.JobPause(f.ctx, "nightly-backup")
	if err != nil || paused.ID != j.ID || paused.State != db.StatePaused {
		t.Fatalf("pause by name = %s %s, %v", paused.ID, paused.State, err)
	}
	if _, _, err := f.Store.RunList(f.ctx, db.RunListParams{JobID: "nightly-backup"}); err != nil {
		t.Fatalf("runs by name: %v", err)
	}
	if _, err := f.Store.JobCancel(f.ctx, "nightly-backup"); err != nil {
		t.Fatal(err)
	}
	if got := f.get("nightly-backup"); got.ID != j.ID || got.State != db.StateCancelled {
		t.Fatalf("a cancelled job is still found by its name: %s %s", got.ID, got.State)
	}
	// Controls name it too: a pause answers that it is cancelled, not that
	// there is no such job.
	if _, err := f.Store.JobPause(f.ctx, "nightly-backup"); !errors.As(err, &conflict) || conflict.State != db.StateCancelled {
		t.Fatalf("pause by the name of a cancelled job: %v, want a conflict naming its state", err)
	}
	next := f.create(db.JobCreateParams{Name: "nightly-backup", Schedule: "0 4 * * *"})
	if got := f.get("nightly-backup"); got.ID != next.ID {
		t.Fatalf("by name after a new job took it: %s, want the new %s", got.ID, next.ID)
	}
	if _, err := f.Store.JobGet(f.ctx, "no-such-name"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("JobGet of an unknown name: %v, want ErrNotFound", err)
	}
	// A done job keeps its name, and cannot be cancelled: the conflict
	// says so, and to rename it.
	once := f.create(db.JobCreateParams{Name: "deploy-notify"})
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	_, _, err = f.Store.JobCreate(f.ctx, db.JobCreateParams{Type: "noop", Name: "deploy-notify"})
	if !errors.As(err, &conflict) || conflict.State != db.StateDone || !strings.Contains(err.Error(), "keeps it until it is pruned") ||
		!strings.Contains(err.Error(), "PATCH /jobs/"+once.ID+" with another name") {
		t.Fatalf("a name a done job holds: %v; want a conflict saying to rename that job", err)
	}
}

// testRedefine checks a change of definition: the pending slot follows the
// new schedule, a running firing ends as it began and the next slot comes
// from the new schedule, the change is on the timeline, a stale IfSpec is a
// conflict, and what cannot change is refused.
func testRedefine(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Name: "report", Schedule: "0 * * * *", Payload: json.RawMessage(`{"v":1}`)})
	wantTime(t, "first slot", j.Slot, Start.Add(time.Hour))
	spec := db.SpecOf(j)
	spec.Schedule, spec.Payload = "*/30 * * * *", json.RawMessage(`{"v":2}`)
	got, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: "report", Spec: spec, IfSpec: db.SpecOf(j).Fingerprint(), Actor: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "slot on the new schedule", got.Slot, Start.Add(30*time.Minute))
	if stored := f.get(j.ID); string(stored.Payload) != `{"v":2}` || stored.Schedule != "*/30 * * * *" {
		t.Fatalf("stored after the change: %s %q", stored.Payload, stored.Schedule)
	}
	events, _, err := f.Store.EventList(f.ctx, db.EventListParams{JobID: "report"})
	if err != nil || len(events) != 1 || events[0].Kind != db.EventChanged || events[0].Actor != "ann" {
		t.Fatalf("events = %+v, %v; want one change by ann", events, err)
	}
	var changes db.Changes
	if err := json.Unmarshal(events[0].Detail, &changes); err != nil || len(changes) != 2 || changes["schedule"].To != "*/30 * * * *" {
		t.Fatalf("changes = %s (%v); want schedule and payload", events[0].Detail, err)
	}
	// The same definition again changes nothing.
	if _, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	if events, _, _ := f.Store.EventList(f.ctx, db.EventListParams{JobID: j.ID}); len(events) != 1 {
		t.Fatalf("a change to the same definition was recorded: %d events", len(events))
	}
	// Changed by someone else meanwhile.
	var conflict *db.ConflictError
	if _, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: spec, IfSpec: db.SpecOf(j).Fingerprint()}); !errors.As(err, &conflict) {
		t.Fatalf("a change against an old definition: %v; want a ConflictError", err)
	}
	for field, bad := range map[string]func(*db.JobCreateParams){
		"type":     func(p *db.JobCreateParams) { p.Type = "other" },
		"schedule": func(p *db.JobCreateParams) { p.Schedule = "" },
	} {
		p := spec
		bad(&p)
		var ve *db.ValidationError
		if _, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: p}); !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("a change of %s: %v; want a ValidationError on it", field, err)
		}
	}
	// A running firing ends as it began; the next slot is the new
	// schedule's after it.
	f.Clock.Set(Start.Add(30 * time.Minute))
	c := f.claimOne("w")
	hourly := spec
	hourly.Schedule = "15 * * * *"
	if _, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: j.ID, Spec: hourly}); err != nil {
		t.Fatal(err)
	}
	wantTime(t, "slot of the running firing", f.get(j.ID).Slot, Start.Add(30*time.Minute))
	after := f.finish(c, db.OutcomeSucceeded, false)
	wantTime(t, "next slot on the new schedule", after.Slot, Start.Add(75*time.Minute))
}

// testPut checks create-or-replace by name, and its dry run.
func testPut(t *testing.T, f *fixture) {
	p := db.JobCreateParams{Name: "certs", Type: "exec", Schedule: "0 4 * * *", Payload: json.RawMessage(`{"command":["renew"]}`)}
	put := func(spec db.JobCreateParams, dry bool) db.JobPutResult {
		t.Helper()
		r, err := f.Store.JobPut(f.ctx, db.JobPutParams{Spec: spec, Actor: "ci", DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := put(p, true); !r.Created || r.Job.Name != "certs" {
		t.Fatalf("dry run of a first put: %+v", r)
	}
	if _, err := f.Store.JobGet(f.ctx, "certs"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a dry run created the job: %v", err)
	}
	first := put(p, false)
	if !first.Created || !first.Changed() || first.Job.Name != "certs" {
		t.Fatalf("first put: %+v", first)
	}
	if again := put(p, false); again.Created || again.Changed() || again.Job.ID != first.Job.ID {
		t.Fatalf("the same put again: %+v; want job %s unchanged", again, first.Job.ID)
	}
	p.MaxAttempts = 9
	if dry := put(p, true); dry.Created || dry.Changes["maxAttempts"].To != 9 || len(dry.Changes) != 1 {
		t.Fatalf("dry run of a change: %+v; want maxAttempts to 9", dry)
	}
	if f.get("certs").MaxAttempts == 9 {
		t.Fatalf("a dry run changed the job")
	}
	changed := put(p, false)
	if changed.Created || !changed.Changed() || changed.Job.ID != first.Job.ID || changed.Job.MaxAttempts != 9 {
		t.Fatalf("a changed put: %+v", changed)
	}
	if _, err := f.Store.JobPut(f.ctx, db.JobPutParams{Spec: db.JobCreateParams{Type: "noop"}}); !errors.Is(err, db.ErrInvalid) {
		t.Fatalf("put without a name: %v, want ErrInvalid", err)
	}
}

// testPutRace puts each of a few names from several goroutines at once,
// all with one definition, as `sked apply` run against several nodes at
// once does: every put must succeed, one creating the job, the others
// finding it as it is. (On PostgreSQL the losers once found the name free,
// then taken by the winner's insert, and answered a conflict.)
func testPutRace(t *testing.T, f *fixture) {
	const names, puts = 20, 6
	for n := range names {
		p := db.JobCreateParams{Name: fmt.Sprintf("race-%d", n), Type: "exec", Schedule: "0 4 * * *", Payload: json.RawMessage(`{"command":["renew"]}`)}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created int
			ids     = map[string]bool{}
		)
		for range puts {
			wg.Go(func() {
				r, err := f.Store.JobPut(f.ctx, db.JobPutParams{Spec: p, Actor: "ci"})
				if err != nil {
					t.Errorf("put %s from one of %d at once: %v", p.Name, puts, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				ids[r.Job.ID] = true
				if r.Created {
					created++
				}
			})
		}
		wg.Wait()
		if created > 1 || len(ids) > 1 {
			t.Errorf("%d puts of %s at once: %d created, jobs %v; want one job", puts, p.Name, created, ids)
		}
	}
}

// testTimeline checks the events a schedule's runs add: a firing that gave
// up marks the schedule failing, the next success recovers it, and a job
// with a ping URL records each start and success.
func testTimeline(t *testing.T, f *fixture) {
	j := f.create(db.JobCreateParams{Schedule: "0 * * * *", MaxAttempts: 1, Notify: &db.Notify{Ping: "https://hc.example/abc"}})
	f.Clock.Set(Start.Add(time.Hour))
	failed := f.finish(f.claimOne("w"), db.OutcomeFailed, false)
	if failed.FailingSince == nil {
		t.Fatalf("a firing gave up, but the schedule is not marked failing")
	}
	failing := func() int64 {
		st, err := f.Store.Stats(f.ctx, f.Store.Now())
		if err != nil {
			t.Fatal(err)
		}
		return st.FailingSchedules
	}
	if n := failing(); n != 1 {
		t.Fatalf("Stats counts %d failing schedules; want 1", n)
	}
	f.Clock.Set(Start.Add(2 * time.Hour))
	ok := f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	if ok.FailingSince != nil {
		t.Fatalf("the schedule succeeded, but is still marked failing since %v", ok.FailingSince)
	}
	if n := failing(); n != 0 {
		t.Fatalf("after a success, Stats counts %d failing schedules; want 0", n)
	}

	events, _, err := f.Store.EventList(f.ctx, db.EventListParams{JobID: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for i := len(events) - 1; i >= 0; i-- {
		kinds = append(kinds, events[i].Kind)
	}
	want := []string{db.EventStarted, db.EventGaveUp, db.EventStarted, db.EventRecovered, db.EventSucceeded}
	if len(kinds) != len(want) {
		t.Fatalf("events = %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events = %v, want %v", kinds, want)
		}
	}
	var gaveUp db.RunEvent
	if err := json.Unmarshal(events[3].Detail, &gaveUp); err != nil || gaveUp.Attempt != 1 || gaveUp.Error == "" || gaveUp.Generation != 1 {
		t.Fatalf("gave_up detail %s (%v)", events[3].Detail, err)
	}
	after := f.eventsAfter(events[2].ID, []string{db.EventGaveUp, db.EventRecovered}, func(e []db.Event) bool { return len(e) > 0 })
	if len(after) != 1 || after[0].Kind != db.EventRecovered {
		t.Fatalf("EventsAfter = %+v; want the recovery alone", after)
	}

	// Each event names its run and the run's slot; that of an operator's
	// extra run is when it was asked for, not the next pending slot.
	f.Clock.Set(Start.Add(2*time.Hour + 20*time.Minute))
	if _, err := f.Store.JobTrigger(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	runs, _, err := f.Store.RunList(f.ctx, db.RunListParams{JobID: j.ID})
	if err != nil || len(runs) != 3 {
		t.Fatalf("runs %+v, %v; want three", runs, err)
	}
	if events, _, err = f.Store.EventList(f.ctx, db.EventListParams{JobID: j.ID}); err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Kind == db.EventTriggered {
			continue // a control, not a run's
		}
		var d db.RunEvent
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(runs, func(r db.Run) bool { return r.ID == d.RunID })
		if i < 0 || runs[i].Generation != d.Generation || d.Slot == nil || !d.Slot.Equal(*runs[i].Slot) {
			t.Errorf("%s event %s; want the run id and slot of one of the runs %+v", e.Kind, e.Detail, runs)
		}
	}
	if last := events[0]; last.Kind != db.EventSucceeded || !strings.Contains(string(last.Detail), Start.Add(2*time.Hour+20*time.Minute).Format("15:04")) {
		t.Errorf("the extra run's success: %s %s; want its slot at the trigger, %s", last.Kind, last.Detail, Start.Add(2*time.Hour+20*time.Minute))
	}

	// A failing schedule that is cancelled is no longer counted.
	other := f.create(db.JobCreateParams{Type: "other", Schedule: "30 * * * *", MaxAttempts: 1})
	f.Clock.Set(Start.Add(2*time.Hour + 30*time.Minute))
	claims, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"other"}, Max: 1, Lease: time.Minute})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim of the other schedule: %+v, %v", claims, err)
	}
	f.finish(claims[0], db.OutcomeFailed, false)
	if n := failing(); n != 1 {
		t.Fatalf("Stats counts %d failing schedules; want 1, the other's", n)
	}
	if _, err := f.Store.JobCancel(f.ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	if n := failing(); n != 0 {
		t.Fatalf("after the failing schedule was cancelled, Stats counts %d failing schedules; want 0", n)
	}
}

// testRescheduleWhileRunning changes the schedule of a job whose firing is
// running: the old schedule's slots that passed during the run are missed
// (skipped) as the change is made; the new schedule's count from the
// change, not from the running slot. The firing retries as it began, and
// one handed back unrun is passed over. The pending slot of an operator's
// extra run in flight moves to the new schedule.
func testRescheduleWhileRunning(t *testing.T, f *fixture) {
	every10 := db.JobCreateParams{Name: "ten", Schedule: "*/10 * * * *", MaxAttempts: 2}
	reschedule := func(ref, schedule string) db.Job {
		t.Helper()
		spec := db.SpecOf(f.get(ref))
		spec.Schedule = schedule
		got, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: ref, Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	at := func(m time.Duration) time.Time { return Start.Add(m * time.Minute) }
	wantLedger := func(id string, want map[string]int) {
		t.Helper()
		if got := f.outcomes(id); !maps.Equal(got, want) {
			t.Errorf("runs by outcome %v, want %v", got, want)
		}
	}

	// Succeeds after the change: 12:20 and 12:30 of the old schedule are
	// skipped at 12:35; of the new one 12:45 passes during the rest of the
	// run (overlap), 12:15 and 12:30 were never its slots.
	j := f.create(every10)
	f.Clock.Set(at(10))
	c := f.claimLease("w", 1, time.Hour)[0]
	f.Clock.Set(at(35))
	got := reschedule(j.ID, "*/15 * * * *")
	wantTime(t, "slot of the running firing", got.Slot, at(10))
	wantTime(t, "rescheduled at", got.RescheduledAt, at(35))
	wantLedger(j.ID, map[string]int{"running": 1, "missed:skipped": 2})
	f.Clock.Set(at(50))
	after := f.finish(c, db.OutcomeSucceeded, false)
	wantTime(t, "next slot", after.Slot, at(60))
	if after.RescheduledAt != nil || after.MissedSlots != 3 {
		t.Errorf("after the firing: rescheduled at %v, %d missed slots; want none, 3", after.RescheduledAt, after.MissedSlots)
	}
	wantLedger(j.ID, map[string]int{"succeeded": 1, "missed:skipped": 2, "missed:overlap": 1})

	// Fails, and retries its own slot; the new schedule's next slot
	// counts from the change.
	f.Clock.Set(Start)
	j = f.create(db.JobCreateParams{Name: "retried", Schedule: "*/10 * * * *", MaxAttempts: 2, Backoff: time.Minute})
	f.Clock.Set(at(10))
	c = f.claimLease("w", 1, time.Hour)[0]
	f.Clock.Set(at(17))
	reschedule(j.ID, "*/15 * * * *")
	retry := f.finish(c, db.OutcomeFailed, true)
	wantTime(t, "slot of the retry", retry.Slot, at(10))
	f.Clock.Set(*retry.NextRunAt)
	c = f.claimLease("w", 1, time.Hour)[0]
	wantTime(t, "slot the retry runs", c.Job.Slot, at(10))
	after = f.finish(c, db.OutcomeSucceeded, false)
	wantTime(t, "next slot after the retry", after.Slot, at(30))
	wantLedger(j.ID, map[string]int{"failed": 1, "succeeded": 1})

	// Handed back unrun after the change: its slot is passed over, once.
	f.Clock.Set(Start)
	j = f.create(db.JobCreateParams{Name: "released", Schedule: "*/10 * * * *"})
	f.Clock.Set(at(10))
	c = f.claimLease("w", 1, time.Hour)[0]
	f.Clock.Set(at(11))
	reschedule(j.ID, "*/15 * * * *")
	after = f.finish(c, db.OutcomeReleased, false)
	wantTime(t, "next slot after the hand-back", after.Slot, at(15))
	if after.Attempt != 0 || after.RescheduledAt != nil || f.settled(j.ID, at(10)) != 1 {
		t.Errorf("after the hand-back: attempt %d, rescheduled at %v, %v; want 0, none, the slot settled once",
			after.Attempt, after.RescheduledAt, f.outcomes(j.ID))
	}

	// An operator's extra run in flight: the pending slot moves.
	f.Clock.Set(Start)
	j = f.create(db.JobCreateParams{Name: "extra", Schedule: "0 * * * *"})
	if _, err := f.Store.JobTrigger(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	c = f.claimLease("w", 1, time.Hour)[0]
	got = reschedule(j.ID, "30 * * * *")
	wantTime(t, "pending slot during the extra run", got.Slot, at(30))
	after = f.finish(c, db.OutcomeSucceeded, false)
	wantTime(t, "pending slot after the extra run", after.Slot, at(30))
	if after.Attempt != 0 || after.Triggered {
		t.Errorf("after the extra run: attempt %d, triggered %v; want 0, false", after.Attempt, after.Triggered)
	}

	// Claimed ahead of its slot and changed before the slot came: the new
	// schedule's slots before the firing's are recorded (overlap), not lost.
	f.Clock.Set(Start)
	j = f.create(db.JobCreateParams{Name: "ahead", Type: "ahead", Schedule: "0 * * * *"})
	f.Clock.Set(at(60).Add(-5 * time.Second))
	claims, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"ahead"}, Max: 1, Lease: time.Hour, Ahead: 6 * time.Second})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim ahead: %d claims, %v", len(claims), err)
	}
	f.Clock.Set(at(60).Add(-4 * time.Second))
	reschedule(j.ID, "* * * * * *")
	f.Clock.Set(at(60).Add(500 * time.Millisecond))
	after = f.finish(claims[0], db.OutcomeSucceeded, false)
	wantTime(t, "next slot after the firing claimed ahead", after.Slot, at(60).Add(time.Second))
	wantLedger(j.ID, map[string]int{"succeeded": 1, "missed:overlap": 3})

	// Claimed ahead, changed to a schedule that has its slot too, and
	// handed back before the slot: the slot is owed still, not skipped; it
	// runs once, and the new schedule's slots before it are recorded when
	// it ends.
	f.Clock.Set(Start)
	j = f.create(db.JobCreateParams{Name: "ahead-kept", Type: "kept", Schedule: "0 * * * *"})
	f.Clock.Set(at(60).Add(-5 * time.Second))
	claims, err = f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"kept"}, Max: 1, Lease: time.Hour, Ahead: 6 * time.Second})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim ahead: %d claims, %v", len(claims), err)
	}
	reschedule(j.ID, "*/2 * * * * *") // 12:59:56, 12:59:58, then 13:00:00, the firing's slot
	f.Clock.Set(at(60).Add(-3 * time.Second))
	after = f.finish(claims[0], db.OutcomeReleased, false)
	wantTime(t, "slot after a hand-back the new schedule shares", after.Slot, at(60))
	wantLedger(j.ID, map[string]int{"released": 1})
	f.Clock.Set(at(60))
	claims, err = f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"kept"}, Max: 1, Lease: time.Hour})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim of the owed slot: %d claims, %v", len(claims), err)
	}
	wantTime(t, "slot run", claims[0].Job.Slot, at(60))
	f.Clock.Set(at(60).Add(500 * time.Millisecond))
	after = f.finish(claims[0], db.OutcomeSucceeded, false)
	wantTime(t, "next slot", after.Slot, at(60).Add(2*time.Second))
	if n := f.settled(j.ID, at(60)); n != 1 {
		t.Errorf("the shared slot is in the ledger %d times (%v); want once", n, f.outcomes(j.ID))
	}
	wantLedger(j.ID, map[string]int{"released": 1, "succeeded": 1, "missed:overlap": 2})
}

// testRescheduleAfterSkipBack skips a schedule's next slot, then changes
// the schedule: a skip ahead was of the old schedule, and is taken back
// (its missed run goes), so the new schedule's own slots come from now, and
// a slot is never both skipped and run. A change of the jitter alone keeps
// the slots, and the skip.
func testRescheduleAfterSkipBack(t *testing.T, f *fixture) {
	redefine := func(id string, set func(*db.JobCreateParams)) db.Job {
		t.Helper()
		spec := db.SpecOf(f.get(id))
		set(&spec)
		got, err := f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: id, Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	j := f.create(db.JobCreateParams{Name: "daily", Schedule: "0 13 * * *"})
	if _, err := f.Store.JobSkipNext(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	got := redefine(j.ID, func(p *db.JobCreateParams) { p.Jitter = time.Minute })
	wantTime(t, "pending slot after a change of jitter", got.Slot, Start.Add(25*time.Hour))
	redefine(j.ID, func(p *db.JobCreateParams) { p.Schedule = "0 14 * * *" })
	got = redefine(j.ID, func(p *db.JobCreateParams) { p.Schedule = "0 13 * * *" })
	wantTime(t, "pending slot after changing away and back", got.Slot, Start.Add(time.Hour))
	if got.MissedSlots != 0 || len(f.runs(j.ID)) != 0 {
		t.Fatalf("after the change: %d missed slots, runs %v; want the skip taken back", got.MissedSlots, f.outcomes(j.ID))
	}
	f.Clock.Set(*got.NextRunAt)
	f.finish(f.claimOne("w"), db.OutcomeSucceeded, false)
	wantCounts(t, f.outcomes(j.ID), map[string]int{"succeeded": 1})

	// A weekly slot skipped ahead does not hold back a new schedule's own
	// slots.
	f.Clock.Set(Start)
	w := f.create(db.JobCreateParams{Name: "weekly", Schedule: "0 13 * * 1"})
	if _, err := f.Store.JobSkipNext(f.ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	f.Clock.Set(Start.Add(5 * time.Minute))
	got = redefine(w.ID, func(p *db.JobCreateParams) { p.Schedule = "*/5 * * * *" })
	wantTime(t, "pending slot of the new schedule after a skip ahead", got.Slot, Start.Add(10*time.Minute))
}
