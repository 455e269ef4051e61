//go:build unix

package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		name string
		at   int64
	}{
		{"", "", 1},
		{"after-claim-commit", "after-claim-commit", 1},
		{"mid-batch-insert:3", "mid-batch-insert", 3},
		{"x:0", "x", 1},
		{"x:nope", "x", 1},
	} {
		p := parse(tc.in)
		if p.name != tc.name || p.at != tc.at {
			t.Errorf("parse(%q) = %q:%d, want %q:%d", tc.in, p.name, p.at, tc.name, tc.at)
		}
	}
}

// TestHit runs this test binary again with a point armed at its third hit:
// the child must survive two hits of it and any hit of another point, and
// die by SIGKILL at the third.
func TestHit(t *testing.T) {
	if os.Getenv(Env) != "" {
		Hit(MidBatchInsert)
		Hit(AfterClaimCommit)
		Hit(AfterClaimCommit)
		os.Stdout.WriteString("survived two hits\n")
		Hit(AfterClaimCommit)
		os.Exit(0) // not reached
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHit$")
	cmd.Env = append(os.Environ(), Env+"="+AfterClaimCommit+":3")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child exited with %v, want killed; output %q", err, out)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child status %v, want killed by SIGKILL", ws)
	}
	if string(out) != "survived two hits\n" {
		t.Fatalf("child wrote %q", out)
	}
}
