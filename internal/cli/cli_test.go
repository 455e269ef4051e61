package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// mainOf runs args as the sked binary does, with an empty environment, and
// returns its exit status and what it wrote.
func mainOf(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, Env{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// TestMain_JoinedUsageErrors: a command line with several faults says each
// on a line of its own, each after "sked:" as every other error, and then
// where the help is.
func TestMain_JoinedUsageErrors(t *testing.T) {
	code, _, stderr := mainOf("work", "--concurrency", "0")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != 2 || len(lines) < 3 || lines[len(lines)-1] != "Run 'sked work --help' for usage." {
		t.Fatalf("sked work --concurrency 0: exit %d, stderr:\n%s", code, stderr)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "sked: ") {
			t.Errorf("line %q of the joined errors lacks the sked: prefix; stderr:\n%s", l, stderr)
		}
	}
}
