package supervisor

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// setSubreaper makes the supervisor the reaper of the command's orphans:
// processes of the group whose parent died come to it, so that it can wait
// until they are gone rather than leave them to init.
func setSubreaper() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// setDeathSignal has the kernel SIGKILL the command if the supervisor dies
// (the OOM killer, say). Go ends a thread only when a goroutine locked to
// it returns, which never happens to the one starting the command.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
