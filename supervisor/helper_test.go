package supervisor_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sked-dev/sked/supervisor"
)

// waitFile waits until the file at path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
	}
}

// helperEnv makes the test binary a parent that supervises a command and
// waits forever (TestHelperParent); its value is the file the command
// writes its pids to.
const helperEnv = "SUPERVISOR_TEST_PARENT"

// TestHelperParent is not a test: run with helperEnv set, it starts a
// supervised command that writes the pids of itself and a child it leaves
// running to the named file, and then blocks until it is killed.
func TestHelperParent(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("a helper process, run by TestStart_ParentKilled")
	}
	_, err := supervisor.Start(supervisor.Command{Path: "/bin/sh", Args: []string{"sh", "-c",
		"sleep 30 & echo $$ $! > " + path + ".tmp; mv " + path + ".tmp " + path + "; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	select {}
}

// TestStart_ParentKilled kills, with SIGKILL, a process that supervises a
// command: the command and what it started die with it.
func TestStart_ParentKilled(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "pids")
	parent := exec.Command(os.Args[0], "-test.run=^TestHelperParent$")
	parent.Env = append(os.Environ(), helperEnv+"="+path)
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { parent.Process.Kill() })
	waitFile(t, path)
	b, _ := os.ReadFile(path)
	ps := pids(t, string(b))
	for _, pid := range ps {
		if !alive(pid) {
			t.Fatalf("process %d is not running before the kill", pid)
		}
	}
	parent.Process.Signal(syscall.SIGKILL)
	parent.Wait()
	for _, pid := range ps {
		for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still runs after its supervisor's parent was killed: %s", pid, strings.TrimSpace(string(b)))
			}
		}
	}
}
