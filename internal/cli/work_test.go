package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestWorkCheck_Command: sked work refuses a command it cannot run before it
// claims anything, since every job it claimed would fail without retry.
func TestWorkCheck_Command(t *testing.T) {
	f := workFlags{types: []string{"t"}, server: DefaultServer, concurrency: 1, lease: 30 * time.Second, grace: 30 * time.Second}
	if err := f.check([]string{"sh", "-c", "true"}); err != nil {
		t.Fatalf("check(sh) = %v, want nil", err)
	}
	for _, command := range []string{"./sked-no-such-script", "sked-no-such-program-xyz"} {
		err := f.check([]string{command})
		if ExitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), `command "`+command+`" cannot be run`) {
			t.Errorf("check(%s) = %v (exit %d), want a usage error naming the command", command, err, ExitCode(err))
		}
	}
}

// TestRetryWait: the wait after n failed claims in a row doubles from 1s
// to 30s, and a random half of it is taken off.
func TestRetryWait(t *testing.T) {
	for n, full := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 16 * time.Second,
		6: 30 * time.Second, 7: 30 * time.Second, 64: 30 * time.Second, 1000: 30 * time.Second} {
		if lo, hi := retryWait(n, func() float64 { return 0 }), retryWait(n, func() float64 { return 0.999999 }); lo != full/2 || hi <= full*99/100 || hi > full {
			t.Errorf("failure %d: waits from %s to %s, want from %s to %s", n, lo, hi, full/2, full)
		}
	}
}
