package worker

import (
	"log/slog"
	"slices"
)

// failureLog logs the failures of a task that runs again and again (a
// claim, a reap), so that an outage of the database does not flood the
// log: the 1st, 10th, 100th… failure in a row, each with the count, the
// first failure of each kind (its error text) in the row, up to
// maxFailureKinds of them, and a line when the task works again. One
// goroutine uses it.
type failureLog struct {
	failures int      // in a row
	kinds    []string // the error texts logged in this row
}

// maxFailureKinds bounds the kinds of error a row of failures logs on
// their first appearance, so that errors that differ every time (a
// counter in the text) cannot flood the log either.
const maxFailureKinds = 8

// failed notes a failure of the task what, and logs it when its count is
// a power of ten or its error is of a kind not seen in this row.
func (f *failureLog) failed(log *slog.Logger, what string, err error) {
	f.failures++
	n := f.failures
	for n%10 == 0 {
		n /= 10
	}
	kind := err.Error()
	newKind := !slices.Contains(f.kinds, kind) && len(f.kinds) < maxFailureKinds
	if newKind {
		f.kinds = append(f.kinds, kind)
	}
	if n == 1 || newKind {
		log.Error(what, "err", err, "failures_in_a_row", f.failures)
	}
}

// worked notes that the task what worked, and logs so after failures.
func (f *failureLog) worked(log *slog.Logger, what string) {
	if f.failures > 0 {
		log.Info(what+" works again", "failures", f.failures)
		f.failures, f.kinds = 0, nil
	}
}
