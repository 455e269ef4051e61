package cli

import (
	"testing"
	"time"
)

// TestRetryWait: the wait after n failed claims in a row doubles from 1s
// to 30s, and a random half of it is taken off.
func TestRetryWait(t *testing.T) {
	for n, full := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 16 * time.Second,
		6: 30 * time.Second, 7: 30 * time.Second, 64: 30 * time.Second, 1000: 30 * time.Second} {
		if lo, hi := retryWait(n, func() float64 { return 0 }), retryWait(n, func() float64 { return 0.999999 }); lo != full/2 || hi <= full*99/100 || hi > full {
			t.Errorf("failure %d: waits from %s to %s, want from %s to %s", n, lo, hi, full/2, full)
		}
	}
}
