package worker

import (
	"errors"
	"fmt"
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

// TestFailureLog_NewKind: a failure of another kind than those before it
// in the row is logged when it first comes (the server went from refusing
// connections to refusing the password), and no more than
// maxFailureKinds kinds are, so that a text that changes every time
// cannot flood the log.
func TestFailureLog_NewKind(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var f failureLog
	for range 5 {
		f.failed(log, "claim", errors.New("connection refused")) // 1: logged, 2-5: not
	}
	f.failed(log, "claim", errors.New("password authentication failed")) // 6: logged, a new kind
	f.failed(log, "claim", errors.New("connection refused"))             // 7: not
	for i := range 20 {
		f.failed(log, "claim", fmt.Errorf("error %d", i)) // 8..13: new kinds, logged (the 10th is one); 14..27: not
	}
	got := strings.Count(buf.String(), "level=ERROR")
	if want := maxFailureKinds; got != want {
		t.Errorf("logged %d failures, want %d:\n%s", got, want, buf.String())
	}
	if !strings.Contains(buf.String(), "password authentication failed") {
		t.Errorf("the new kind of failure was not logged:\n%s", buf.String())
	}
	f.worked(log, "claim")
	buf.Reset()
	f.failed(log, "claim", errors.New("password authentication failed"))
	f.failed(log, "claim", errors.New("connection refused"))
	if got := strings.Count(buf.String(), "level=ERROR"); got != 2 {
		t.Errorf("after the task worked, logged %d failures of two kinds, want 2:\n%s", got, buf.String())
	}
}
