package worker

import "log/slog"

// failureLog logs the failures of a task that runs again and again (a
// claim, a reap), so that an outage of the database does not flood the
// log: the 1st, 10th, 100th… failure in a row, each with the count, and a
// line when the task works again. One goroutine uses it.
type failureLog struct {
	failures int // in a row
}

// failed notes a failure of the task what, and logs it when its count is
// a power of ten.
func (f *failureLog) failed(log *slog.Logger, what string, err error) {
	f.failures++
	n := f.failures
	for n%10 == 0 {
		n /= 10
	}
	if n == 1 {
		log.Error(what, "err", err, "failures_in_a_row", f.failures)
	}
}

// worked notes that the task what worked, and logs so after failures.
func (f *failureLog) worked(log *slog.Logger, what string) {
	if f.failures > 0 {
		log.Info(what+" works again", "failures", f.failures)
		f.failures = 0
	}
}
