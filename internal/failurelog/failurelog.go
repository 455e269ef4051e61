// Package failurelog logs the failures of a task that runs again and again
// (a claim, a reap, a sweep, a reconnect), so that an outage of the
// database does not flood the log.
package failurelog

import (
	"context"
	"log/slog"
	"slices"
)

// Log logs the failures in a row of one task: the 1st, 10th, 100th…
// failure in a row, each with the count, the first failure of each kind
// (its error text) in the row, up to maxKinds of them, and a line when the
// task works again. Its zero value is ready; one goroutine uses it.
type Log struct {
	failures int      // in a row
	kinds    []string // the error texts logged in this row
}

// maxKinds bounds the kinds of error a row of failures logs on their
// first appearance, so that errors that differ every time (a counter in
// the text) cannot flood the log either.
const maxKinds = 8

// Failed notes a failure, err, of the task, and logs msg at level with
// err, the count and args when the count is a power of ten or err is of a
// kind not seen in this row.
func (f *Log) Failed(log *slog.Logger, level slog.Level, msg string, err error, args ...any) {
	f.failures++
	n := f.failures
	for n%10 == 0 {
		n /= 10
	}
	kind := err.Error()
	newKind := !slices.Contains(f.kinds, kind) && len(f.kinds) < maxKinds
	if newKind {
		f.kinds = append(f.kinds, kind)
	}
	if n == 1 || newKind {
		log.Log(context.Background(), level, msg, append([]any{"err", err, "failures_in_a_row", f.failures}, args...)...)
	}
}

// Worked notes that the task worked, and logs msg (INFO) with the count
// of failures before it when it had failed.
func (f *Log) Worked(log *slog.Logger, msg string) {
	if f.failures > 0 {
		log.Info(msg, "failures", f.failures)
		f.failures, f.kinds = 0, nil
	}
}
