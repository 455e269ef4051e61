package supervisor_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sked-dev/sked/clock"
	"github.com/sked-dev/sked/supervisor"
)

// sh returns a command running script with /bin/sh, its output in out.
func sh(script string, out io.Writer) supervisor.Command {
	return supervisor.Command{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Env: []string{"PATH=" + os.Getenv("PATH")}, Output: out}
}

func run(t *testing.T, c supervisor.Command) error {
	t.Helper()
	p, err := supervisor.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	return p.Wait()
}

// alive reports whether process pid runs: it exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || len(s) <= i+2 || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// pids parses the process ids a command printed, one a line.
func pids(t *testing.T, out string) []int {
	t.Helper()
	var ps []int
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil {
			ps = append(ps, pid)
		}
	}
	if len(ps) == 0 {
		t.Fatalf("no pid in output %q", out)
	}
	return ps
}

func TestStart_Exit(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := sh(`cat; echo "$GREETING"; pwd; echo err >&2; exit 3`, &out)
	c.Stdin = strings.NewReader("payload\n")
	c.Env = append(c.Env, "GREETING=hello")
	c.Dir = t.TempDir()
	err := run(t, c)
	var ee *supervisor.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || ee.Stopped != "" || err.Error() != "exit status 3" {
		t.Fatalf("Wait = %v, want exit status 3", err)
	}
	dir, _ := filepath.EvalSymlinks(c.Dir)
	if got, want := out.String(), "payload\nhello\n"+dir+"\nerr\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
	if err := run(t, sh("true", &out)); err != nil {
		t.Errorf("true: %v", err)
	}
}

func TestStart_StartErrors(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    supervisor.Command
		want error
	}{
		{"Missing", supervisor.Command{Path: "/nonexistent/prog", Args: []string{"prog"}}, fs.ErrNotExist},
		{"NotExecutable", supervisor.Command{Path: script, Args: []string{"script"}}, fs.ErrPermission},
		{"MissingDir", supervisor.Command{Path: "/bin/true", Args: []string{"true"}, Dir: "/nonexistent/dir"}, fs.ErrNotExist},
	} {
		if err := run(t, tc.c); !errors.Is(err, tc.want) {
			t.Errorf("%s: Wait = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestStart_Lapsed: a command whose deadline passed before it started is
// not started.
func TestStart_Lapsed(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "ran")
	c := sh("touch "+mark, nil)
	c.StopBy = clock.Monotonic() - time.Millisecond
	if err := run(t, c); !errors.Is(err, supervisor.ErrLapsed) {
		t.Fatalf("Wait = %v, want ErrLapsed", err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the command ran")
	}
}

// TestStart_LeftoversKilled: what the command leaves in its group is gone
// when Wait returns.
func TestStart_LeftoversKilled(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(t, sh("sleep 30 & echo $!", &out)); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids(t, out.String()) {
		if alive(pid) {
			t.Errorf("process %d, left in the group, still runs", pid)
		}
	}
}

// TestStart_Deadline: a deadline that passes without an Extend kills the
// whole group.
func TestStart_Deadline(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := sh("sleep 30 & echo $!; sleep 30", &out)
	c.StopBy = clock.Monotonic() + 3*time.Second // room for a slow start (-race)
	err := run(t, c)
	var ee *supervisor.ExitError
	if !errors.As(err, &ee) || ee.Signal != syscall.SIGKILL || ee.Stopped != supervisor.StoppedDeadline {
		t.Fatalf("Wait = %v, want killed at the deadline", err)
	}
	for _, pid := range pids(t, out.String()) {
		if alive(pid) {
			t.Errorf("process %d still runs after the deadline", pid)
		}
	}
}

// TestStart_Extend: a deadline moved by Extend holds instead of the first.
func TestStart_Extend(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "gate")
	c := sh(fmt.Sprintf("while [ ! -e %s ]; do sleep 0.01; done", gate), nil)
	first := clock.Monotonic() + 3*time.Second // room for a slow start (-race)
	c.StopBy = first
	p, err := supervisor.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	p.Extend(clock.Monotonic() + time.Hour)
	for clock.Monotonic() < first+200*time.Millisecond {
		time.Sleep(10 * time.Millisecond) // until the first deadline is well past
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait = %v, want the command to have run past its first deadline", err)
	}
}

// TestProcess_Stop: Stop sends SIGTERM, then SIGKILL after the grace
// period to a command that ignores it.
func TestProcess_Stop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, trap string
		code       int
		sig        syscall.Signal
	}{
		{"Term", `'exit 143'`, 143, 0},
		{"Ignored", `''`, -1, syscall.SIGKILL},
	} {
		up := filepath.Join(t.TempDir(), "up")
		c := sh("trap "+tc.trap+" TERM; touch "+up+"; while :; do sleep 0.01; done", nil)
		c.Grace = 200 * time.Millisecond
		p, err := supervisor.Start(c)
		if err != nil {
			t.Fatal(err)
		}
		waitFile(t, up)
		p.Stop()
		err = p.Wait()
		var ee *supervisor.ExitError
		if !errors.As(err, &ee) || ee.Code != tc.code || ee.Signal != tc.sig || ee.Stopped != supervisor.StoppedAsked {
			t.Errorf("%s: Wait = %v, want code %d signal %v, stopped as asked", tc.name, err, tc.code, tc.sig)
		}
	}
}

// TestStart_HoldsFiles: a held file stays open in the supervisor until the
// command is gone, and the command does not get it.
func TestStart_HoldsFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lockPath, gate, fds := filepath.Join(dir, "lock"), filepath.Join(dir, "gate"), filepath.Join(dir, "fds")
	f, err := os.Create(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	c := sh(fmt.Sprintf("ls -l /proc/$$/fd > %s.tmp; mv %s.tmp %s; while [ ! -e %s ]; do sleep 0.01; done", fds, fds, fds, gate), nil)
	c.Hold = []*os.File{f}
	p, err := supervisor.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // the supervisor's copy holds the lock now
	waitFile(t, fds)
	other, err := os.Open(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Errorf("flock while the command runs = %v, want EWOULDBLOCK", err)
	}
	os.WriteFile(gate, nil, 0o644)
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(fds); strings.Contains(string(b), lockPath) {
		t.Errorf("the command holds the lock file:\n%s", b)
	}
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("flock after the command ended = %v", err)
	}
}

// TestStart_InheritedFilesStayBehind: a descriptor this process holds
// without close-on-exec (as one sked's own parent may leave open) reaches
// the supervisor, but not the command.
func TestStart_InheritedFilesStayBehind(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("lists descriptors in /proc")
	}
	dir := t.TempDir()
	secret, fds := filepath.Join(dir, "secret"), filepath.Join(dir, "fds")
	if err := os.WriteFile(secret, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(secret, syscall.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := run(t, sh(fmt.Sprintf("ls -l /proc/$$/fd > %s", fds), nil)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fds)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Errorf("the command holds a descriptor the supervisor inherited:\n%s", b)
	}
}

// TestStart_SignalsToSupervisor: SIGTERM and SIGINT sent to the supervisor
// (a service manager stopping every process of the service) do not end it
// or its command, and the command does not inherit them ignored.
func TestStart_SignalsToSupervisor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ppid, gate := filepath.Join(dir, "ppid"), filepath.Join(dir, "gate")
	var out bytes.Buffer
	c := sh(fmt.Sprintf("echo $PPID > %s.tmp; mv %s.tmp %s; while [ ! -e %s ]; do sleep 0.01; done; grep SigIgn /proc/$$/status", ppid, ppid, ppid, gate), &out)
	p, err := supervisor.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, ppid)
	b, _ := os.ReadFile(ppid)
	pid := pids(t, string(b))[0]
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		if err := syscall.Kill(pid, sig); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(gate, nil, 0o644)
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait = %v, want the command to have run to its end", err)
	}
	if got := strings.Fields(out.String()); len(got) != 2 || strings.Trim(got[1], "0") != "" {
		t.Errorf("the command ignores signals: %q", out.String())
	}
}

// TestStart_SupervisorKilled: when the supervisor itself is killed (kill
// -9, the OOM killer) the command's own process dies with it, and what
// that started in its group is killed by Wait's caller before Wait
// returns: nothing of the run goes on while a retry starts.
func TestStart_SupervisorKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ppid, child := filepath.Join(dir, "ppid"), filepath.Join(dir, "child")
	c := sh(fmt.Sprintf("sleep 60 & echo $! > %s.tmp; mv %s.tmp %s; echo $PPID > %s.tmp; mv %s.tmp %s; wait", child, child, child, ppid, ppid, ppid), nil)
	p, err := supervisor.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, ppid)
	read := func(path string) int {
		b, _ := os.ReadFile(path)
		return pids(t, string(b))[0]
	}
	sup, grandchild := read(ppid), read(child)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = p.Wait()
	if err == nil || !strings.Contains(err.Error(), "ended without a report") || !strings.Contains(err.Error(), "what was left of its command's group was killed") {
		t.Errorf("Wait = %v; want the supervisor's end without a report, and its group killed", err)
	}
	if alive(grandchild) {
		syscall.Kill(grandchild, syscall.SIGKILL)
		t.Fatalf("process %d, started by the command, still runs after its supervisor was killed and Wait returned", grandchild)
	}
}
