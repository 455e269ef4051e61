package lifecycle_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/lifecycle"
	"github.com/sked-dev/sked/schedule"
)

// TestTransitions checks, for every state, which operator requests each
// decision allows, refuses (ErrConflict) or finds to change nothing.
func TestTransitions(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	live := func() (*db.Run, error) { return &db.Run{ID: 7}, nil }
	type decide func(j db.Job) (noop bool, err error)
	noNoop := func(f func(db.Job) error) decide {
		return func(j db.Job) (bool, error) { return false, f(j) }
	}
	decisions := map[string]decide{
		"cancel":     func(j db.Job) (bool, error) { return lifecycle.Cancel(j, live) },
		"pause":      func(j db.Job) (bool, error) { return lifecycle.Pause(j, db.JobPauseParams{}, time.Time{}) },
		"resume":     lifecycle.Resume,
		"retry":      noNoop(lifecycle.Retry),
		"cancel-run": noNoop(lifecycle.CancelRun),
		"trigger":    noNoop(func(j db.Job) error { return lifecycle.Trigger(j, now) }),
		"skip":       noNoop(lifecycle.SkipNext),
	}
	// want[decision][state]: "ok", "noop" or "conflict", for a recurring job
	// that is not yet due.
	want := map[string]map[db.JobState]string{
		"cancel":     {db.StateReady: "ok", db.StatePaused: "ok", db.StateDead: "ok", db.StateCancelled: "noop", db.StateRunning: "conflict", db.StateDone: "conflict"},
		"pause":      {db.StateReady: "ok", db.StatePaused: "noop", db.StateDead: "conflict", db.StateCancelled: "conflict", db.StateRunning: "ok", db.StateDone: "conflict"}, // a running schedule pauses when its run ends
		"resume":     {db.StateReady: "noop", db.StatePaused: "ok", db.StateDead: "conflict", db.StateCancelled: "conflict", db.StateRunning: "conflict", db.StateDone: "conflict"},
		"retry":      {db.StateReady: "conflict", db.StatePaused: "conflict", db.StateDead: "ok", db.StateCancelled: "conflict", db.StateRunning: "conflict", db.StateDone: "conflict"},
		"cancel-run": {db.StateReady: "conflict", db.StatePaused: "conflict", db.StateDead: "conflict", db.StateCancelled: "conflict", db.StateRunning: "ok", db.StateDone: "conflict"},
		"trigger":    {db.StateReady: "ok", db.StatePaused: "conflict", db.StateDead: "conflict", db.StateCancelled: "conflict", db.StateRunning: "conflict", db.StateDone: "conflict"},
		"skip":       {db.StateReady: "ok", db.StatePaused: "conflict", db.StateDead: "conflict", db.StateCancelled: "conflict", db.StateRunning: "conflict", db.StateDone: "conflict"},
	}
	for name, fn := range decisions {
		for _, state := range db.AllStates {
			j := db.Job{ID: "j1", State: state, Schedule: "0 * * * *", NextRunAt: &later}
			noop, err := fn(j)
			got := "ok"
			switch {
			case errors.Is(err, db.ErrConflict):
				got = "conflict"
			case err != nil:
				got = err.Error()
			case noop:
				got = "noop"
			}
			if got != want[name][state] {
				t.Errorf("%s of a %s job = %s, want %s", name, state, got, want[name][state])
			}
		}
	}
}

func TestCancel_RunningNamesTheRun(t *testing.T) {
	_, err := lifecycle.Cancel(db.Job{ID: "j1", State: db.StateRunning, LeaseOwner: "w1", Attempt: 2},
		func() (*db.Run, error) { return &db.Run{ID: 7}, nil })
	var c *db.ConflictError
	if !errors.As(err, &c) || c.Run == nil || c.Run.ID != 7 {
		t.Fatalf("Cancel of a running job = %v, want a conflict naming run 7", err)
	}
	want := "job j1 is running on worker w1 (run 7, attempt 2); it cannot be cancelled now: ask the handler to stop with POST /jobs/j1/cancel-run"
	if c.Msg != want {
		t.Errorf("message = %q, want %q", c.Msg, want)
	}
}

func TestTrigger_Due(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	if err := lifecycle.Trigger(db.Job{ID: "j1", State: db.StateReady, NextRunAt: &now}, now); !errors.Is(err, db.ErrConflict) {
		t.Errorf("Trigger of a due job = %v, want ErrConflict", err)
	}
}

func TestSkipNext_OneOffAndTriggered(t *testing.T) {
	for _, j := range []db.Job{
		{ID: "one", State: db.StateReady},
		{ID: "trig", State: db.StateReady, Schedule: "0 * * * *", Triggered: true},
	} {
		if err := lifecycle.SkipNext(j); !errors.Is(err, db.ErrConflict) {
			t.Errorf("SkipNext(%s) = %v, want ErrConflict", j.ID, err)
		}
	}
}

// TestRescheduled: a change of schedule passes over the slots of the old
// one that were due (for a paused job, due before the change, as a resume
// goes), not those whose jitter offset has not yet come, nor a failed
// firing's slot, which is in the ledger as its runs.
func TestRescheduled(t *testing.T) {
	sched, err := schedule.Parse("0 * * * *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	slot := time.Date(2026, 3, 2, 13, 0, 0, 0, time.UTC)
	jitter := 30 * time.Minute
	// An id whose offset inside the jitter is more than a minute.
	id := "j0"
	for i := 1; schedule.Offset(id, jitter) <= time.Minute; i++ {
		id = fmt.Sprintf("j%d", i)
	}
	offset := schedule.Offset(id, jitter)
	for _, tc := range []struct {
		name  string
		job   db.Job
		now   time.Time
		slots int64
	}{
		{"slot passed, offset not", db.Job{ID: id, State: db.StateReady, Jitter: db.Duration(jitter)}, slot.Add(offset - time.Second), 0},
		{"due", db.Job{ID: id, State: db.StateReady, Jitter: db.Duration(jitter)}, slot.Add(offset), 1},
		{"two due", db.Job{ID: id, State: db.StateReady, Jitter: db.Duration(jitter)}, slot.Add(time.Hour + offset), 2},
		{"retry pending", db.Job{ID: id, State: db.StateReady, Attempt: 1}, slot.Add(90 * time.Minute), 1},
		{"paused, slot passed, offset not", db.Job{ID: id, State: db.StatePaused, Jitter: db.Duration(jitter)}, slot.Add(time.Second), 0},
		{"paused, due at the change", db.Job{ID: id, State: db.StatePaused, Jitter: db.Duration(jitter)}, slot.Add(offset), 0},
		{"paused, due before", db.Job{ID: id, State: db.StatePaused, Jitter: db.Duration(jitter)}, slot.Add(offset + time.Second), 1},
	} {
		tc.job.Schedule, tc.job.Slot = "0 * * * *", &slot
		if _, m := lifecycle.Rescheduled(tc.job, sched, sched, tc.now); m.Total != tc.slots || int64(len(m.Slots)) != tc.slots {
			t.Errorf("%s: missed %d (%v), want %d", tc.name, m.Total, m.Slots, tc.slots)
		}
	}
}

// TestRescheduled_KeepsOwedSlot: a slot that passed but was not yet due at
// the old jitter's offset stays pending when the new schedule has it too
// (any instant starts an @every chain), and otherwise gives way to the new
// schedule's next slot, passed over (skipped) so that the ledger has it.
func TestRescheduled_KeepsOwedSlot(t *testing.T) {
	parse := func(expr string) *schedule.Schedule { return mustParse(t, expr) }
	slot := time.Date(2026, 3, 2, 13, 0, 0, 0, time.UTC)
	jitter := 30 * time.Minute
	id := "j0"
	for i := 1; schedule.Offset(id, jitter) <= 10*time.Minute; i++ {
		id = fmt.Sprintf("j%d", i)
	}
	now := slot.Add(5 * time.Minute) // passed, its offset not yet come
	for _, tc := range []struct {
		old, next string
		want      time.Time
		missed    int64
	}{
		{"0 * * * *", "0 * * * *", slot, 0},
		{"0 * * * *", "*/30 * * * *", slot, 0},
		{"@every 1h", "@every 30m", slot, 0},
		{"0 * * * *", "15 * * * *", slot.Add(15 * time.Minute), 1},
	} {
		j := db.Job{ID: id, State: db.StateReady, Schedule: tc.old, Slot: &slot, Jitter: db.Duration(jitter)}
		got, m := lifecycle.Rescheduled(j, parse(tc.old), parse(tc.next), now)
		if !got.Equal(tc.want) || m.Total != tc.missed {
			t.Errorf("%s to %s at 13:05: pending %v, %d missed; want %v, %d", tc.old, tc.next, got, m.Total, tc.want, tc.missed)
		}
	}
}

// TestRescheduled_PausedAtASlot: a paused job's slot that falls at the
// moment of the change is recorded, unless the new schedule keeps it
// pending.
func TestRescheduled_PausedAtASlot(t *testing.T) {
	parse := func(expr string) *schedule.Schedule { return mustParse(t, expr) }
	at := time.Date(2026, 12, 2, 10, 10, 0, 0, time.UTC)
	slot := at.Add(-5 * time.Minute)
	paused := db.Job{ID: "p", State: db.StatePaused, Schedule: "*/5 * * * *", Slot: &slot}
	got, m := lifecycle.Rescheduled(paused, parse("*/5 * * * *"), parse("*/7 * * * *"), at)
	if !got.Equal(at.Add(4*time.Minute)) || m.Total != 2 || m.Reason != db.MissedPaused {
		t.Errorf("paused, changed at a slot: pending %v, %d missed (%s); want 10:14 and 10:05, 10:10 paused", got, m.Total, m.Reason)
	}
	got, m = lifecycle.Rescheduled(paused, parse("*/5 * * * *"), parse("*/10 * * * *"), at)
	if !got.Equal(at) || m.Total != 1 {
		t.Errorf("paused, changed at a slot both schedules have: pending %v, %d missed; want 10:10 pending, 10:05 paused", got, m.Total)
	}
}

// A skip starts the window at the slot skipped when it is to come, at the
// skip when it has passed (a pending retry given up), and never before a
// window a skip started already; a restart keeps such a window too.
func TestSkipWatchFrom(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	at := func(h int) *time.Time { t := now.Add(time.Duration(h) * time.Hour); return &t }
	j := db.Job{Schedule: "0 * * * *", CreatedAt: now.Add(-48 * time.Hour), ExpectSuccessWithin: db.Duration(2 * time.Hour)}
	for _, c := range []struct {
		slot, watch *time.Time
		want        time.Time
	}{
		{at(3), nil, *at(3)},   // the slot to come
		{at(-1), nil, now},     // a retry of a slot that passed
		{at(3), at(5), *at(5)}, // an earlier skip started it later
		{at(-1), at(-2), now},  // a restart before now
	} {
		j.Slot, j.WatchFrom = c.slot, c.watch
		if got := lifecycle.SkipWatchFrom(j, now); !got.Equal(c.want) {
			t.Errorf("slot %v, window from %v: skip starts it at %v; want %v", *c.slot, c.watch, got, c.want)
		}
	}
	j.WatchFrom = at(10)
	if got := lifecycle.WatchAgain(j, now); !got.Equal(*at(10)) {
		t.Errorf("a restart at %v of a window a skip started at %v: %v; want it kept", now, *at(10), got)
	}
}
