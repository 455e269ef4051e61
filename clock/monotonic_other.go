//go:build unix && !linux

package clock

import "golang.org/x/sys/unix"

const monotonicID = unix.CLOCK_MONOTONIC
