package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/notify"
)

// sweepRig is a sweeper on a real store and an injected clock, telling
// people through a real notifier with one webhook sink: what it tells is
// read back from the delivery jobs it creates.
type sweepRig struct {
	t     *testing.T
	ctx   context.Context
	store *sqlite.Store
	now   time.Time
	s     *Sweeper
	wakes int
	seen  map[string]bool // delivery jobs read by earlier sweeps
}

func newSweepRig(t *testing.T) *sweepRig {
	r := &sweepRig{t: t, ctx: context.Background(), store: sqlitetest.Open(t), now: time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC), seen: map[string]bool{}}
	r.store.NowFunc = func() time.Time { return r.now }
	sink, err := notify.ParseSink("webhook:https://hooks.example/sked")
	if err != nil {
		t.Fatal(err)
	}
	r.s = &Sweeper{Store: r.store, NowFunc: r.store.Now,
		Notifier: &notify.Notifier{Store: r.store, Sinks: []notify.Sink{sink}},
		WakeFunc: func() { r.wakes++ },
		Logger:   slog.New(slog.DiscardHandler),
		since:    r.now.Add(-time.Hour),
	}
	return r
}

func (r *sweepRig) create(p db.JobCreateParams) db.Job {
	r.t.Helper()
	j, _, err := r.store.JobCreate(r.ctx, p)
	if err != nil {
		r.t.Fatal(err)
	}
	r.seen[j.ID] = true // the test's own jobs are not deliveries
	return j
}

// finish claims the due job of type typ and records outcome for it.
func (r *sweepRig) finish(typ string, outcome db.Outcome) {
	r.t.Helper()
	r.end(r.claim(typ), outcome)
}

// claim claims the due job of type typ.
func (r *sweepRig) claim(typ string) db.Job {
	r.t.Helper()
	claims, err := r.store.RunClaim(r.ctx, db.RunClaimParams{WorkerID: "w1", Types: []string{typ}, Max: 1})
	if err != nil || len(claims) != 1 {
		r.t.Fatalf("claim %s: %d claims, %v", typ, len(claims), err)
	}
	return claims[0].Job
}

// end records outcome for the run of j, as claimed.
func (r *sweepRig) end(j db.Job, outcome db.Outcome) {
	r.t.Helper()
	if _, err := r.store.RunFinish(r.ctx, db.RunFinishParams{JobID: j.ID, Generation: j.LeaseGeneration, Outcome: outcome, Error: "boom", Output: "output of " + j.Type}); err != nil {
		r.t.Fatal(err)
	}
}

// sweep runs one pass and returns the events it enqueued for the webhook,
// in the order of their delivery jobs.
func (r *sweepRig) sweep() []notify.Event {
	r.t.Helper()
	r.s.runOnce(r.ctx)
	return r.told()
}

// told returns the events enqueued for the webhook since last read, in the
// order of their delivery jobs.
func (r *sweepRig) told() []notify.Event {
	r.t.Helper()
	jobs, _, err := r.store.JobList(r.ctx, db.JobListParams{Type: notify.TypeHTTP, Limit: 500})
	if err != nil {
		r.t.Fatal(err)
	}
	var out []notify.Event
	for i := len(jobs) - 1; i >= 0; i-- { // oldest first
		j := jobs[i]
		if !strings.HasPrefix(j.IdempotencyKey, "notify:") || r.seen[j.ID] {
			continue
		}
		r.seen[j.ID] = true
		var p struct{ Body notify.Event }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, p.Body)
	}
	return out
}

// wantOne fails the test unless events are one of kind; when says when.
func (r *sweepRig) wantOne(events []notify.Event, kind, when string) {
	r.t.Helper()
	if len(events) != 1 || events[0].Kind != kind {
		r.t.Fatalf("%s: told %v; want one %s", when, keys(events), kind)
	}
}

// watched creates a schedule of type r, every ten minutes, with a switch
// of an hour.
func (r *sweepRig) watched() db.Job {
	r.t.Helper()
	return r.create(db.JobCreateParams{Type: "r", Schedule: "@every 10m", ExpectSuccessWithin: time.Hour})
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
// once (one event however many sweeps), and recovers once after a run
// succeeds.
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
	if got := keys(ev); len(got) != 1 || got[0] != wantKey {
		t.Fatalf("past the limit: events %v; want one %q", got, wantKey)
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
	if got := keys(ev); len(got) != 1 || got[0] != wantKey {
		t.Fatalf("after a success: events %v; want one %q", got, wantKey)
	}
}

// failsCreate is the notifier's store, whose JobCreate fails while failing
// is set, as when the database is lost between the transaction that marks
// a schedule quiet and the enqueue of its notification.
type failsCreate struct {
	*sqlite.Store
	failing *bool
}

func (s failsCreate) JobCreate(ctx context.Context, p db.JobCreateParams) (db.Job, bool, error) {
	if *s.failing {
		return db.Job{}, false, errors.New("database out of reach")
	}
	return s.Store.JobCreate(ctx, p)
}

// A schedule gone quiet is told from its timeline, where the sweep that
// marked it put the quiet event: a notification whose enqueue failed is
// enqueued by the next sweep, though the job is quiet already and no
// sweep marks it again; and it is told once.
func TestSweeper_QuietToldAfterAFailedEnqueue(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	failing := true
	r.s.Notifier = &notify.Notifier{Store: failsCreate{r.store, &failing}, Sinks: r.s.Notifier.(*notify.Notifier).Sinks}
	j := r.watched()
	r.now = r.now.Add(2 * time.Hour)
	if ev := r.sweep(); len(ev) != 0 {
		t.Fatalf("told %v while the enqueue fails", keys(ev))
	}
	if got, _ := r.store.JobGet(r.ctx, j.ID); got.QuietSince == nil {
		t.Fatal("the schedule did not go quiet")
	}
	failing = false
	r.now = r.now.Add(time.Minute)
	ev := r.sweep()
	r.wantOne(ev, notify.KindQuiet, "the sweep after the failed enqueue")
	if want := "quiet:" + j.ID + ":" + r.now.Add(-time.Minute).Format(time.RFC3339Nano); ev[0].Key != want || ev[0].ExpectSuccessWithin != db.Duration(time.Hour) {
		t.Fatalf("told %+v; want key %q, the switch of an hour", ev[0], want)
	}
	if ev := r.sweep(); len(ev) != 0 {
		t.Fatalf("the sweep after told %v; want nothing", keys(ev))
	}
}

// restart starts a new sweeper, as a restarted server does, and stops it
// once a sweep found nothing more to tell (see oneSweep); later sweeps are
// that sweeper's. It returns what it told: on the rig's clock, which does
// not move meanwhile, that of its first sweep.
func (r *sweepRig) restart() []notify.Event {
	r.t.Helper()
	ctx, cancel := context.WithCancel(r.ctx)
	s := &Sweeper{Store: oneSweep{r.store, cancel}, NowFunc: r.store.Now, Notifier: r.s.Notifier, Logger: r.s.Logger, Interval: time.Millisecond}
	if err := s.Run(ctx); err != nil {
		r.t.Fatal(err)
	}
	s.Store, r.s = r.store, s
	return r.told()
}

// oneSweep is a store that ends its sweeper's context once the sweeper
// read the timeline and found nothing new, the last step of a sweep that
// has nothing (more) to tell: a first sweep that tells something is
// followed by a second.
type oneSweep struct {
	*sqlite.Store
	done context.CancelFunc
}

func (s oneSweep) EventsAfter(ctx context.Context, after int64, kinds []string, limit int) ([]db.Event, error) {
	events, err := s.Store.EventsAfter(ctx, after, kinds, limit)
	if err == nil && len(events) == 0 {
		s.done()
	}
	return events, err
}

// A schedule that had no slot while sked was down is not quiet when it
// comes back: the window starts again at the restart, so its next slot can
// run first. A whole window after the restart with no success, it is.
func TestSweeper_NotQuietAfterDowntime(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	j := r.watched()
	r.sweep()                        // sked up, watching
	r.now = r.now.Add(3 * time.Hour) // then down for three hours
	if ev := r.restart(); len(ev) != 0 {
		t.Fatalf("the first sweep after three hours down told %v; want nothing: the schedule had no chance to run", keys(ev))
	}
	if got, _ := r.store.JobGet(r.ctx, j.ID); got.QuietSince != nil {
		t.Fatalf("quiet since %v, the restart", got.QuietSince)
	}
	r.now = r.now.Add(time.Hour)
	if ev := r.sweep(); len(ev) != 0 {
		t.Fatalf("a window after the restart: %v, want nothing yet", keys(ev))
	}
	r.now = r.now.Add(1500 * time.Millisecond)
	r.wantOne(r.sweep(), notify.KindQuiet, "past a window after the restart with no success")
}

// failsWatchStartOnce is oneSweep whose first JobWatchStart fails, as when
// the database is out of reach as sked starts.
type failsWatchStartOnce struct {
	oneSweep
	failed *bool
}

func (s failsWatchStartOnce) JobWatchStart(ctx context.Context) (int, error) {
	if !*s.failed {
		*s.failed = true
		return 0, errors.New("database out of reach")
	}
	return s.oneSweep.JobWatchStart(ctx)
}

// A sweeper back from downtime whose start of the windows failed does not
// sweep for quiet schedules until it has started them: it tries again at
// each sweep. Sweeping on, it would call quiet every schedule the downtime
// kept from running.
func TestSweeper_NotQuietAfterDowntimeWhenWatchStartFails(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	j := r.watched()
	r.sweep()                        // sked up, watching
	r.now = r.now.Add(3 * time.Hour) // then down for three hours
	ctx, cancel := context.WithCancel(r.ctx)
	failed := false
	s := &Sweeper{Store: failsWatchStartOnce{oneSweep{r.store, cancel}, &failed}, NowFunc: r.store.Now, Notifier: r.s.Notifier, Logger: r.s.Logger, Interval: time.Millisecond}
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Fatal("the sweeper did not start the windows")
	}
	if ev := r.told(); len(ev) != 0 {
		t.Fatalf("the first sweep after three hours down, its start of the windows failed, told %v; want nothing", keys(ev))
	}
	s.runOnce(r.ctx) // the start of the windows succeeds now
	if ev := r.told(); len(ev) != 0 {
		t.Fatalf("the second sweep after the restart told %v; want nothing", keys(ev))
	}
	if got, _ := r.store.JobGet(r.ctx, j.ID); got.QuietSince != nil || got.WatchFrom == nil || !got.WatchFrom.Equal(r.now) {
		t.Fatalf("quiet since %v, window started again at %v; want not quiet, the window from %v", got.QuietSince, got.WatchFrom, r.now)
	}
}

// outage is the rig's store while down is set: each call the sweeper makes
// fails, as when its database is out of reach.
type outage struct {
	*sqlite.Store
	down *bool
}

var errOutage = errors.New("database out of reach")

func (s outage) JobResumeDue(ctx context.Context) (int, error) {
	if *s.down {
		return 0, errOutage
	}
	return s.Store.JobResumeDue(ctx)
}

func (s outage) JobQuietSweep(ctx context.Context) ([]db.Job, error) {
	if *s.down {
		return nil, errOutage
	}
	return s.Store.JobQuietSweep(ctx)
}

func (s outage) JobWatchStart(ctx context.Context) (int, error) {
	if *s.down {
		return 0, errOutage
	}
	return s.Store.JobWatchStart(ctx)
}

func (s outage) EventsAfter(ctx context.Context, after int64, kinds []string, limit int) ([]db.Event, error) {
	if *s.down {
		return nil, errOutage
	}
	return s.Store.EventsAfter(ctx, after, kinds, limit)
}

// A database out of reach for longer than db.WatchGap while the server
// stays up is downtime: the first sweep once it is back starts the
// windows again, so that a schedule whose slots passed meanwhile is not
// quiet at once but a whole window later. A shorter outage keeps them.
func TestSweeper_NotQuietAfterDatabaseOutage(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	down := false
	r.s.Store = outage{r.store, &down}
	j := r.watched()
	r.sweep() // watching
	down = true
	for range 18 { // three hours of failed sweeps, ten minutes apart
		r.now = r.now.Add(10 * time.Minute)
		r.sweep()
	}
	down = false
	if ev := r.sweep(); len(ev) != 0 {
		t.Fatalf("the first sweep after three hours without the database told %v; want nothing: the schedule had no chance to run", keys(ev))
	}
	back := r.now
	if got, _ := r.store.JobGet(r.ctx, j.ID); got.QuietSince != nil || got.WatchFrom == nil || !got.WatchFrom.Equal(back) {
		t.Fatalf("quiet since %v, window started again at %v; want not quiet, the window from %v", got.QuietSince, got.WatchFrom, back)
	}
	r.now = back.Add(time.Hour)
	if ev := r.sweep(); len(ev) != 0 {
		t.Fatalf("a window after the database came back: %v, want nothing yet", keys(ev))
	}
	r.now = r.now.Add(1500 * time.Millisecond)
	r.wantOne(r.sweep(), notify.KindQuiet, "past a window after the database came back with no success")

	// A short outage, as long as db.WatchGap, is not downtime: a schedule
	// overdue as the database comes back is quiet at the first sweep.
	k := r.watched()
	r.now = r.now.Add(59 * time.Minute)
	r.sweep()
	down = true
	r.now = r.now.Add(db.WatchGap) // since the last record of the watch, by the sweep above
	r.sweep()
	down = false
	ev := r.sweep()
	r.wantOne(ev, notify.KindQuiet, "the first sweep after a short outage")
	if ev[0].JobID != k.ID {
		t.Fatalf("told %+v; want job %s quiet", ev[0], k.ID)
	}
}

// A restart is not downtime: a server back within db.WatchGap of its last
// sweep keeps the windows, and a schedule already overdue is quiet at its
// first sweep.
func TestSweeper_QuietAfterQuickRestart(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	r.watched()
	r.now = r.now.Add(59 * time.Minute)
	r.sweep()
	r.now = r.now.Add(90 * time.Second)
	r.wantOne(r.restart(), notify.KindQuiet, "the first sweep after a quick restart")
}

// A quiet schedule whose run succeeds is told recovered even when a pause
// asked for during that run leaves it paused, where no sweep looks.
func TestSweeper_RecoveredWhenPaused(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	j := r.watched()
	r.now = r.now.Add(2 * time.Hour)
	r.wantOne(r.sweep(), notify.KindQuiet, "two hours with no run")
	running := r.claim("r")
	if _, err := r.store.JobPause(r.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	r.end(running, db.OutcomeSucceeded)
	r.wantOne(r.sweep(), notify.KindRecovered, "after the success, the job paused")
}

// Give-ups are told from the jobs' timeline, each once, with the error and
// output of the run that gave up: a one-off job that gave up as job_dead,
// a schedule's firing as run_gave_up, and its next
// success as schedule_recovered; a later sweep tells only what is new.
func TestSweeper_TellsTheTimeline(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	one := r.create(db.JobCreateParams{Type: "one", MaxAttempts: 1, Name: "once"})
	r.finish("one", db.OutcomeFailed)
	rec := r.create(db.JobCreateParams{Type: "rec", MaxAttempts: 1, Schedule: "@every 1m", Name: "every-minute"})
	r.now = r.now.Add(time.Minute)
	r.finish("rec", db.OutcomeFailed)
	ev := r.sweep()
	slices.SortFunc(ev, func(a, b notify.Event) int { return strings.Compare(a.Kind, b.Kind) }) // job_dead, run_gave_up
	if len(ev) != 2 || ev[0].Kind != notify.KindDead || ev[0].JobID != one.ID || ev[0].JobName != "once" || ev[0].Error != "boom" || ev[0].Output != "output of one" ||
		ev[1].Kind != notify.KindGaveUp || ev[1].JobID != rec.ID || ev[1].Error != "boom" || ev[1].Attempts != 1 || ev[1].Output != "output of rec" {
		t.Fatalf("first sweep told %+v; want job_dead of %s and run_gave_up of %s", ev, one.ID, rec.ID)
	}
	if r.wakes == 0 {
		t.Errorf("the dispatcher was not woken for the notifications")
	}
	r.now = r.now.Add(time.Minute)
	r.finish("rec", db.OutcomeSucceeded)
	if ev := r.sweep(); len(ev) != 1 || ev[0].Kind != notify.KindRecovered || ev[0].JobID != rec.ID {
		t.Fatalf("second sweep told %v; want the recovery alone", keys(ev))
	}
	if ev := r.sweep(); len(ev) != 0 {
		t.Fatalf("third sweep told %v; want nothing", keys(ev))
	}
}

// A job's own settings choose its events: one that asks only for
// recoveries is not told it gave up.
func TestSweeper_JobSettings(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	r.create(db.JobCreateParams{Type: "rec", MaxAttempts: 1, Schedule: "@every 1m", Notify: &db.Notify{On: []string{notify.OnRecovered}}})
	r.now = r.now.Add(time.Minute)
	r.finish("rec", db.OutcomeFailed)
	if ev := r.sweep(); len(ev) != 0 {
		t.Fatalf("told %v; the job asked for recoveries only", keys(ev))
	}
	r.now = r.now.Add(time.Minute)
	r.finish("rec", db.OutcomeSucceeded)
	if ev := r.sweep(); len(ev) != 1 || ev[0].Kind != notify.KindRecovered {
		t.Fatalf("told %v; want the recovery", keys(ev))
	}
}

// A job that asks for "failing" is told when its schedule begins to fail,
// not at each firing that fails after, and again after it recovered.
func TestSweeper_FailingOnce(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	r.create(db.JobCreateParams{Type: "rec", MaxAttempts: 1, Schedule: "@every 1m", Notify: &db.Notify{On: []string{notify.OnFailing, notify.OnRecovered}}})
	for _, step := range []struct {
		outcome db.Outcome
		want    string // the kind told, "" for none
	}{
		{db.OutcomeFailed, notify.KindGaveUp},
		{db.OutcomeFailed, ""},
		{db.OutcomeFailed, ""},
		{db.OutcomeSucceeded, notify.KindRecovered},
		{db.OutcomeFailed, notify.KindGaveUp},
	} {
		r.now = r.now.Add(time.Minute)
		r.finish("rec", step.outcome)
		ev := r.sweep()
		if step.want == "" && len(ev) != 0 || step.want != "" && (len(ev) != 1 || ev[0].Kind != step.want) {
			t.Fatalf("after a run %s: told %v; want %q", step.outcome, keys(ev), step.want)
		}
		if step.want == notify.KindGaveUp && !ev[0].FirstFailure {
			t.Errorf("the first give-up is not marked firstFailure: %+v", ev[0])
		}
	}
}

// A notification or ping that gave up is logged, not announced: its
// announcement would go to the same sinks and die the same way, again and
// again.
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
	// A sweeper started since (a restart) reads them again but does not
	// log them again: the one before it did.
	logs.Reset()
	r.s.eventsAfter, r.s.started = 0, r.now.Add(loggedBefore+time.Second)
	r.sweep()
	if n := strings.Count(logs.String(), `msg="notification not delivered"`); n != 0 {
		t.Errorf("after a restart, %d undelivered notifications logged again, want none:\n%s", n, logs.String())
	}
}

// Run tells the events of the hour before it started, not older ones.
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
	// once its first sweep has run.
	ctx, cancel := context.WithCancel(r.ctx)
	r.s.WakeFunc = cancel
	r.s.Interval = time.Hour
	if err := r.s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := r.sweep(); len(ev) != 1 || ev[0].JobID != ids[1] {
		t.Fatalf("announced %v, want only job %s", keys(ev), ids[1])
	}
}

// cutOff gives the sweeper a real store, closed: each call fails, as
// through an outage of the database. It returns the sweeper's log from
// then on.
func (r *sweepRig) cutOff() *bytes.Buffer {
	r.t.Helper()
	closed, err := sqlite.Open(r.ctx, filepath.Join(r.t.TempDir(), "closed.db"))
	if err != nil {
		r.t.Fatal(err)
	}
	closed.Close()
	r.s.Store = closed
	var logs bytes.Buffer
	r.s.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	return &logs
}

// A failing store is logged and the sweep goes on; once the sweeper is
// stopping, its failures are not logged.
func TestSweeper_Errors(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	logs := r.cutOff()
	r.s.runOnce(r.ctx)
	for _, what := range []string{"resume paused jobs", "check quiet schedules", "read the jobs' events"} {
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
	// A sink that cannot be told: an event of a job whose settings name a
	// sink that does not parse is logged and passed over.
	r.s.Store = r.store
	r.create(db.JobCreateParams{Type: "a", MaxAttempts: 1, Notify: &db.Notify{Sinks: []string{"nonsense"}}})
	r.finish("a", db.OutcomeFailed)
	r.sweep()
	if !strings.Contains(logs.String(), `msg=notify`) {
		t.Errorf("an undeliverable event is not logged:\n%s", logs.String())
	}
}

// TestSweeper_OutageLogsFew: sweeps on a store that fails every call, as
// through an outage of the database, log each task's failures at the 1st
// and 10th sweep in a row, not at every sweep, and once each that it
// works again when the store is back.
func TestSweeper_OutageLogsFew(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	logs := r.cutOff()
	r.s.WatchStart(r.ctx) // fails: each sweep tries again
	for range 30 {
		r.s.runOnce(r.ctx)
	}
	tasks := []string{"resume paused jobs", "watch for quiet schedules", "read the jobs' events"}
	for _, what := range tasks {
		if n := strings.Count(logs.String(), "msg=\""+what+"\""); n != 2 {
			t.Errorf("%q logged %d times in a row of 30 or 31 failures; want 2 (the 1st and the 10th)", what, n)
		}
	}
	logs.Reset()
	r.s.Store = r.store
	r.s.runOnce(r.ctx)
	r.s.runOnce(r.ctx)
	for _, what := range tasks {
		if n := strings.Count(logs.String(), "msg=\""+what+" works again\""); n != 1 {
			t.Errorf("%q logged as working again %d times; want 1:\n%s", what, n, logs.String())
		}
	}
}

// The store tells the sweeper of news as it commits it (EventsFunc): a
// firing that gave up, not a plain success; a schedule gone quiet; a quiet
// schedule's success, whose recovery is on the timeline. Told News, a sweeper waiting for its next sweep
// delivers the timeline at once, without the rest of a sweep.
func TestSweeper_News(t *testing.T) {
	t.Parallel()
	r := newSweepRig(t)
	var events int
	r.store.EventsFunc = func() { events++ }
	r.create(db.JobCreateParams{Type: "ok"})
	r.finish("ok", db.OutcomeSucceeded)
	if events != 0 {
		t.Fatalf("a plain success told %d news of events; want none", events)
	}
	j := r.create(db.JobCreateParams{Type: "q", Schedule: "@every 10m", ExpectSuccessWithin: time.Hour})
	r.now = r.now.Add(2 * time.Hour)
	r.sweep()
	if got, _ := r.store.JobGet(r.ctx, j.ID); got.QuietSince == nil || events != 1 {
		t.Fatalf("quiet since %v, %d news of events; want the schedule gone quiet, told once", got.QuietSince, events)
	}
	r.finish("q", db.OutcomeSucceeded)
	if events != 2 {
		t.Fatalf("a quiet schedule's success told %d news of events; want one more", events-1)
	}

	r.store.EventsFunc = r.s.News
	ctx, cancel := context.WithCancel(r.ctx)
	r.s.WakeFunc = cancel // called once the timeline's notifications are enqueued
	done := make(chan bool)
	go func() { done <- r.s.waitToSweep(ctx, nil) }()
	r.create(db.JobCreateParams{Type: "dies", MaxAttempts: 1})
	r.finish("dies", db.OutcomeFailed)
	if <-done {
		t.Fatal("waitToSweep ended for a sweep; want it ended by the delivery's wake-up")
	}
	// Among the deliveries, not by their order: ids made in one
	// millisecond of the test clock while parallel tests make others need
	// not sort by creation.
	jobs, _, err := r.store.JobList(r.ctx, db.JobListParams{Type: notify.TypeHTTP})
	if err != nil || !slices.ContainsFunc(jobs, func(j db.Job) bool { return strings.Contains(string(j.Payload), `"kind":"job_dead"`) }) {
		t.Fatalf("%d deliveries, %v; want the job_dead notification among them", len(jobs), err)
	}
}
