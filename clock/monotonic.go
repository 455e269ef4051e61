//go:build unix

package clock

import (
	"time"

	"golang.org/x/sys/unix"
)

// Monotonic reads the machine's monotonic clock: the time since an
// arbitrary point, never stepped, and the same reading in every process on
// the machine. Two processes that must agree on an instant, a worker and the
// supervisor of its command, exchange readings of it.
//
// On Linux it is CLOCK_BOOTTIME, which keeps counting while the machine
// sleeps, as a lease kept on another machine's clock does; elsewhere it is
// CLOCK_MONOTONIC.
func Monotonic() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(monotonicID, &ts); err != nil {
		panic("clock: read the monotonic clock: " + err.Error()) // the kernel always has it
	}
	return time.Duration(ts.Nano())
}
