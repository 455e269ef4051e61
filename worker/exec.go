package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
)

// execWaitDelay is how long a command may take to exit after SIGTERM (and
// how long its output may stay open after it exits) before it is killed.
const execWaitDelay = 5 * time.Second

// ExecPayload is the payload of kind "exec".
type ExecPayload struct {
	// Command is the program and its arguments; it runs without a shell.
	// A program name without a slash is looked up in the server's PATH.
	Command []string `json:"command"`
	// Env is added to the server's environment.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the absolute working directory; empty means the server's.
	Dir string `json:"dir,omitempty"`
}

// Exec returns the handler of kind "exec". It runs the payload's command
// (see ExecPayload) in its own process group, with the payload document on
// stdin and stdout and stderr both written to job.Output. The environment is
// the server's, then the payload's env, then SKED_JOB_ID, SKED_JOB_TYPE,
// SKED_ATTEMPT, SKED_GENERATION, SKED_SLOT (RFC 3339, UTC) and
// SKED_IDEMPOTENCY_KEY (see the http kind for its value).
//
// Exit status 0 succeeds. Another exit status is a retryable error
// ("exit status N", an *exec.ExitError). A payload that does not validate, a
// program that is missing or not executable, or a missing working directory
// is a Permanent error. When ctx ends, the process group gets SIGTERM, then
// SIGKILL 5s later if the command has not exited, and the error wraps
// ctx.Err(), so errors.Is tells context.DeadlineExceeded (timeout) from
// context.Canceled. Processes the command left in its group are killed then.
func Exec() HandlerFunc {
	return func(ctx context.Context, job *Job) error {
		var p ExecPayload
		if err := parseExecPayload(job.Payload, &p); err != nil {
			return Permanent(err)
		}
		return RunCommand(ctx, job, p)
	}
}

// RunCommand runs p's command for job exactly as the exec kind does (see
// Exec): its own process group, job.Payload on stdin, output to job.Output,
// the SKED_* environment, SIGTERM to the group when ctx ends. p must be
// valid: a non-empty Command. `sked work` runs its command with it. On Linux
// the command is also killed if the process that started it dies, so a
// worker that crashes does not leave its run going while the job's lease
// expires and another worker runs it.
func RunCommand(ctx context.Context, job *Job, p ExecPayload) error {
	var out io.Writer = io.Discard
	if job.Output != nil {
		out = job.Output
	}

	cmd := exec.CommandContext(ctx, p.Command[0], p.Command[1:]...)
	cmd.Dir = p.Dir
	cmd.Stdin = bytes.NewReader(job.Payload)
	// One writer for both: os/exec then uses one pipe, so stdout and
	// stderr interleave in the order the command wrote them.
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		cmd.Env = append(cmd.Env, k+"="+p.Env[k])
	}
	cmd.Env = append(cmd.Env,
		"SKED_JOB_ID="+job.ID,
		"SKED_JOB_TYPE="+job.Type,
		"SKED_ATTEMPT="+strconv.Itoa(job.Attempt),
		"SKED_GENERATION="+strconv.FormatInt(job.Generation, 10),
		"SKED_SLOT="+formatSlot(job.Slot),
		"SKED_IDEMPOTENCY_KEY="+idempotencyKey(job),
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
	cmd.Cancel = func() error { return signalGroup(cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = execWaitDelay

	if err := cmd.Start(); err != nil {
		if startIsPermanent(err) {
			return Permanent(fmt.Errorf("start %s: %w", p.Command[0], err))
		}
		return fmt.Errorf("start %s: %w", p.Command[0], err)
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		// os/exec kills only the group leader when WaitDelay runs out;
		// whatever else is left in the group goes too.
		_ = signalGroup(cmd.Process.Pid, syscall.SIGKILL)
		if err != nil {
			return fmt.Errorf("command stopped: %w (%v)", ctx.Err(), err)
		}
	}
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState.Success() {
		// The command exited 0 but something it started kept its
		// output open; the command itself succeeded.
		return nil
	}
	return err
}

// signalGroup sends sig to the process group led by pid. A group that is
// already gone is os.ErrProcessDone, which os/exec does not report.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
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
