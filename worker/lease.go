package worker

import (
	"sync"
	"time"

	"github.com/sked-dev/sked/clock"
)

// Margins of a run's lease, as fractions of it. A lease granted or renewed
// by a request sent at t (a clock.Monotonic reading) lasts at least until
// t plus the lease on the store's clock, so the worker knows a lower bound
// of its end without reading the store's clock; these margins are taken
// from that bound.
const (
	// startLeft: a claimed job starts only while at least this fraction of
	// its lease is certainly left. Less means the claim's answer came late
	// (the process was frozen, the store slow): it is handed back unrun.
	startLeft = 2 // half
	// stopLeft: a run must have stopped while a sixth of its lease is
	// certainly left, unless it is renewed first; its command's supervisor
	// kills it then, whatever this process is doing.
	stopLeft = 6
)

// lease is what a worker knows for certain of one run's lease: it is held
// at least until a clock.Monotonic reading, moved by each renewal. It is
// safe for concurrent use.
type lease struct {
	length time.Duration // asked for at claim and at each renewal

	mu      sync.Mutex
	until   time.Duration // held at least until then; guarded by mu
	renewed chan struct{} // closed at the next renewal; guarded by mu
}

// newLease is the lease of a claim whose request was sent at sent and whose
// lease the store granted no sooner than waited after that.
func newLease(sent, waited, length time.Duration) *lease {
	return &lease{length: length, until: sent + waited + length, renewed: make(chan struct{})}
}

// renew records a renewal whose request was sent at sent.
func (l *lease) renew(sent time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := sent + l.length; until > l.until {
		l.until = until
		close(l.renewed)
		l.renewed = make(chan struct{})
	}
}

// left is how long the lease is certainly held from now on (negative once
// it may have lapsed).
func (l *lease) left() time.Duration { return l.leftAt(clock.Monotonic()) }

// leftAt is how long the lease is certainly held from now, a
// clock.Monotonic reading.
func (l *lease) leftAt(now time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until - now
}

// reading is a time.Now reading and the clock.Monotonic reading taken just
// after it, from which clock.Monotonic is told a moment later without
// reading it again: on Linux it is CLOCK_BOOTTIME, a system call (no vDSO)
// that cost a busy pool a twentieth of its CPU when each run read it. A
// claim reads it once for all its runs, as its answer arrives.
type reading struct {
	at   time.Time
	mono time.Duration
}

func readClock() reading {
	at := time.Now() // first: the time passed since it is no less than since mono
	return reading{at: at, mono: clock.Monotonic()}
}

// now is clock.Monotonic now, as told from r: r's reading plus the time
// passed since on the clock Go's timers keep. That clock stops while the
// machine sleeps, so what r tells lags by any sleep since r was read: it
// is only used between a claim's answer and the starts of its runs that
// are due (a dispatch, not a wait), and a run waiting to be due, and every
// renewal, reads clock.Monotonic itself.
func (r reading) now() time.Duration { return r.mono + time.Since(r.at) }

// stopBy is the clock.Monotonic reading by which the run must have stopped
// unless the lease is renewed first, and a channel closed at that renewal.
func (l *lease) stopBy() (time.Duration, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until - l.length/stopLeft, l.renewed
}
