package worker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/notify"
)

// sweepRig is a sweeper on a real store and an injected clock, recording
// what it tells people and how often it wakes the dispatcher.
type sweepRig struct {
	t      *testing.T
	ctx    context.Context
	store  *sqlite.Store
	now    time.Time
	s      *Sweeper
	events []notify.Event
	quiet  []db.QuietChange
	wakes  int
}

func newSweepRig(t *testing.T) *sweepRig {
	r := &sweepRig{t: t, ctx: context.Background(), store: sqlitetest.Open(t), now: time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)}
	r.store.NowFunc = func() time.Time { return r.now }
	r.s = &Sweeper{Store: r.store, NowFunc: r.store.Now,
		NotifyFunc:  func(_ context.Context, e notify.Event) error { r.events = append(r.events, e); return nil },
		WakeFunc:    func() { r.wakes++ },
		OnQuietFunc: func(c db.QuietChange) { r.quiet = append(r.quiet, c) },
		Logger:      slog.New(slog.DiscardHandler),
		deadSince:   r.now.Add(-time.Hour),
	}
	return r
}

func (r *sweepRig) create(p db.JobCreateParams) db.Job {
	r.t.Helper()
	j, _, err := r.store.JobCreate(r.ctx, p)
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

// finish claims the due job of type typ and records outcome for it.
func (r *sweepRig) finish(typ string, outcome db.Outcome) {
	r.t.Helper()
	claims, err := r.store.RunClaim(r.ctx, db.RunClaimParams{WorkerID: "w1", Types: []string{typ}, Max: 1})
	if err != nil || len(claims) != 1 {
		r.t.Fatalf("claim %s: %d claims, %v", typ, len(claims), err)
	}
	j := claims[0].Job
	if _, err := r.store.RunFinish(r.ctx, db.RunFinishParams{JobID: j.ID, Generation: j.LeaseGeneration, Outcome: outcome, Error: "boom"}); err != nil {
		r.t.Fatal(err)
	}
}

// sweep runs one pass and returns the events it sent.
func (r *sweepRig) sweep() []notify.Event {
	r.events = nil
	r.s.runOnce(r.ctx)
	return r.events
}

func keys(events []notify.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Kind+" "+e.Key)
	}
	return out
}

// A job paused until T is resumed by the first sweep at or after T, which
// wakes the dispatcher; a sweep before T changes nothing and wakes nobody.
func TestSweeper_ResumesDuePauses(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	j := r.create(db.JobCreateParams{Type: "r", Schedule: "@every 1m"})
	until := r.now.Add(30 * time.Minute)
	if _, err := r.store.JobPauseUntil(r.ctx, db.JobPauseParams{ID: j.ID, Until: until}); err != nil {
		t.Fatal(err)
	}
	r.now = until.Add(-time.Second)
	if ev := r.sweep(); len(ev) != 0 || r.wakes != 0 {
		t.Fatalf("before the pause ends: events %v, %d wakes; want none", keys(ev), r.wakes)
	}
	if got, _ := r.store.JobGet(r.ctx, j.ID); got.State != db.StatePaused {
		t.Fatalf("before the pause ends: %s, want paused", got.State)
	}
	r.now = until
	r.sweep()
	if got, _ := r.store.JobGet(r.ctx, j.ID); got.State != db.StateReady || r.wakes != 1 {
		t.Fatalf("when the pause ends: %s and %d wakes, want ready and 1", got.State, r.wakes)
	}
}

// A schedule with no success within its expectSuccessWithin goes quiet
// once (one event, one observed change, however many sweeps), and
// recovers once after a run succeeds.
func TestSweeper_QuietAndRecovered(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	j := r.create(db.JobCreateParams{Type: "r", Schedule: "@every 10m", ExpectSuccessWithin: time.Hour})
	r.now = r.now.Add(time.Hour)
	if ev := r.sweep(); len(ev) != 0 {
		t.Fatalf("at the limit: %v, want nothing", keys(ev))
	}
	r.now = r.now.Add(1500 * time.Millisecond) // keys keep the millisecond
	ev := r.sweep()
	wantKey := "schedule_quiet quiet:" + j.ID + ":" + r.now.Format(time.RFC3339Nano)
	if got := keys(ev); len(got) != 1 || got[0] != wantKey || len(r.quiet) != 1 || !r.quiet[0].Quiet {
		t.Fatalf("past the limit: events %v, quiet changes %+v; want one %q", got, r.quiet, wantKey)
	}
	if ev[0].ExpectSuccessWithin != db.Duration(time.Hour) || ev[0].JobID != j.ID {
		t.Errorf("event %+v does not give the job and the limit, which its message says", ev[0])
	}
	if ev := r.sweep(); len(ev) != 0 {
		t.Fatalf("still quiet: %v, want no new event", keys(ev))
	}
	r.finish("r", db.OutcomeSucceeded)
	ev = r.sweep()
	wantKey = "schedule_recovered recovered:" + j.ID + ":" + r.now.Format(time.RFC3339Nano)
	if got := keys(ev); len(got) != 1 || got[0] != wantKey || len(r.quiet) != 2 || r.quiet[1].Quiet {
		t.Fatalf("after a success: events %v, quiet changes %+v; want one %q", got, r.quiet, wantKey)
	}
}

// Dead jobs are announced from the last one announced on: a sweep
// announces every job dead since, the next only those dead at or after the
// latest of them (their keys make a repeat a no-op).
func TestSweeper_AnnouncesDeadJobs(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	var dead []string
	for _, typ := range []string{"a", "b"} {
		r.now = r.now.Add(time.Minute)
		dead = append(dead, r.create(db.JobCreateParams{Type: typ, MaxAttempts: 1}).ID)
		r.finish(typ, db.OutcomeFailed)
	}
	key := func(i int) string {
		return "job_dead dead:" + dead[i] + ":" + r.now.Add(time.Duration(i-1)*time.Minute).Format(time.RFC3339Nano)
	}
	if got := keys(r.sweep()); len(got) != 2 || got[0] != key(0) || got[1] != key(1) {
		t.Fatalf("first sweep: %v, want %v", got, []string{key(0), key(1)})
	}
	if got := keys(r.sweep()); len(got) != 1 || got[0] != key(1) {
		t.Fatalf("second sweep: %v, want only %v", got, key(1))
	}
}

// A dead notification or ping is logged, not announced: its announcement
// would go to the same sinks and die the same way, again and again.
func TestSweeper_DeadDeliveriesNotAnnounced(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	var logs bytes.Buffer
	r.s.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	var job db.Job
	for _, key := range []string{"notify:0:dead:x:1", "ping:fail:x:1", ""} {
		r.now = r.now.Add(time.Minute)
		job = r.create(db.JobCreateParams{Type: "http", MaxAttempts: 1, IdempotencyKey: key})
		r.finish("http", db.OutcomeFailed)
	}
	if ev := r.sweep(); len(ev) != 1 || ev[0].Kind != notify.KindDead || ev[0].JobID != job.ID || ev[0].Attempts != 1 || ev[0].Error != "boom" {
		t.Fatalf("announced %+v, want the one dead job %s", ev, job.ID)
	}
	if n := strings.Count(logs.String(), `msg="notification not delivered"`); n != 2 {
		t.Errorf("%d undelivered notifications logged, want 2:\n%s", n, logs.String())
	}
}

// afterDeadSince is the real store calling after once JobDeadSince has
// answered.
type afterDeadSince struct {
	*sqlite.Store
	after func()
}

func (s afterDeadSince) JobDeadSince(ctx context.Context, since time.Time, limit int) ([]db.Job, error) {
	defer s.after()
	return s.Store.JobDeadSince(ctx, since, limit)
}

// Run announces the deaths of the hour before it started, not older ones.
func TestSweeper_RunLooksBackAnHour(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	var ids []string
	for _, typ := range []string{"old", "recent"} {
		ids = append(ids, r.create(db.JobCreateParams{Type: typ, MaxAttempts: 1}).ID)
		r.finish(typ, db.OutcomeFailed)
		r.now = r.now.Add(time.Hour)
	}
	// Started an hour after "recent" died and two after "old" did; stopped
	// once its first sweep has read the dead jobs.
	ctx, cancel := context.WithCancel(r.ctx)
	r.s.Store = afterDeadSince{r.store, cancel}
	r.s.Interval = time.Hour
	if err := r.s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if len(r.events) != 1 || r.events[0].JobID != ids[1] {
		t.Fatalf("announced %v, want only job %s", keys(r.events), ids[1])
	}
}

// A failing store or sink is logged and the sweep goes on; once the
// sweeper is stopping, its failures are not logged.
func TestSweeper_Errors(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	var logs bytes.Buffer
	r.s.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r.create(db.JobCreateParams{Type: "a", MaxAttempts: 1})
	r.finish("a", db.OutcomeFailed)
	r.s.NotifyFunc = func(context.Context, notify.Event) error { return errors.New("sink down") }
	r.sweep()
	if !strings.Contains(logs.String(), `msg=notify err="sink down"`) {
		t.Errorf("a failed notification is not logged:\n%s", logs.String())
	}

	closed, err := sqlite.Open(r.ctx, filepath.Join(t.TempDir(), "closed.db"))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	r.s.Store = closed
	logs.Reset()
	r.sweep()
	for _, what := range []string{"resume paused jobs", "check quiet schedules", "list dead jobs"} {
		if !strings.Contains(logs.String(), "msg=\""+what+"\"") {
			t.Errorf("%q not logged:\n%s", what, logs.String())
		}
	}
	logs.Reset()
	ctx, cancel := context.WithCancel(r.ctx)
	cancel()
	r.s.runOnce(ctx)
	if logs.Len() != 0 {
		t.Errorf("errors logged while stopping:\n%s", logs.String())
	}
}
