package worker

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/notify"
)

// DefaultSweepInterval is how often the sweeper runs.
const DefaultSweepInterval = 5 * time.Second

// Sweeper keeps schedules honest between claims: it resumes jobs whose
// pause-until has passed, raises and clears the dead-man's switch of
// schedules that stopped succeeding, and tells people about dead jobs and
// quiet schedules. A dead notification (see notify.IsDelivery) is logged,
// not announced: the announcement would fail the same way.
type Sweeper struct {
	Store interface {
		JobResumeDue(ctx context.Context) (int, error)
		JobQuietSweep(ctx context.Context) ([]db.QuietChange, error)
		JobDeadSince(ctx context.Context, since time.Time, limit int) ([]db.Job, error)
	}
	// NotifyFunc delivers an event; nil drops them.
	NotifyFunc func(ctx context.Context, e notify.Event) error
	// WakeFunc is called after jobs were resumed; may be nil.
	WakeFunc func()
	// NowFunc is the store's clock. Never nil.
	NowFunc  func() time.Time
	Interval time.Duration // zero: DefaultSweepInterval
	Logger   *slog.Logger  // nil: discard

	// OnQuietFunc, when set, observes every quiet change (metrics).
	OnQuietFunc func(db.QuietChange)

	deadSince time.Time // jobs dead at or after this are still to be announced

	wake     chan struct{} // buffered(1): sweep now; made by wakeOnce
	wakeOnce sync.Once
}

// Wake makes the sweeper sweep at once, as when a test clock moved. It never
// blocks.
func (s *Sweeper) Wake() { signal(s.wakeC()) }

func (s *Sweeper) wakeC() chan struct{} {
	s.wakeOnce.Do(func() { s.wake = make(chan struct{}, 1) })
	return s.wake
}

// Run sweeps every Interval until ctx is done.
func (s *Sweeper) Run(ctx context.Context) error {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	// Deaths of the last hour are announced again after a restart; their
	// idempotency keys keep each to one notification.
	s.deadSince = s.NowFunc().Add(-time.Hour)
	t := time.NewTicker(cmp.Or(s.Interval, DefaultSweepInterval))
	defer t.Stop()
	for {
		s.runOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.wakeC():
		}
	}
}

func (s *Sweeper) runOnce(ctx context.Context) {
	if n, err := s.Store.JobResumeDue(ctx); err != nil {
		s.logErr(ctx, "resume paused jobs", err)
	} else if n > 0 {
		s.Logger.Info("resumed paused jobs", "jobs", n)
		if s.WakeFunc != nil {
			s.WakeFunc()
		}
	}
	changes, err := s.Store.JobQuietSweep(ctx)
	if err != nil {
		s.logErr(ctx, "check quiet schedules", err)
	}
	for _, c := range changes {
		if s.OnQuietFunc != nil {
			s.OnQuietFunc(c)
		}
		j := c.Job
		if c.Quiet {
			s.Logger.Warn("schedule gone quiet", "job_id", j.ID, "expect_success_within", time.Duration(j.ExpectSuccessWithin))
			s.notify(ctx, notify.Quiet(j))
			continue
		}
		s.Logger.Info("schedule recovered", "job_id", j.ID)
		if j.LastSuccessAt != nil {
			s.notify(ctx, notify.Recovered(j, *j.LastSuccessAt))
		}
	}
	dead, err := s.Store.JobDeadSince(ctx, s.deadSince, 100)
	if err != nil {
		s.logErr(ctx, "list dead jobs", err)
	}
	for _, j := range dead {
		if notify.IsDelivery(j.IdempotencyKey) {
			s.Logger.Error("notification not delivered", "job_id", j.ID, "attempts", j.Attempt, "err", j.LastError)
		} else {
			s.notify(ctx, notify.Dead(j))
		}
		s.deadSince = j.UpdatedAt
	}
}

func (s *Sweeper) notify(ctx context.Context, e notify.Event) {
	if s.NotifyFunc == nil {
		return
	}
	if err := s.NotifyFunc(ctx, e); err != nil {
		s.logErr(ctx, "notify", err)
	}
}

func (s *Sweeper) logErr(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		s.Logger.Error(what, "err", err)
	}
}
