//go:build !linux

package worker

import "syscall"

// setDeathSignal does nothing where the kernel has no parent-death signal:
// a command outlives a worker that crashes.
func setDeathSignal(*syscall.SysProcAttr) {}
