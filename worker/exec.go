package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/supervisor"
)

// execWaitDelay is how long a command may take to exit after SIGTERM (and
// how long its output may stay open after it exits) before it is killed.
const execWaitDelay = 5 * time.Second

// execBaseEnv are the variables of sked's own environment every command
// gets, when they are set.
var execBaseEnv = []string{"PATH", "HOME", "LANG", "TZ"}

// ExecPayload is the payload of kind "exec".
type ExecPayload struct {
	// Command is the program and its arguments; it runs without a shell.
	// A program name without a slash is looked up in the server's PATH.
	Command []string `json:"command"`
	// Env is added to the command's environment.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the absolute working directory; empty means the server's.
	Dir string `json:"dir,omitempty"`
}

// ExecConfig says how commands run, for the exec kind and for sked work.
type ExecConfig struct {
	// Env names variables of sked's own environment that commands get
	// too, besides PATH, HOME, LANG and TZ (the --exec-env flag). Nothing
	// else of it reaches a command: not a token, not a secret.
	Env []string
	// Hold are files every command's supervisor keeps open until the
	// command's process group is gone. sked serve gives its lock on the
	// database: a sked serve started after one was killed waits until the
	// commands of its predecessor are gone.
	Hold []*os.File
}

// CheckExecEnv refuses an entry of ExecConfig.Env (named name in its
// errors: --exec-env, Config.ExecEnv) that is not a variable's name.
func CheckExecEnv(name string, names []string) error {
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			return fmt.Errorf("%s %q: give the name of a variable, such as AWS_PROFILE", name, n)
		}
	}
	return nil
}

// Exec returns the handler of kind "exec". It runs the payload's command
// (see ExecPayload) as RunCommand does.
//
// Exit status 0 succeeds. Another exit status, or a signal, is a retryable
// *supervisor.ExitError ("exit status N"). A payload that does not validate,
// a program that is missing or not executable, or a missing working
// directory is a Permanent error. When ctx ends, the process group gets
// SIGTERM, then SIGKILL 5s later if the command has not exited, and the
// error wraps ctx.Err(), so errors.Is tells context.DeadlineExceeded
// (timeout) from context.Canceled.
func Exec(cfg ExecConfig) HandlerFunc {
	return func(ctx context.Context, job *Job) error {
		var p ExecPayload
		if err := parseExecPayload(job.Payload, &p); err != nil {
			return Permanent(err)
		}
		return RunCommand(ctx, job, p, cfg)
	}
}

// RunCommand runs p's command for job, as the exec kind and sked work do,
// under a supervisor (see package supervisor) that fences it to the job's
// lease: the command runs in a process group of its own, and the whole
// group is killed when this process dies, when the lease may lapse without
// a renewal (this process frozen or cut off from its store: the pool tells
// the supervisor each renewal), and when the command exits, so that nothing
// of one execution runs while another worker runs the job. p must be valid:
// a non-empty Command.
//
// The command gets job.Payload on stdin; stdout and stderr both go to
// job.Output. Its environment is clean: PATH, HOME, LANG and TZ from sked's
// own, the variables cfg.Env names, then the payload's env, then
// SKED_JOB_ID, SKED_JOB_TYPE, SKED_ATTEMPT, SKED_GENERATION, SKED_SLOT (RFC
// 3339, UTC) and SKED_IDEMPOTENCY_KEY (see the http kind for its value).
// When ctx ends the group gets SIGTERM, then SIGKILL 5s later; when it ends
// because the lease was lost, SIGKILL at once.
func RunCommand(ctx context.Context, job *Job, p ExecPayload, cfg ExecConfig) error {
	// A name with a slash is a path, relative to the working directory (as
	// os/exec has it); a bare name is looked up in PATH.
	path := p.Command[0]
	if filepath.Base(path) == path {
		var err error
		if path, err = exec.LookPath(path); err != nil {
			if startIsPermanent(err) {
				return Permanent(fmt.Errorf("start %s: %w", p.Command[0], err))
			}
			return fmt.Errorf("start %s: %w", p.Command[0], err)
		}
	}
	if p.Dir != "" {
		// Checked here, so that a missing dir is not blamed on the program.
		if _, err := os.Stat(p.Dir); err != nil {
			return Permanent(fmt.Errorf("payload dir: %w", err))
		}
	}
	c := supervisor.Command{
		Path: path, Args: p.Command, Env: commandEnv(job, p, cfg.Env), Dir: p.Dir,
		Stdin: bytes.NewReader(job.Payload), Hold: cfg.Hold,
		Label: fmt.Sprintf("job %s generation %d", job.ID, job.Generation),
		Grace: execWaitDelay, WaitDelay: execWaitDelay,
	}
	if job.Output != nil {
		c.Output = job.Output
	}
	var renewed <-chan struct{}
	if job.lease != nil {
		c.StopBy, renewed = job.lease.stopBy()
	}
	proc, err := supervisor.Start(c)
	if err != nil {
		return fmt.Errorf("run %s: %w", p.Command[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- proc.Wait() }()
	ctxDone := ctx.Done()
	for {
		select {
		case err := <-done:
			return commandResult(ctx, p, err)
		case <-renewed:
			c.StopBy, renewed = job.lease.stopBy()
			proc.Extend(c.StopBy)
		case <-ctxDone:
			ctxDone = nil
			if errors.Is(context.Cause(ctx), errLeaseLost) {
				proc.Kill() // another worker may hold the job already
			} else {
				proc.Stop()
			}
		}
	}
}

// commandResult is RunCommand's answer for how the supervised command
// ended (err, from supervisor.Process.Wait).
func commandResult(ctx context.Context, p ExecPayload, err error) error {
	var pathErr *os.PathError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, supervisor.ErrLapsed):
		return fmt.Errorf("%s: %w", p.Command[0], errLapsed)
	case ctx.Err() != nil:
		return &stoppedError{ctxErr: ctx.Err(), err: err}
	case errors.As(err, &pathErr) && startIsPermanent(err):
		return Permanent(err) // "start PATH: …" already
	}
	return err
}

// stoppedError is a command stopped because its context ended. It says
// how the command ended, and not why: neither ctx's error in Go's words
// ("context deadline exceeded") nor the supervisor's "asked to stop",
// since the run's outcome says why ("timed out after 1h", "cancelled on
// request"); it wraps both, so that errors.Is tells a timeout from a
// cancel.
type stoppedError struct{ ctxErr, err error }

func (e *stoppedError) Error() string {
	var exit *supervisor.ExitError
	if errors.As(e.err, &exit) && exit.Stopped == supervisor.StoppedAsked {
		plain := *exit
		plain.Stopped = "" // asked by this worker as ctx ended
		return "command stopped: " + plain.Error()
	}
	return "command stopped: " + e.err.Error()
}

func (e *stoppedError) Unwrap() []error { return []error{e.ctxErr, e.err} }

// commandEnv is the whole environment of job's command (see RunCommand).
func commandEnv(job *Job, p ExecPayload, pass []string) []string {
	var env []string
	for _, k := range append(slices.Clone(execBaseEnv), pass...) {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		env = append(env, k+"="+p.Env[k])
	}
	return append(env,
		"SKED_JOB_ID="+job.ID,
		"SKED_JOB_TYPE="+job.Type,
		"SKED_ATTEMPT="+strconv.Itoa(job.Attempt),
		"SKED_GENERATION="+strconv.FormatInt(job.Generation, 10),
		"SKED_SLOT="+formatSlot(job.Slot),
		"SKED_IDEMPOTENCY_KEY="+idempotencyKey(job),
	)
}

// startIsPermanent reports whether a failure to start a command is one that
// another attempt with the same payload cannot fix.
func startIsPermanent(err error) bool {
	return errors.Is(err, exec.ErrNotFound) ||
		errors.Is(err, exec.ErrDot) ||
		errors.Is(err, fs.ErrNotExist) ||
		errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, syscall.ENOEXEC) ||
		errors.Is(err, syscall.ENOTDIR)
}

// formatSlot is the slot as RFC 3339 in UTC, or "" when the job has none.
func formatSlot(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// idempotencyKey is the key a handler's side effect can be deduplicated by:
// the job's idempotency key when it has one, else the job ID and the slot,
// which stays the same across retries and lease expiries of one firing and
// changes from one firing of a recurring job to the next.
func idempotencyKey(job *Job) string {
	if job.IdempotencyKey != "" {
		return job.IdempotencyKey
	}
	if job.Slot.IsZero() {
		return job.ID
	}
	return job.ID + ":" + formatSlot(job.Slot)
}

// parseExecPayload decodes and checks an exec payload; its errors are
// *db.ValidationError.
func parseExecPayload(raw []byte, p *ExecPayload) error {
	const example = `{"command": ["/usr/bin/backup", "--all"], "env": {"K": "V"}, "dir": "/srv"}`
	if err := decodeStrict(raw, p, "exec", example, "command", "env", "dir"); err != nil {
		return err
	}
	if len(p.Command) == 0 {
		return &db.ValidationError{Field: "payload.command", Msg: "must name a program and its arguments, e.g. " + example}
	}
	if p.Command[0] == "" {
		return &db.ValidationError{Field: "payload.command", Msg: "the program (first element) must not be empty"}
	}
	for i, a := range p.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return &db.ValidationError{Field: "payload.command", Msg: fmt.Sprintf("element %d contains a NUL byte", i)}
		}
	}
	for k, v := range p.Env {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return &db.ValidationError{Field: "payload.env", Msg: fmt.Sprintf("%q is not a valid variable name (it must be non-empty, without '=' or NUL)", k)}
		case strings.HasPrefix(k, "SKED_"):
			return &db.ValidationError{Field: "payload.env", Msg: fmt.Sprintf("%s: variables starting with SKED_ are set by sked", k)}
		case strings.IndexByte(v, 0) >= 0:
			return &db.ValidationError{Field: "payload.env", Msg: fmt.Sprintf("the value of %s contains a NUL byte", k)}
		}
	}
	if p.Dir != "" && !filepath.IsAbs(p.Dir) {
		return &db.ValidationError{Field: "payload.dir", Msg: fmt.Sprintf("%q must be an absolute path", p.Dir)}
	}
	return nil
}
