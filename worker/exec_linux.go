package worker

import "syscall"

// setDeathSignal has the kernel SIGKILL the command when the thread that
// started it exits. Go ends a thread only when a goroutine locked to it
// returns, which never happens to the one calling RunCommand, so in
// practice the command dies with the worker process.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
