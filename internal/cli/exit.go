package cli

import (
	"errors"
	"fmt"
)

// The exit statuses of sked's commands (docs/operations.md, "Exit status"),
// so that a script tells a job that failed from a server it could not
// reach, a command line it got wrong, and a wait that ran out.
const (
	// ExitOK: done; a job or run waited for succeeded.
	ExitOK = 0
	// ExitFailed: a job or run waited for ended dead, failed or
	// cancelled; or the command failed otherwise (sked check found a
	// violation, sked healthcheck got no 200, sked serve stopped with an
	// error).
	ExitFailed = 1
	// ExitUsage: the command line cannot run as given.
	ExitUsage = 2
	// ExitUnreachable: a client command got no answer from the server (not
	// listening, no answer within --request-timeout, not sked), or an
	// answer that says to try again (5xx, 429). A change sent may have
	// been made or not. Also sked work whose --server host does not
	// resolve before any server answered, and a wait whose server stopped
	// answering.
	ExitUnreachable = 3
	// ExitRefused: the server refused the request (4xx): no such job, a
	// job in a state that does not allow it, a value it does not take, a
	// missing or wrong token.
	ExitRefused = 4
	// ExitTimedOut: a wait ran out (--wait-timeout) before the
	// job or run ended, which goes on: timeout(1)'s status.
	ExitTimedOut = 124
	// ExitInterrupted: a client command was interrupted (Ctrl-C, SIGTERM,
	// SIGHUP) before it was done: a shell's status for Ctrl-C.
	ExitInterrupted = 130
)

// ExitCode is the process status for err: ExitOK for none, ExitUsage for
// a usage error, the status an error was given with withExit, else
// ExitFailed.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	if ue := (*usageError)(nil); errors.As(err, &ue) {
		return ExitUsage
	}
	if ee := (*exitError)(nil); errors.As(err, &ee) {
		return ee.code
	}
	return ExitFailed
}

// exitError is an error that makes the exit status code; its message is
// msg, or err's when msg is "".
type exitError struct {
	code int
	msg  string
	err  error
}

func (e *exitError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// withExit is err making the exit status code, said as format and args
// (err's own message when format is ""): err stays what it unwraps to.
func withExit(code int, err error, format string, args ...any) error {
	msg := ""
	if format != "" {
		msg = fmt.Sprintf(format, args...)
	}
	return &exitError{code: code, msg: msg, err: err}
}
