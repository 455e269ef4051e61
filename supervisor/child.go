package supervisor

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/sked-dev/sked/clock"
)

// init makes a process started by Start the supervisor: it supervises and
// exits before the program's main (or a test binary's tests) would run.
func init() {
	if os.Getenv(envMarker) == "" {
		return
	}
	os.Exit(supervise())
}

// supervise reads the command from the control pipe, runs it under
// supervision, and writes the report.
func supervise() int {
	// Nothing the supervisor holds may reach the command: not the pipes
	// to the parent, not the held files, not what sked itself inherited
	// from whatever started it (the descriptors came without
	// close-on-exec).
	closeOnExecFrom(fdControl)
	// The supervisor's life is bound to its parent and its command, not
	// to signals: a service manager that sends SIGTERM to every process
	// of the service reaches the command directly. They are caught, never
	// ignored, so that the command does not inherit them ignored.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	msgs := make(chan message)
	go readMessages(os.NewFile(fdControl, "control"), msgs)
	first, ok := <-msgs
	if !ok {
		return 1 // the parent died before it said what to run
	}
	rep := os.NewFile(fdReport, "report")
	tell := func(r report) {
		b, _ := json.Marshal(r)
		_, _ = rep.Write(append(b, '\n')) // nobody reads it when the parent died
	}
	r := run(first, msgs, func(pgid int) { tell(report{Pgid: pgid}) })
	r.Done = true
	tell(r)
	rep.Close()
	return 0
}

// run starts the command of m and supervises it until its group is gone.
// started is told the command's group as it starts.
func run(m message, msgs <-chan message, started func(pgid int)) report {
	setSubreaper()
	stopBy, grace := m.StopBy, max(m.Grace, time.Nanosecond)
	if stopBy != 0 && clock.Monotonic() >= stopBy {
		return report{Lapsed: true}
	}
	cmd := &exec.Cmd{
		Path: m.Path, Args: m.Args, Env: m.Env, Dir: m.Dir,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stdout,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	setDeathSignal(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		r := report{StartErr: err.Error()}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			r.Errno = int(errno)
		}
		return r
	}
	pgid := cmd.Process.Pid
	started(pgid)
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	var (
		stopped  string        // why the group was stopped; "" while it runs freely
		killed   bool          // SIGKILL was sent
		graceEnd time.Duration // when a SIGTERM's grace ends; 0: none asked
	)
	kill := func(why string) {
		if stopped == "" {
			stopped = why
		}
		if !killed {
			killed = true
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	for {
		// Timers do not count while the machine sleeps; waking at least
		// once a second reads the clock that does.
		wait := time.Hour
		if !killed {
			for _, at := range []time.Duration{stopBy, graceEnd} {
				if at != 0 {
					wait = min(wait, max(at-clock.Monotonic(), 0), time.Second)
				}
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-exited:
			t.Stop()
			// Whatever the command left in its group goes with it.
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			waitGone(pgid)
			return exitReport(cmd.ProcessState, stopped)
		case m, ok := <-msgs:
			switch {
			case !ok:
				msgs = nil
				kill(StoppedParent)
			case m.Kill:
				kill(StoppedAsked)
			case m.Stop && graceEnd == 0 && !killed:
				if stopped == "" {
					stopped = StoppedAsked
				}
				graceEnd = clock.Monotonic() + grace
				_ = syscall.Kill(-pgid, syscall.SIGTERM)
			}
			if m.StopBy != 0 {
				stopBy = m.StopBy
			}
		case <-t.C:
		}
		t.Stop()
		now := clock.Monotonic()
		if stopBy != 0 && now >= stopBy {
			kill(StoppedDeadline)
		}
		if graceEnd != 0 && now >= graceEnd {
			kill(StoppedAsked)
		}
	}
}

// exitReport says how the command ended.
func exitReport(ps *os.ProcessState, stopped string) report {
	r := report{ExitCode: ps.ExitCode(), Stopped: stopped}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal = int(ws.Signal())
	}
	return r
}

// waitGone waits until no process is left in group pgid, killing what is
// and reaping what comes to the supervisor as a subreaper.
func waitGone(pgid int) { killGroup(pgid, reapChildren, 0) }

// reapChildren reaps the supervisor's children that have exited, its
// command's orphans among them.
func reapChildren() {
	for {
		var ws syscall.WaitStatus
		if pid, _ := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 {
			return
		}
	}
}

// closeOnExecFrom marks every open descriptor from first up close-on-exec,
// as listed in /proc/self/fd (Linux) or /dev/fd.
func closeOnExecFrom(first int) {
	dir := "/dev/fd"
	if runtime.GOOS == "linux" {
		dir = "/proc/self/fd"
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= first {
			syscall.CloseOnExec(fd)
		}
	}
}
