package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sked-dev/sked/clock"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
)

// newClock returns the guarded wall clock of the process, or, with a test
// clock, the guarded virtual clock and the virtual clock itself. Every step
// is logged, then handed to also (which may be nil).
func newClock(testClock time.Time, log *slog.Logger, also func(clock.Step)) (*clock.Guard, *clock.Virtual) {
	onStep := func(s clock.Step) {
		if s.Backward() {
			log.Warn("wall clock stepped back; firing held until it passes the latest time seen",
				"from", s.From, "to", s.To)
		} else {
			log.Warn("wall clock stepped forward; slots it jumped over are recorded missed (clock_step)",
				"from", s.From, "to", s.To)
		}
		if also != nil {
			also(s)
		}
	}
	if testClock.IsZero() {
		return clock.NewGuard(time.Now, time.Now, onStep), nil
	}
	v := clock.NewVirtual(testClock)
	return clock.NewGuard(v.Now, v.Elapsed, onStep), v
}

// clockReady is readyFunc with the clock guard: not ready while firing is
// held after the wall clock went back.
func clockReady(g *clock.Guard, store func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if hold, until := g.Holding(); hold {
			return fmt.Errorf("the wall clock went back: firing is held until it passes %s, so that no slot fires twice", until.Format(time.RFC3339))
		}
		if store == nil {
			return nil
		}
		return store(ctx)
	}
}

// useClock hands the guarded clock to a SQLite store. PostgreSQL keeps the
// database's own clock, which a test clock cannot move.
func useClock(store db.Store, g *clock.Guard, virtual bool) error {
	s, ok := store.(*sqlite.Store)
	if !ok {
		if virtual {
			return fmt.Errorf("--test-clock needs the SQLite store; PostgreSQL keeps time with now()")
		}
		return nil
	}
	s.UseClock(g)
	return nil
}

// movedClock is the test clock as POST /test/clock moves it. Before it
// jumps forward, the pools renew the leases of the jobs they run to last as
// much longer: a run still going would have renewed its lease all along
// the time jumped over, so a jump expires no lease of this process's runs,
// while the lease of a worker that stopped renewing expires as it would.
// The leases of remote workers (sked work) are not renewed: their
// renewals come in real time, and a jump past their lease expires them.
// After every move it wakes the sweeper, so that pauses that end and
// schedules that go quiet are seen on the test clock's time, not at the
// next sweep on the real one.
type movedClock struct {
	*clock.Virtual
	pool  pools
	moved func()
	mu    sync.Mutex // one move at a time
}

// Set moves the clock to t.
func (c *movedClock) Set(t time.Time) { c.move(func(time.Time) time.Time { return t }) }

// Advance moves the clock by d.
func (c *movedClock) Advance(d time.Duration) {
	c.move(func(now time.Time) time.Time { return now.Add(d) })
}

func (c *movedClock) move(to func(now time.Time) time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	t := to(now)
	if t.After(now) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		defer c.pool.RenewAhead(ctx, t.Sub(now))()
	}
	c.Virtual.Set(t)
	c.moved()
}
