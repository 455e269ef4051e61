package handlers

import (
	"sync"
	"time"
)

// throttle spaces the log lines of events that may come by the thousand
// (refused claims, wrong tokens): at most one every every, saying how many
// came since the last.
type throttle struct {
	every time.Duration

	mu     sync.Mutex
	since  int       // events since the last line; guarded by mu
	logged time.Time // when the last line was logged; guarded by mu
}

// tick counts an event at now and returns how many came since the last
// call that returned true, which is when a line should be logged.
func (t *throttle) tick(now time.Time) (n int, log bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.since++
	if now.Sub(t.logged) < t.every {
		return 0, false
	}
	n, t.since, t.logged = t.since, 0, now
	return n, true
}
