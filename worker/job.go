package worker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// Job is what a handler sees of the run it executes: who it is (so an
// idempotent handler can check its own effect before acting) and where to
// write its output.
type Job struct {
	ID             string
	Type           string
	Payload        json.RawMessage
	Attempt        int
	Generation     int64
	Slot           time.Time // nominal slot (due time for one-off jobs)
	IdempotencyKey string
	// Output keeps the tail of what the handler writes; it is stored in the
	// run. Never nil while a handler runs.
	Output *Tail

	lease *lease // the run's lease, renewed by the pool; nil outside a pool
}

// HandlerFunc runs one job. A nil error is success; an error marked with
// Permanent fails the run without retry; any other error retries with
// backoff until the job's attempts are spent.
//
// The context is cancelled at the job's timeout, when cancellation is
// requested, at shutdown, and when the lease may lapse: renewals have
// failed for half the lease, or a sixth of it is all that is certainly left
// (the process was frozen, the store is out of reach). Past the lease
// another worker may run the job, so a handler must return as soon as ctx
// is done and do nothing more. That alone cannot fence a side effect
// outside sked: a handler frozen between checking ctx and acting acts
// late. Such a side effect must carry Job.Generation as a fencing token,
// and the system it acts on must refuse a generation lower than the
// highest it has seen for the job (or for Job.IdempotencyKey).
type HandlerFunc func(ctx context.Context, job *Job) error

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as one that another attempt cannot fix (a 4xx answer,
// a bad payload): the run fails without retry.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Tail is an io.Writer that keeps the last Max bytes written to it. It is
// safe for concurrent use.
type Tail struct {
	Max int // bytes kept; set before the first Write

	mu  sync.Mutex
	buf []byte // guarded by mu
}

// Write keeps the tail of p; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.Max {
		t.buf = append(t.buf[:0], p[len(p)-t.Max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.Max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String returns what is kept.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
