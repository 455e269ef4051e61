package server

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sked-dev/sked/clock"
)

// clockUser is a store whose clock the server sets (SQLite; PostgreSQL reads
// the database's own clock and has no such method).
type clockUser interface {
	UseClock(g *clock.Guard)
}

// newClock returns the guarded wall clock of the process, or, with a test
// clock, the guarded virtual clock and the virtual clock itself.
func newClock(testClock time.Time, log *slog.Logger) (*clock.Guard, *clock.Virtual) {
	onStep := func(s clock.Step) {
		if s.Backward() {
			log.Warn("wall clock stepped back; firing held until it passes the latest time seen",
				"from", s.From, "to", s.To)
			return
		}
		log.Warn("wall clock stepped forward; slots it jumped over are recorded missed (clock_step)",
			"from", s.From, "to", s.To)
	}
	if testClock.IsZero() {
		return clock.NewGuard(time.Now, time.Now, onStep), nil
	}
	v := clock.NewVirtual(testClock)
	return clock.NewGuard(v.Now, v.Elapsed, onStep), v
}

// useClock hands the guarded clock to the store.
func useClock(store any, g *clock.Guard, virtual bool) error {
	cu, ok := store.(clockUser)
	if !ok {
		if virtual {
			return fmt.Errorf("--test-clock needs the SQLite store; PostgreSQL keeps time with now()")
		}
		return nil
	}
	cu.UseClock(g)
	return nil
}
