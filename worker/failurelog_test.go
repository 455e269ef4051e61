package worker

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestFailureLog: of 120 failures in a row the 1st, 10th and 100th are
// logged, then one line when the task works again, and none after.
func TestFailureLog(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var f failureLog
	for range 120 {
		f.failed(log, "claim", errors.New("connection refused"))
	}
	f.worked(log, "claim")
	f.worked(log, "claim")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"failures_in_a_row=1", "failures_in_a_row=10", "failures_in_a_row=100", `msg="claim works again" failures=120`}
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want %q in it", i, lines[i], w)
		}
	}
}
