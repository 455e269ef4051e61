//go:build unix && !linux

package supervisor

import "syscall"

// setSubreaper does nothing where the kernel has no subreapers: the
// command's orphans go to init, which reaps them.
func setSubreaper() {}

// setDeathSignal does nothing where the kernel has no parent-death signal;
// the supervisor's group kill is the only one.
func setDeathSignal(*syscall.SysProcAttr) {}
