package worker

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sked-dev/sked/supervisor"
)

// execJob is a job of kind exec that runs command.
func execJob(t testing.TB, p ExecPayload) *Job {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return &Job{
		ID:         "j1",
		Type:       "exec",
		Payload:    raw,
		Attempt:    2,
		Generation: 7,
		Slot:       time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC),
		Output:     &Tail{Max: 4096},
	}
}

func TestExec(t *testing.T) {
	t.Parallel()

	t.Run("Success", func(t *testing.T) {
		t.Parallel()
		job := execJob(t, ExecPayload{Command: []string{"/bin/sh", "-c", "echo hi; echo err >&2"}})
		if err := Exec(ExecConfig{})(context.Background(), job); err != nil {
			t.Fatalf("Exec: %v", err)
		}
		if got, want := job.Output.String(), "hi\nerr\n"; got != want {
			t.Errorf("output = %q, want %q", got, want)
		}
	})

	t.Run("Env", func(t *testing.T) {
		t.Parallel()
		job := execJob(t, ExecPayload{
			Command: []string{"/bin/sh", "-c", `printf '%s|%s|%s|%s|%s|%s|%s\n' "$SKED_JOB_ID" "$SKED_ATTEMPT" "$SKED_GENERATION" "$SKED_SLOT" "$SKED_IDEMPOTENCY_KEY" "$SKED_JOB_TYPE" "$GREETING"`},
			Env:     map[string]string{"GREETING": "hello world"},
		})
		if err := Exec(ExecConfig{})(context.Background(), job); err != nil {
			t.Fatalf("Exec: %v", err)
		}
		want := "j1|2|7|2026-03-08T07:00:00Z|j1:2026-03-08T07:00:00Z|exec|hello world\n"
		if got := job.Output.String(); got != want {
			t.Errorf("output = %q, want %q", got, want)
		}
	})

	t.Run("IdempotencyKey", func(t *testing.T) {
		t.Parallel()
		job := execJob(t, ExecPayload{Command: []string{"/bin/sh", "-c", `echo "$SKED_IDEMPOTENCY_KEY"`}})
		job.IdempotencyKey = "order-42"
		if err := Exec(ExecConfig{})(context.Background(), job); err != nil {
			t.Fatalf("Exec: %v", err)
		}
		if got, want := job.Output.String(), "order-42\n"; got != want {
			t.Errorf("output = %q, want %q", got, want)
		}
	})

	t.Run("Stdin", func(t *testing.T) {
		t.Parallel()
		job := execJob(t, ExecPayload{Command: []string{"cat"}})
		if err := Exec(ExecConfig{})(context.Background(), job); err != nil {
			t.Fatalf("Exec: %v", err)
		}
		if got, want := job.Output.String(), string(job.Payload); got != want {
			t.Errorf("output = %q, want the payload %q", got, want)
		}
	})

	t.Run("Dir", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		job := execJob(t, ExecPayload{Command: []string{"pwd"}, Dir: dir})
		if err := Exec(ExecConfig{})(context.Background(), job); err != nil {
			t.Fatalf("Exec: %v", err)
		}
		want, err := filepath.EvalSymlinks(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(job.Output.String()); got != want {
			t.Errorf("pwd = %q, want %q", got, want)
		}
	})

	t.Run("RelativeToDir", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "script"), []byte("#!/bin/sh\necho in dir\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		job := execJob(t, ExecPayload{Command: []string{"./script"}, Dir: dir})
		if err := Exec(ExecConfig{})(context.Background(), job); err != nil || job.Output.String() != "in dir\n" {
			t.Fatalf("Exec = %v, output %q; want ./script run in its dir", err, job.Output.String())
		}
	})

	t.Run("ExitNonZero", func(t *testing.T) {
		t.Parallel()
		job := execJob(t, ExecPayload{Command: []string{"/bin/sh", "-c", "echo failing; exit 3"}})
		err := Exec(ExecConfig{})(context.Background(), job)
		if err == nil || IsPermanent(err) {
			t.Fatalf("Exec = %v, want a retryable error", err)
		}
		if got, want := err.Error(), "exit status 3"; got != want {
			t.Errorf("error = %q, want %q", got, want)
		}
		var ee *supervisor.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("error %v does not carry exit code 3", err)
		}
		if got, want := job.Output.String(), "failing\n"; got != want {
			t.Errorf("output = %q, want %q", got, want)
		}
	})

	t.Run("MissingBinary", func(t *testing.T) {
		t.Parallel()
		job := execJob(t, ExecPayload{Command: []string{"sked-no-such-program-xyz"}})
		if err := Exec(ExecConfig{})(context.Background(), job); !IsPermanent(err) {
			t.Fatalf("Exec = %v, want a permanent error", err)
		}
		job = execJob(t, ExecPayload{Command: []string{"/nonexistent/bin/prog"}})
		err := Exec(ExecConfig{})(context.Background(), job)
		if !IsPermanent(err) {
			t.Fatalf("Exec = %v, want a permanent error", err)
		}
		if want := "start /nonexistent/bin/prog: no such file or directory"; err.Error() != want {
			t.Errorf("Exec = %q, want %q", err, want)
		}
	})

	t.Run("NotExecutable", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "script")
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		job := execJob(t, ExecPayload{Command: []string{path}})
		if err := Exec(ExecConfig{})(context.Background(), job); !IsPermanent(err) {
			t.Fatalf("Exec = %v, want a permanent error", err)
		}
	})

	t.Run("MissingDir", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "gone")
		job := execJob(t, ExecPayload{Command: []string{"/bin/true"}, Dir: dir})
		err := Exec(ExecConfig{})(context.Background(), job)
		if !IsPermanent(err) {
			t.Fatalf("Exec = %v, want a permanent error", err)
		}
		if want := "payload dir: stat " + dir + ": no such file or directory"; err.Error() != want {
			t.Errorf("Exec = %q, want %q", err, want)
		}
	})

	t.Run("BadPayload", func(t *testing.T) {
		t.Parallel()
		job := execJob(t, ExecPayload{})
		if err := Exec(ExecConfig{})(context.Background(), job); !IsPermanent(err) {
			t.Fatalf("Exec = %v, want a permanent error", err)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		job := execJob(t, ExecPayload{Command: []string{"sleep", "30"}})
		err := Exec(ExecConfig{})(ctx, job)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Exec = %v, want context.DeadlineExceeded", err)
		}
		// The run's error says how the command ended; its outcome, not Go's
		// words for the context, says why.
		// Nor the supervisor's "asked to stop": nobody asked but the timeout.
		if want := "command stopped: signal: terminated"; err.Error() != want {
			t.Errorf("Exec = %q; want %q, not the context nor who asked", err, want)
		}
		if IsPermanent(err) {
			t.Errorf("Exec = %v, a timeout is not permanent", err)
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		job := execJob(t, ExecPayload{Command: []string{"/bin/sh", "-c", "echo started; exec sleep 30"}})
		job.Output = &Tail{Max: 4096}
		done := make(chan error, 1)
		go func() { done <- Exec(ExecConfig{})(ctx, job) }()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Exec = %v, want context.Canceled", err)
		}
	})

	t.Run("KillsGroup", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The shell starts a child in the background and waits: the
		// child holds the output open and must die with the group.
		job := execJob(t, ExecPayload{Command: []string{"/bin/sh", "-c", "sleep 30 & echo $!; wait"}})
		go func() {
			for job.Output.String() == "" {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
		}()
		err := Exec(ExecConfig{})(ctx, job)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Exec = %v, want context.Canceled", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(job.Output.String()))
		if err != nil {
			t.Fatalf("output %q: %v", job.Output.String(), err)
		}
		waitGone(t, pid)
	})

	t.Run("OutputTail", func(t *testing.T) {
		t.Parallel()
		job := execJob(t, ExecPayload{Command: []string{"/bin/sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done; echo last"}})
		job.Output = &Tail{Max: 64}
		if err := Exec(ExecConfig{})(context.Background(), job); err != nil {
			t.Fatalf("Exec: %v", err)
		}
		got := job.Output.String()
		if len(got) != 64 || !strings.HasSuffix(got, "line 1999\nlast\n") {
			t.Errorf("output = %q (%d bytes), want the last 64 bytes", got, len(got))
		}
	})
}

// waitGone fails t unless process pid has exited (gone, or a zombie waiting
// for its reaper) within a generous bound.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err == nil {
			// The state follows the parenthesised command name.
			s := string(stat)
			if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 && (s[i+2] == 'Z' || s[i+2] == 'X') {
				return
			}
		} else if syscall.Kill(pid, 0) == syscall.ESRCH {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs after its group was stopped", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExec_CleanEnv: a command gets PATH, HOME, LANG and TZ, the variables
// ExecConfig.Env names, the payload's env and the SKED_* of its run, and
// nothing else of the server's environment: no token, no secret.
func TestExec_CleanEnv(t *testing.T) {
	for k, v := range map[string]string{
		"SKED_TOKEN": "secret-token", "SKED_HTTP_SECRET": "secret-hmac", "AWS_SECRET_ACCESS_KEY": "secret-aws",
		"PASSED": "passed-value", "HOME": "/home/sked", "LANG": "C.UTF-8", "TZ": "Europe/Berlin",
	} {
		t.Setenv(k, v)
	}
	job := execJob(t, ExecPayload{Command: []string{"env"}, Env: map[string]string{"FROM_PAYLOAD": "p"}})
	if err := Exec(ExecConfig{Env: []string{"PASSED", "NOT_SET_ANYWHERE"}})(context.Background(), job); err != nil {
		t.Fatalf("Exec: %v", err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(job.Output.String()), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	want := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": "/home/sked", "LANG": "C.UTF-8", "TZ": "Europe/Berlin",
		"PASSED": "passed-value", "FROM_PAYLOAD": "p",
		"SKED_JOB_ID": "j1", "SKED_JOB_TYPE": "exec", "SKED_ATTEMPT": "2", "SKED_GENERATION": "7",
		"SKED_SLOT": "2026-03-08T07:00:00Z", "SKED_IDEMPOTENCY_KEY": "j1:2026-03-08T07:00:00Z",
	}
	if !maps.Equal(got, want) {
		t.Fatalf("environment =\n%v\nwant\n%v", got, want)
	}
}

// BenchmarkExec runs /bin/true as the exec kind does, under its supervisor:
// what a command costs beyond its own run.
func BenchmarkExec(b *testing.B) {
	for b.Loop() {
		if err := Exec(ExecConfig{})(context.Background(), execJob(b, ExecPayload{Command: []string{"/bin/true"}})); err != nil {
			b.Fatal(err)
		}
	}
}
