package failurelog

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestLog: of 120 failures in a row the 1st, 10th and 100th are
// logged, then one line when the task works again, and none after.
func TestLog(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var f Log
	for range 120 {
		f.Failed(log, slog.LevelError, "claim", errors.New("connection refused"))
	}
	f.Worked(log, "claim works again")
	f.Worked(log, "claim works again")
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

// TestLog_NewKind: a failure of another kind than those before it
// in the row is logged when it first comes (the server went from refusing
// connections to refusing the password), and no more than
// maxKinds kinds are, so that a text that changes every time
// cannot flood the log.
func TestLog_NewKind(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var f Log
	for range 5 {
		f.Failed(log, slog.LevelError, "claim", errors.New("connection refused")) // 1: logged, 2-5: not
	}
	f.Failed(log, slog.LevelError, "claim", errors.New("password authentication failed")) // 6: logged, a new kind
	f.Failed(log, slog.LevelError, "claim", errors.New("connection refused"))             // 7: not
	for i := range 20 {
		f.Failed(log, slog.LevelError, "claim", fmt.Errorf("error %d", i)) // 8..13: new kinds, logged (the 10th is one); 14..27: not
	}
	got := strings.Count(buf.String(), "level=ERROR")
	if want := maxKinds; got != want {
		t.Errorf("logged %d failures, want %d:\n%s", got, want, buf.String())
	}
	if !strings.Contains(buf.String(), "password authentication failed") {
		t.Errorf("the new kind of failure was not logged:\n%s", buf.String())
	}
	f.Worked(log, "claim works again")
	buf.Reset()
	f.Failed(log, slog.LevelError, "claim", errors.New("password authentication failed"))
	f.Failed(log, slog.LevelError, "claim", errors.New("connection refused"))
	if got := strings.Count(buf.String(), "level=ERROR"); got != 2 {
		t.Errorf("after the task worked, logged %d failures of two kinds, want 2:\n%s", got, buf.String())
	}
}
