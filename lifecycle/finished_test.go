package lifecycle_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/lifecycle"
	"github.com/sked-dev/sked/schedule"
)

// t0 is a slot on the grid of every schedule below.
var t0 = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ptr(t time.Time) *time.Time { return &t }

func mustParse(t *testing.T, spec string) *schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// half draws the middle of the jitter range: Backoff(attempt) with a 1 s
// base is then 0.75 × 2^(attempt-1) s.
func half() float64 { return 0.5 }

// missed is the Missed of n slots every 10 s from first, for reason.
func missed(first time.Time, n int, reason string) lifecycle.Missed {
	m := lifecycle.Missed{Total: int64(n), Reason: reason}
	for i := range n {
		m.Slots = append(m.Slots, first.Add(time.Duration(i)*10*time.Second))
	}
	return m
}

// TestFinished_OneOff covers every way a one-off job's run ends: done,
// retried with backoff, dead when its attempts are spent or the error is
// permanent, handed back, and taken back by the reaper.
func TestFinished_OneOff(t *testing.T) {
	now := at(time.Minute)
	due := at(-10 * time.Second)
	job := func(attempt int, next time.Time) db.Job {
		return db.Job{ID: "j1", State: db.StateRunning, Attempt: attempt, MaxAttempts: 3,
			Backoff: db.Duration(time.Second), Slot: ptr(due), NextRunAt: ptr(next), LastError: "before"}
	}
	for _, c := range []struct {
		name string
		job  db.Job
		p    db.RunFinishParams
		want lifecycle.Result
	}{
		{"Succeeded", job(1, due), db.RunFinishParams{Outcome: db.OutcomeSucceeded},
			lifecycle.Result{State: db.StateDone, Slot: due, Attempt: 1}},
		{"FailedRetried", job(2, due), db.RunFinishParams{Outcome: db.OutcomeFailed, Retryable: true, Error: "boom"},
			lifecycle.Result{State: db.StateReady, Slot: due, NextRunAt: now.Add(1500 * time.Millisecond), Attempt: 2, LastError: "boom"}},
		{"FailedLastAttemptDead", job(3, due), db.RunFinishParams{Outcome: db.OutcomeFailed, Retryable: true, Error: "boom"},
			lifecycle.Result{State: db.StateDead, Slot: due, Attempt: 3, LastError: "boom", GaveUp: true}},
		{"FailedPermanentDead", job(1, due), db.RunFinishParams{Outcome: db.OutcomeFailed, Error: "bad input"},
			lifecycle.Result{State: db.StateDead, Slot: due, Attempt: 1, LastError: "bad input", GaveUp: true}},
		{"TimedOutRetried", job(1, due), db.RunFinishParams{Outcome: db.OutcomeTimedOut, Retryable: true, Error: "slow"},
			lifecycle.Result{State: db.StateReady, Slot: due, NextRunAt: now.Add(750 * time.Millisecond), Attempt: 1, LastError: "slow"}},
		{"CancelledOnRequest", job(1, due), db.RunFinishParams{Outcome: db.OutcomeCancelled, Error: "stop"},
			lifecycle.Result{State: db.StateCancelled, Slot: due, Attempt: 1, LastError: "stop"}},
		// The reaper took it back: due again at once at its old due time,
		// no backoff, the attempt counted.
		{"LeaseExpiredDueAtOnce", job(2, due), db.RunFinishParams{Outcome: db.OutcomeLeaseExpired, Retryable: true, Error: "lease expired"},
			lifecycle.Result{State: db.StateReady, Slot: due, NextRunAt: due, Attempt: 2, LastError: "lease expired"}},
		{"LeaseExpiredLastAttemptDead", job(3, due), db.RunFinishParams{Outcome: db.OutcomeLeaseExpired, Retryable: true, Error: "lease expired"},
			lifecycle.Result{State: db.StateDead, Slot: due, Attempt: 3, LastError: "lease expired", GaveUp: true}},
		// Claimed ahead and reaped before it was due: it never started,
		// so the attempt is given back and it stays due when it was.
		{"LeaseExpiredBeforeDue", job(2, now.Add(5*time.Second)), db.RunFinishParams{Outcome: db.OutcomeLeaseExpired, Retryable: true},
			lifecycle.Result{State: db.StateReady, Slot: due, NextRunAt: now.Add(5 * time.Second), Attempt: 1, LastError: "before"}},
		// Handed back at shutdown: due again at once at its old due time,
		// the attempt given back.
		{"ReleasedAtShutdown", job(2, due), db.RunFinishParams{Outcome: db.OutcomeReleased},
			lifecycle.Result{State: db.StateReady, Slot: due, NextRunAt: due, Attempt: 1, LastError: "before"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := c.job
			got := lifecycle.Finished(&j, nil, c.p, now, now, half)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Finished =\n%+v, want\n%+v", got, c.want)
			}
		})
	}
}

// TestFinished_Recurring covers how a schedule moves on: to the next slot
// computed from the slot, the slots that passed while it ran recorded per
// its overlap policy, a spent firing given up without ending the job, and
// an operator's extra run leaving the schedule's slot as it was.
func TestFinished_Recurring(t *testing.T) {
	every := mustParse(t, "@every 10s")
	job := func(attempt int) db.Job {
		return db.Job{ID: "r1", State: db.StateRunning, Schedule: "@every 10s", Attempt: attempt, MaxAttempts: 2,
			Backoff: db.Duration(time.Second), Slot: ptr(t0), NextRunAt: ptr(t0), Overlap: db.OverlapSkip, Misfire: db.MisfireRunOnce}
	}
	with := func(j db.Job, f func(*db.Job)) db.Job { f(&j); return j }
	for _, c := range []struct {
		name      string
		job       db.Job
		p         db.RunFinishParams
		startedAt time.Time
		now       time.Time
		want      lifecycle.Result
	}{
		{"NextSlotFromTheSlot", job(1), db.RunFinishParams{Outcome: db.OutcomeSucceeded}, t0, at(3 * time.Second),
			lifecycle.Result{State: db.StateReady, Slot: at(10 * time.Second), NextRunAt: at(10 * time.Second)}},
		{"OverlapSkip", job(1), db.RunFinishParams{Outcome: db.OutcomeSucceeded}, t0, at(25 * time.Second),
			lifecycle.Result{State: db.StateReady, Slot: at(30 * time.Second), NextRunAt: at(30 * time.Second),
				Missed: missed(at(10*time.Second), 2, db.MissedOverlap)}},
		{"OverlapQueueOne", with(job(1), func(j *db.Job) { j.Overlap = db.OverlapQueueOne }), db.RunFinishParams{Outcome: db.OutcomeSucceeded}, t0, at(25 * time.Second),
			lifecycle.Result{State: db.StateReady, Slot: at(20 * time.Second), NextRunAt: at(20 * time.Second),
				Missed: missed(at(10*time.Second), 1, db.MissedOverlap)}},
		// run_all catching up: the next slot had passed at the claim, so
		// it runs next, nothing missed.
		{"RunAllCatchUp", with(job(1), func(j *db.Job) { j.Misfire = db.MisfireRunAll }), db.RunFinishParams{Outcome: db.OutcomeSucceeded}, at(35 * time.Second), at(36 * time.Second),
			lifecycle.Result{State: db.StateReady, Slot: at(10 * time.Second), NextRunAt: at(10 * time.Second)}},
		{"Jitter", with(job(1), func(j *db.Job) { j.Jitter = db.Duration(5 * time.Second) }), db.RunFinishParams{Outcome: db.OutcomeSucceeded}, t0, at(time.Second),
			lifecycle.Result{State: db.StateReady, Slot: at(10 * time.Second), NextRunAt: lifecycle.DueAt("r1", at(10*time.Second), 5*time.Second)}},
		{"FailedRetried", job(1), db.RunFinishParams{Outcome: db.OutcomeFailed, Retryable: true, Error: "boom"}, t0, at(time.Second),
			lifecycle.Result{State: db.StateReady, Slot: t0, NextRunAt: at(time.Second + 750*time.Millisecond), Attempt: 1, LastError: "boom"}},
		{"FailedLastAttemptGivesUpTheFiring", job(2), db.RunFinishParams{Outcome: db.OutcomeFailed, Retryable: true, Error: "boom"}, t0, at(time.Second),
			lifecycle.Result{State: db.StateReady, Slot: at(10 * time.Second), NextRunAt: at(10 * time.Second), LastError: "boom", GaveUp: true}},
		{"CancelledMovesOn", job(1), db.RunFinishParams{Outcome: db.OutcomeCancelled, Error: "stop"}, t0, at(time.Second),
			lifecycle.Result{State: db.StateReady, Slot: at(10 * time.Second), NextRunAt: at(10 * time.Second), LastError: "stop"}},
		{"TriggeredSucceeded", with(job(1), func(j *db.Job) { j.Triggered, j.Slot, j.LastError = true, ptr(at(time.Hour)), "old" }),
			db.RunFinishParams{Outcome: db.OutcomeSucceeded}, t0, at(time.Second),
			lifecycle.Result{State: db.StateReady, Slot: at(time.Hour), NextRunAt: at(time.Hour), LastError: "old", Extra: true}},
		{"TriggeredFailedOneAttempt", with(job(1), func(j *db.Job) { j.Triggered, j.Slot = true, ptr(at(time.Hour)) }),
			db.RunFinishParams{Outcome: db.OutcomeFailed, Retryable: true, Error: "boom"}, t0, at(time.Second),
			lifecycle.Result{State: db.StateReady, Slot: at(time.Hour), NextRunAt: at(time.Hour), LastError: "boom", GaveUp: true, Extra: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := c.job
			got := lifecycle.Finished(&j, every, c.p, c.startedAt, c.now, half)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Finished =\n%+v, want\n%+v", got, c.want)
			}
		})
	}
}

// TestClaimed covers the misfire policies of a recurring job claimed for
// slot t0 at now, on an @every schedule and on the cron spec with the same
// slots.
func TestClaimed(t *testing.T) {
	for _, spec := range []string{"@every 10s", "*/10 * * * * *"} {
		s := mustParse(t, spec)
		for _, c := range []struct {
			name          string
			misfire       string
			now           time.Time
			grace, window time.Duration
			want          lifecycle.Firing
		}{
			{"LateButAlone", db.MisfireRunOnce, at(9 * time.Second), time.Minute, time.Hour,
				lifecycle.Firing{Run: true, Slot: t0}},
			{"RunOnceLatest", db.MisfireRunOnce, at(35 * time.Second), time.Minute, time.Hour,
				lifecycle.Firing{Run: true, Slot: at(30 * time.Second), Missed: missed(t0, 3, db.MissedDowntime)}},
			{"RunOnceNextJustDue", db.MisfireRunOnce, at(10 * time.Second), time.Minute, time.Hour,
				lifecycle.Firing{Run: true, Slot: at(10 * time.Second), Missed: missed(t0, 1, db.MissedDowntime)}},
			{"SkipWithinGrace", db.MisfireSkip, at(35 * time.Second), 5 * time.Second, time.Hour,
				lifecycle.Firing{Run: true, Slot: at(30 * time.Second), Missed: missed(t0, 3, db.MissedDowntime)}},
			{"SkipPastGrace", db.MisfireSkip, at(35 * time.Second), 5*time.Second - time.Millisecond, time.Hour,
				lifecycle.Firing{Run: false, Slot: at(40 * time.Second), Missed: missed(t0, 4, db.MissedDowntime)}},
			{"RunAllInsideWindow", db.MisfireRunAll, at(35 * time.Second), time.Minute, time.Hour,
				lifecycle.Firing{Run: true, Slot: t0}},
			// The window starts at 65 s: the first slot at or after it is 70 s.
			{"RunAllWindowBetweenSlots", db.MisfireRunAll, at(100 * time.Second), time.Minute, 35 * time.Second,
				lifecycle.Firing{Run: true, Slot: at(70 * time.Second), Missed: missed(t0, 7, db.MissedDowntime)}},
			// The window starts at 60 s, on a slot: that slot runs.
			{"RunAllWindowOnASlot", db.MisfireRunAll, at(100 * time.Second), time.Minute, 40 * time.Second,
				lifecycle.Firing{Run: true, Slot: at(60 * time.Second), Missed: missed(t0, 6, db.MissedDowntime)}},
		} {
			t.Run(spec+"/"+c.name, func(t *testing.T) {
				got := lifecycle.Claimed(s, c.misfire, t0, c.now, c.grace, c.window, 0)
				if !reflect.DeepEqual(got, c.want) {
					t.Errorf("Claimed =\n%+v, want\n%+v", got, c.want)
				}
			})
		}
	}
}

// TestJitterDueTimes: a slot that has passed but is not yet due (its
// offset inside the jitter still ahead) is not a misfire at a claim, nor an
// overlap at a run's end: it stays to run when due.
func TestJitterDueTimes(t *testing.T) {
	s := mustParse(t, "@every 30s")
	jitter := 20 * time.Second
	id := "j0"
	for i := 1; schedule.Offset(id, jitter) < 4*time.Second; i++ {
		id = fmt.Sprintf("j%d", i)
	}
	offset := schedule.Offset(id, jitter)
	// Claimed late for t0: t0+30s has passed, but is due only at
	// t0+30s+offset.
	if got := lifecycle.Claimed(s, db.MisfireRunOnce, t0, at(30*time.Second+offset/2), time.Minute, time.Hour, offset); !got.Run || !got.Slot.Equal(t0) || got.Missed.Total != 0 {
		t.Errorf("claimed before the next slot is due: %+v; want t0 run, nothing missed", got)
	}
	// A run of t0 that ends after t0+30s but before it is due.
	j := db.Job{ID: id, State: db.StateRunning, Schedule: "@every 30s", Jitter: db.Duration(jitter), Attempt: 1, MaxAttempts: 1, Slot: ptr(t0)}
	r := lifecycle.Finished(&j, s, db.RunFinishParams{Outcome: db.OutcomeSucceeded}, t0, at(30*time.Second+offset/2), half)
	if !r.Slot.Equal(at(30*time.Second)) || r.Missed.Total != 0 {
		t.Errorf("a run ending before the next slot is due: next %v, %d missed; want t0+30s pending", r.Slot, r.Missed.Total)
	}
}

// TestFinished_RunAllRetryCatchesUp: after a run_all firing's retry, the
// slots that were due run one by one (the catch-up is not lost to the
// failed attempt).
func TestFinished_RunAllRetryCatchesUp(t *testing.T) {
	s := mustParse(t, "@every 10s")
	j := db.Job{ID: "j", State: db.StateRunning, Schedule: "@every 10s", Misfire: db.MisfireRunAll, Overlap: db.OverlapSkip,
		Attempt: 2, MaxAttempts: 2, Slot: ptr(t0)}
	r := lifecycle.Finished(&j, s, db.RunFinishParams{Outcome: db.OutcomeSucceeded}, at(34*time.Second), at(35*time.Second), half)
	if !r.Slot.Equal(at(10*time.Second)) || r.Missed.Total != 0 {
		t.Errorf("after the retry: next %v, %d missed; want t0+10s next, none missed", r.Slot, r.Missed.Total)
	}
}

// TestFailing: a schedule is failing from a firing that gave up until a
// firing succeeds; an operator's extra run neither makes it failing nor
// ends it, and a one-off job is never failing.
func TestFailing(t *testing.T) {
	well := db.Job{Schedule: "0 * * * *"}
	failing := db.Job{Schedule: "0 * * * *", FailingSince: ptr(t0)}
	for _, c := range []struct {
		name    string
		job     db.Job
		r       lifecycle.Result
		outcome db.Outcome
		want    bool
	}{
		{"FiringGaveUp", well, lifecycle.Result{GaveUp: true}, db.OutcomeFailed, true},
		{"FiringRetried", well, lifecycle.Result{}, db.OutcomeFailed, false},
		{"FiringGaveUpAgain", failing, lifecycle.Result{GaveUp: true}, db.OutcomeTimedOut, true},
		{"FiringRetriedWhileFailing", failing, lifecycle.Result{}, db.OutcomeFailed, true},
		{"FiringCancelledWhileFailing", failing, lifecycle.Result{}, db.OutcomeCancelled, true},
		{"FiringSucceeded", failing, lifecycle.Result{}, db.OutcomeSucceeded, false},
		{"ExtraRunGaveUp", well, lifecycle.Result{GaveUp: true, Extra: true}, db.OutcomeFailed, false},
		{"ExtraRunSucceeded", failing, lifecycle.Result{Extra: true}, db.OutcomeSucceeded, true},
		{"ExtraRunGaveUpWhileFailing", failing, lifecycle.Result{GaveUp: true, Extra: true}, db.OutcomeFailed, true},
		{"OneOffDead", db.Job{}, lifecycle.Result{GaveUp: true}, db.OutcomeFailed, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := lifecycle.Failing(c.job, c.r, c.outcome); got != c.want {
				t.Errorf("Failing = %v, want %v", got, c.want)
			}
		})
	}
}
