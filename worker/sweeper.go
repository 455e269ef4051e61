package worker

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/failurelog"
	"github.com/sked-dev/sked/notify"
)

// DefaultSweepInterval is how often the sweeper runs.
const DefaultSweepInterval = 5 * time.Second

// Sweeper keeps schedules honest between claims: it resumes jobs whose
// pause-until has passed, raises the dead-man's switch of schedules that
// stopped succeeding (a success clears it, as it is recorded), and tells
// people what happened: it delivers the store's timeline of give-ups,
// recoveries, pinged runs and schedules gone quiet (db.Store.EventsAfter
// of db.OutboxKinds, written in the transactions that made them), so that
// a delivery that failed is tried again at the next sweep. A notification
// that gave up (see notify.IsDelivery) is logged, not announced: the
// announcement would fail the same way.
type Sweeper struct {
	Store interface {
		JobResumeDue(ctx context.Context) (int, error)
		JobQuietSweep(ctx context.Context) ([]db.Job, error)
		JobWatchStart(ctx context.Context) (int, error)
		JobGet(ctx context.Context, id string) (db.Job, error)
		EventsAfter(ctx context.Context, after int64, kinds []string, limit int) ([]db.Event, error)
	}
	// Notifier tells people; nil tells nobody.
	Notifier interface {
		Deliver(ctx context.Context, j db.Job, ev db.Event) error
	}
	// WakeFunc is called after jobs were resumed or notifications
	// enqueued; may be nil.
	WakeFunc func()
	// NowFunc is the store's clock. Never nil.
	NowFunc  func() time.Time
	Interval time.Duration // zero: DefaultSweepInterval
	Logger   *slog.Logger  // nil: discard

	eventsAfter int64     // the last event of the timeline looked at
	since       time.Time // events before this are not told
	started     time.Time // when Run began: see loggedBefore
	// watchPending is set by WatchStart, and by a quiet sweep that
	// failed, until JobWatchStart succeeds: until then no sweep looks for
	// quiet schedules, which after downtime (of sked or of its database)
	// would find every one whose window had not started again. watchAsked
	// says that WatchStart was called.
	watchPending, watchAsked bool

	// The failures in a row of each of a sweep's reads and writes of the
	// store, logged as a failurelog.Log logs them: an outage of the
	// database is a few lines, not one per sweep and task.
	resumeFails, quietFails, watchFails, eventsFails failurelog.Log

	wake     chan struct{} // buffered(1): sweep now; made by wakeOnce
	news     chan struct{} // buffered(1): deliver the timeline now; made by wakeOnce
	wakeOnce sync.Once
}

// loggedBefore is how long before its start a sweeper takes an undelivered
// notification to have been logged by the one before it (which read the
// timeline at least every DefaultSweepInterval); those since are logged,
// some of them a second time, rather than none.
const loggedBefore = time.Minute

// outboxPage bounds the events one read of the timeline returns.
const outboxPage = 500

// Wake makes the sweeper sweep at once, as when a test clock moved. It
// never blocks.
func (s *Sweeper) Wake() { s.chans(); signal(s.wake) }

// News makes the sweeper deliver the store's timeline at once, without the
// rest of a sweep: events of runs were written. It never blocks.
func (s *Sweeper) News() { s.chans(); signal(s.news) }

// logger is Logger, or one that discards.
func (s *Sweeper) logger() *slog.Logger { return orDiscard(s.Logger) }

// chans makes the wake-up channels, once.
func (s *Sweeper) chans() {
	s.wakeOnce.Do(func() { s.wake, s.news = make(chan struct{}, 1), make(chan struct{}, 1) })
}

// Run sweeps every Interval until ctx is done.
func (s *Sweeper) Run(ctx context.Context) error {
	// The events of the last hour are told again after a restart; their
	// idempotency keys keep each to one notification.
	s.started = s.NowFunc()
	s.since = s.started.Add(-time.Hour)
	if !s.watchAsked {
		s.WatchStart(ctx)
	}
	t := time.NewTicker(cmp.Or(s.Interval, DefaultSweepInterval))
	defer t.Stop()
	for {
		s.runOnce(ctx)
		if !s.waitToSweep(ctx, t.C) {
			return nil
		}
	}
}

// waitToSweep delivers the timeline whenever News is called, until the next
// sweep is due (true) or ctx ends (false).
func (s *Sweeper) waitToSweep(ctx context.Context, tick <-chan time.Time) bool {
	s.chans()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick:
			return true
		case <-s.wake:
			return true
		case <-s.news:
			s.deliverEvents(ctx)
		}
	}
}

func (s *Sweeper) runOnce(ctx context.Context) {
	n, err := s.Store.JobResumeDue(ctx)
	s.note(ctx, &s.resumeFails, "resume paused jobs", err)
	if err == nil && n > 0 {
		s.logger().Info("resumed paused jobs", "jobs", n)
		if s.WakeFunc != nil {
			s.WakeFunc()
		}
	}
	if s.watchStarted(ctx) {
		quiet, err := s.Store.JobQuietSweep(ctx)
		s.note(ctx, &s.quietFails, "check quiet schedules", err)
		if err != nil && ctx.Err() == nil {
			// The database may be out of reach: the sweeps that record
			// the watch fail, as when sked is down. Once it is back, a
			// sweep first starts the windows again if that lasted.
			s.watchPending = true
		}
		for _, j := range quiet { // told from the timeline, below
			s.logger().Warn("schedule gone quiet", "job_id", j.ID, "name", j.Name, "expect_success_within", time.Duration(j.ExpectSuccessWithin))
		}
	}
	s.deliverEvents(ctx)
}

// WatchStart starts the dead-man's switches' windows again if sked was
// down (Store.JobWatchStart), so that a schedule whose slots passed
// meanwhile runs before it can be quiet. sked serve calls it as it starts,
// before its API serves, so that the windows start at its start (later, a
// test clock moved meanwhile would pass for downtime); Run calls it unless
// it was. When it fails, each sweep tries again, and looks for quiet
// schedules only once it has succeeded; a sweep that failed to look for
// them calls JobWatchStart likewise. It is not to be called once Run
// runs.
func (s *Sweeper) WatchStart(ctx context.Context) {
	s.watchAsked, s.watchPending = true, true
	s.watchStarted(ctx)
}

// watchStarted reports whether the dead-man's switches may be swept: once
// JobWatchStart, which WatchStart asks for, has succeeded.
func (s *Sweeper) watchStarted(ctx context.Context) bool {
	if !s.watchPending {
		return true
	}
	n, err := s.Store.JobWatchStart(ctx)
	s.note(ctx, &s.watchFails, "watch for quiet schedules", err)
	if err != nil {
		return false
	}
	s.watchPending = false
	if n > 0 {
		s.logger().Info("sked was down: the dead-man's switches' windows start again", "schedules", n)
	}
	return true
}

// deliverEvents tells people the events of the store's timeline written
// since the last sweep. An event whose delivery failed for the store is
// tried again at the next sweep; one the job's own settings cannot deliver
// (db.ErrInvalid) is logged and passed over.
func (s *Sweeper) deliverEvents(ctx context.Context) {
	if s.Notifier == nil {
		return
	}
	told := 0
	defer func() {
		if told > 0 && s.WakeFunc != nil {
			s.WakeFunc()
		}
	}()
	for {
		events, err := s.Store.EventsAfter(ctx, s.eventsAfter, db.OutboxKinds, outboxPage)
		s.note(ctx, &s.eventsFails, "read the jobs' events", err)
		if err != nil {
			return
		}
		for _, ev := range events {
			if !ev.At.Before(s.since) {
				if err := s.deliver(ctx, ev); err != nil && !errors.Is(err, db.ErrInvalid) && !errors.Is(err, db.ErrNotFound) {
					s.logErr(ctx, "notify", err)
					return
				}
				told++
			}
			s.eventsAfter = ev.ID
		}
		if len(events) < outboxPage {
			return
		}
	}
}

// deliver tells people about ev.
func (s *Sweeper) deliver(ctx context.Context, ev db.Event) error {
	j, err := s.Store.JobGet(ctx, ev.JobID)
	if err != nil {
		return err // pruned since: nothing to tell
	}
	if notify.IsDelivery(j.IdempotencyKey) {
		if ev.Kind == db.EventGaveUp && !ev.At.Before(s.started.Add(-loggedBefore)) {
			s.logger().Error("notification not delivered", "job_id", j.ID, "attempts", j.Attempt, "err", j.LastError)
		}
		return nil
	}
	err = s.Notifier.Deliver(ctx, j, ev)
	if err != nil && errors.Is(err, db.ErrInvalid) {
		s.logErr(ctx, "notify", err)
	}
	return err
}

// note notes how the task what of a sweep ended, err, in its row of
// failures, f; failures while the sweeper stops are not logged.
func (s *Sweeper) note(ctx context.Context, f *failurelog.Log, what string, err error) {
	switch {
	case err == nil:
		f.Worked(s.logger(), what+" works again")
	case ctx.Err() == nil:
		f.Failed(s.logger(), slog.LevelError, what, err)
	}
}

func (s *Sweeper) logErr(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		s.logger().Error(what, "err", err)
	}
}
