// Package supervisor runs a command under a supervising process that fences
// it to its lease. The supervisor is this same binary, run again: an init
// function here turns it into the supervisor before main runs, so every
// program that links the package (sked, a program embedding sked, a test
// binary) can supervise without being told.
//
// The supervisor starts the command in a process group of its own and owns
// that group until every process in it is gone. It kills the whole group
// (SIGKILL) when
//
//   - the process that started it dies: the control pipe it reads closes
//     (kill -9, a crash), however the parent died;
//   - the deadline it last heard of passes: the parent renews the lease and
//     moves the deadline with Extend, and a parent that is frozen (SIGSTOP)
//     or cut off from its store moves it no more;
//   - the parent asks: Kill at once, or Stop, which sends SIGTERM first and
//     SIGKILL after a grace period.
//
// When the command exits, whatever it left running in its group is killed
// too: the run is over. The supervisor tells the caller the group as it
// starts the command, so that when the supervisor itself dies (kill -9,
// the OOM killer) the caller kills the group: the command's own processes
// die with the supervisor, but what they started would run on. The supervisor itself does not end on SIGTERM,
// SIGINT, SIGHUP or SIGQUIT. A process that leaves the group (setsid, setpgid) is
// out of reach. Deadlines are clock.Monotonic readings, the same in both
// processes; a command whose deadline has passed when the supervisor is
// about to start it is not started (ErrLapsed).
package supervisor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// envMarker in a process's environment makes it a supervisor (see init).
const envMarker = "SKED_SUPERVISOR"

// The descriptors of a supervisor: the parent's control messages on 3, the
// supervisor's report on 4, the held files from 5 on.
const (
	fdControl = 3
	fdReport  = 4
)

// ErrLapsed is returned by Wait when the command was not started because
// its deadline had already passed.
var ErrLapsed = errors.New("not started: its deadline had passed")

// Command is a program to run under a supervisor.
type Command struct {
	Path string   // the program, resolved (see exec.LookPath)
	Args []string // its arguments, Args[0] the name it was given
	Env  []string // its whole environment
	Dir  string   // its working directory; "" is the caller's
	// Stdin is the command's input; nil is empty.
	Stdin io.Reader
	// Output receives stdout and stderr, interleaved in the order written;
	// nil discards them.
	Output io.Writer
	// Hold are files the supervisor keeps open, and does not pass to the
	// command, until the command's group is gone: a lock held through them
	// outlives the caller for as long as its command runs.
	Hold []*os.File
	// Label names the supervisor in ps.
	Label string
	// StopBy is the clock.Monotonic reading by which the command must have
	// stopped, unless Extend moves it; zero means no deadline.
	StopBy time.Duration
	// Grace is how long Stop waits after SIGTERM before SIGKILL.
	Grace time.Duration
	// WaitDelay bounds how long Wait waits, after the supervisor exited,
	// for the output to close (a process that left the group may hold it).
	WaitDelay time.Duration
}

// message is one line of the control pipe. The first carries the command;
// every one may move the deadline or ask for a stop.
type message struct {
	Path  string        `json:"path,omitempty"`
	Args  []string      `json:"args,omitempty"`
	Env   []string      `json:"env,omitempty"`
	Dir   string        `json:"dir,omitempty"`
	Hold  int           `json:"hold,omitempty"`
	Grace time.Duration `json:"grace,omitempty"`

	StopBy time.Duration `json:"stopBy,omitempty"`
	Stop   bool          `json:"stop,omitempty"` // SIGTERM now, SIGKILL after Grace
	Kill   bool          `json:"kill,omitempty"` // SIGKILL now
}

// report is what the supervisor writes on its report descriptor, a line
// each: the command's group as it starts (Pgid alone), and how it ended
// when the group is gone (Done).
type report struct {
	Pgid     int    `json:"pgid,omitempty"`     // the command's process group
	Done     bool   `json:"done,omitempty"`     // the group is gone: the fields below say how it ended
	Lapsed   bool   `json:"lapsed,omitempty"`   // not started: past the deadline
	StartErr string `json:"startErr,omitempty"` // not started: this error
	Errno    int    `json:"errno,omitempty"`    // of StartErr, when it has one
	ExitCode int    `json:"exitCode"`           // -1 when a signal ended it
	Signal   int    `json:"signal,omitempty"`
	Stopped  string `json:"stopped,omitempty"` // why the supervisor stopped it, if it did
}

// Reasons a supervisor stops its command, as ExitError.Stopped says them.
const (
	StoppedDeadline = "its deadline passed"
	StoppedParent   = "the process that started it died"
	StoppedAsked    = "asked to stop"
)

// ExitError is a command that exited with a status other than 0, or that a
// signal ended.
type ExitError struct {
	Code    int            // exit status; -1 when a signal ended it
	Signal  syscall.Signal // the signal, when Code is -1
	Stopped string         // why the supervisor stopped it; "" when it did not
}

func (e *ExitError) Error() string {
	s := "exit status " + fmt.Sprint(e.Code)
	if e.Code < 0 {
		s = "signal: " + e.Signal.String()
	}
	if e.Stopped != "" {
		s += " (stopped: " + e.Stopped + ")"
	}
	return s
}

// ExitCode is the exit status, or -1 when a signal ended the command.
func (e *ExitError) ExitCode() int { return e.Code }

// Process is a supervisor and its command.
type Process struct {
	cmd    *exec.Cmd
	path   string
	mu     sync.Mutex // serializes writes to ctl
	ctl    *os.File   // the control pipe's write end; closing it kills the command
	ending chan ending
}

// ending is what the report descriptor said by the time it closed: the
// supervisor exited (or died).
type ending struct {
	report report // Done is false when the supervisor died without one
	raw    []byte
	pgid   int // the command's group, once it started
}

// self is the program to run as the supervisor: this one. On Linux the
// kernel's link runs the image this process runs, even when the file was
// replaced or removed since (an upgrade).
func self() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// Start starts a supervisor for c, which starts c's command.
func Start(c Command) (*Process, error) {
	exe, err := self()
	if err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	out := c.Output
	if out == nil {
		out = io.Discard
	}
	cmd := &exec.Cmd{
		Path:  exe,
		Args:  []string{"sked-supervisor", c.Label},
		Env:   []string{envMarker + "=1", "GOMAXPROCS=1"},
		Stdin: c.Stdin, Stdout: out, Stderr: out,
		ExtraFiles: append([]*os.File{ctlR, repW}, c.Hold...),
		// A group of its own: signals a terminal sends to the caller's
		// group (Ctrl-C, Ctrl-Z) do not reach it.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		WaitDelay:   c.WaitDelay,
	}
	err = cmd.Start()
	ctlR.Close()
	repW.Close()
	if err != nil {
		ctlW.Close()
		repR.Close()
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	p := &Process{cmd: cmd, path: c.Path, ctl: ctlW, ending: make(chan ending, 1)}
	go func() {
		b, _ := io.ReadAll(repR) // until the supervisor is gone
		repR.Close()
		e := readEnding(b)
		if !e.report.Done && e.pgid != 0 {
			// The supervisor died with its command running: its own
			// processes died with it, what they started did not.
			killGroup(e.pgid, nil, killWait)
		}
		p.ending <- e
	}()
	p.send(message{Path: c.Path, Args: c.Args, Env: c.Env, Dir: c.Dir, Hold: len(c.Hold), Grace: c.Grace, StopBy: c.StopBy})
	return p, nil
}

// send writes m to the supervisor. A supervisor that is gone cannot be
// told anything; Wait reports how it ended.
func (p *Process) send(m message) {
	b, _ := json.Marshal(m)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.ctl.Write(append(b, '\n'))
}

// Extend moves the deadline to stopBy, a clock.Monotonic reading.
func (p *Process) Extend(stopBy time.Duration) { p.send(message{StopBy: stopBy}) }

// Stop sends SIGTERM to the command's group, and SIGKILL after the grace
// period (or at the deadline, if that comes first) to what is left.
func (p *Process) Stop() { p.send(message{Stop: true}) }

// Kill sends SIGKILL to the command's group at once.
func (p *Process) Kill() { p.send(message{Kill: true}) }

// Wait waits until the command's group is gone and the supervisor has
// exited, and says how the command ended: nil for exit status 0, an
// *ExitError, ErrLapsed, or the error that kept it from starting (an
// *os.PathError around the errno).
func (p *Process) Wait() error {
	werr := p.cmd.Wait()
	e := <-p.ending
	p.mu.Lock()
	p.ctl.Close()
	p.mu.Unlock()
	r := e.report
	if !r.Done {
		killed := ""
		if e.pgid != 0 {
			killed = "; what was left of its command's group was killed"
		}
		return fmt.Errorf("supervisor of %s ended without a report (%v)%s: %s", p.path, werr, killed, strings.TrimSpace(string(e.raw)))
	}
	switch {
	case r.Lapsed:
		return ErrLapsed
	case r.StartErr != "" && r.Errno != 0:
		return &os.PathError{Op: "start", Path: p.path, Err: syscall.Errno(r.Errno)}
	case r.StartErr != "":
		return fmt.Errorf("start %s: %s", p.path, r.StartErr)
	case r.ExitCode != 0:
		return &ExitError{Code: r.ExitCode, Signal: syscall.Signal(r.Signal), Stopped: r.Stopped}
	}
	return nil
}

// readEnding reads the lines the supervisor wrote on its report descriptor.
func readEnding(b []byte) ending {
	e := ending{raw: b}
	for line := range bytes.Lines(b) {
		var r report
		if json.Unmarshal(line, &r) != nil {
			continue
		}
		if r.Pgid != 0 {
			e.pgid = r.Pgid
		}
		if r.Done {
			e.report = r
		}
	}
	return e
}

// killGroup kills process group pgid until no process is left in it,
// calling reap (when set) before each round, for at most wait (0: no
// bound). kill(2) finds a process until its parent reaps it: the caller's
// own children need reap, and an orphan's new parent may be slow, or a
// PID 1 that never reaps. A member that cannot be signalled (it changed
// its user) is out of reach and not waited for.
func killGroup(pgid int, reap func(), wait time.Duration) {
	deadline := time.Now().Add(wait)
	for wait == 0 || time.Now().Before(deadline) {
		if reap != nil {
			reap()
		}
		if syscall.Kill(-pgid, syscall.SIGKILL) != nil {
			return // none is left, or none within reach
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// killWait bounds how long Wait's caller waits for the group of a
// supervisor that died to be gone.
const killWait = 5 * time.Second

// readMessages sends the control pipe's messages on ch and closes it when
// the pipe closes: the parent is gone.
func readMessages(r io.Reader, ch chan<- message) {
	defer close(ch)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 64<<20)
	for sc.Scan() {
		var m message
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			ch <- m
		}
	}
}
