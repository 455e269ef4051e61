// Package clock is sked's wall clock: a Guard that watches the clock it reads
// for steps (an edge box without a real-time clock boots in 1970 or last
// week, then NTP jumps it), and a Virtual clock that tests and
// `sked serve --test-clock` move by hand.
//
// A Guard compares each reading with the last one plus the monotonic time
// elapsed since. A backward step past the latest time it has seen makes it
// hold: Holding reports true until the wall clock is past that time again,
// and the store claims nothing meanwhile, so no slot fires twice. A forward
// step is remembered as an interval, so that the slots it jumped over are
// recorded missed with reason clock_step rather than downtime.
package clock

import (
	"sync"
	"time"
)

// StepThreshold is the smallest disagreement between the wall clock and the
// monotonic clock that counts as a step; NTP slewing stays far below it.
const StepThreshold = time.Second

// Step is a jump of the wall clock.
type Step struct {
	From time.Time // the wall time expected from the monotonic clock
	To   time.Time // the wall time read
}

// Backward reports whether the clock went back.
func (s Step) Backward() bool { return s.To.Before(s.From) }

// Guard reads a wall clock and detects its steps. It is safe for concurrent
// use.
type Guard struct {
	wall   func() time.Time
	mono   func() time.Time // elapsed time only; see NewGuard
	onStep func(Step)

	mu       sync.Mutex
	started  bool      // a first reading was taken; guarded by mu
	lastWall time.Time // guarded by mu
	lastMono time.Time // guarded by mu
	high     time.Time // latest wall time read; guarded by mu
	holdTill time.Time // zero unless holding; guarded by mu
	forward  []Step    // recent forward steps, newest last; guarded by mu
}

// maxSteps bounds the forward steps a Guard remembers.
const maxSteps = 64

// NewGuard returns a guard over the wall clock wall, judged against mono,
// whose readings are only ever subtracted from each other: time.Now for both
// on a real clock (Go's times carry a monotonic reading), Virtual.Now and
// Virtual.Elapsed for a virtual one. onStep, if not nil, is called (without
// locks held) for every step detected.
func NewGuard(wall, mono func() time.Time, onStep func(Step)) *Guard {
	return &Guard{wall: wall, mono: mono, onStep: onStep}
}

// Now reads the wall clock, in UTC, noting any step since the last reading.
func (g *Guard) Now() time.Time {
	now := g.wall().UTC()
	mono := g.mono()
	g.mu.Lock()
	var step *Step
	if g.started {
		expected := g.lastWall.Add(mono.Sub(g.lastMono))
		if d := now.Sub(expected); d > StepThreshold || d < -StepThreshold {
			step = &Step{From: expected, To: now}
			if step.Backward() {
				if now.Before(g.high) {
					g.holdTill = g.high
				}
			} else {
				g.forward = append(g.forward, *step)
				if len(g.forward) > maxSteps {
					g.forward = g.forward[1:]
				}
			}
		}
	}
	g.started, g.lastWall, g.lastMono = true, now, mono
	if now.After(g.high) {
		g.high = now
	}
	if !g.holdTill.IsZero() && !now.Before(g.holdTill) {
		g.holdTill = time.Time{}
	}
	g.mu.Unlock()
	if step != nil && g.onStep != nil {
		g.onStep(*step)
	}
	return now
}

// Holding reports whether firing is held after a backward step, and until
// which wall time.
func (g *Guard) Holding() (bool, time.Time) {
	g.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.holdTill.IsZero(), g.holdTill
}

// JumpedOver reports whether t lies inside a forward step the guard saw.
func (g *Guard) JumpedOver(t time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.forward {
		if t.After(s.From) && !t.After(s.To) {
			return true
		}
	}
	return false
}

// Virtual is a clock that only moves when told. It is safe for concurrent
// use.
type Virtual struct {
	mu  sync.Mutex
	now time.Time // guarded by mu
}

// NewVirtual returns a virtual clock stopped at t.
func NewVirtual(t time.Time) *Virtual { return &Virtual{now: t.UTC()} }

// Now returns the virtual time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// Elapsed is the virtual clock's own notion of time flowing: none. Paired
// with Now in a Guard, every Set and Advance is a step.
func (v *Virtual) Elapsed() time.Time { return time.Time{} }

// Set moves the clock to t, forward or back.
func (v *Virtual) Set(t time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.now = t.UTC()
}

// Advance moves the clock forward by d (back, if d is negative).
func (v *Virtual) Advance(d time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.now = v.now.Add(d)
}
