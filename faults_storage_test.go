//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sked-dev/sked/internal/testneeds"
)

// mountTmpfs mounts a tmpfs of size (e.g. "8m") on a new directory and
// unmounts it when the test ends. It skips the test, with the reason, where
// mounting is not allowed (not root, no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		testneeds.Skip(t, testneeds.Privileged, fmt.Sprintf("cannot mount a tmpfs (%v: %s)", err, bytes.TrimSpace(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// remount changes the options of the tmpfs at dir (e.g. "ro", "rw").
func remount(t *testing.T, dir, opts string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+opts, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s %s: %v: %s", dir, opts, err, out)
	}
}

// fill writes a file at path until the file system is full, and returns
// how many bytes it took.
func fill(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	var n int64
	for {
		w, err := f.Write(chunk)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// problemAnswer is an error answer of the API.
type problemAnswer struct {
	Status     int
	RetryAfter string
	Type       string
	Detail     string
	Took       time.Duration
}

// answerBound is how long a refused write may take to answer: twice the
// write bound. A test that holds answers to it lets its client wait longer
// (patientTimeout), so that a slow answer is measured and reported as slow
// instead of being cut off as no answer at all.
const (
	answerBound    = 2 * writeBound
	patientTimeout = 3 * answerBound
)

// postJob sends one create and returns its answer.
func (r *faultRig) postJob(body map[string]any) problemAnswer {
	start := time.Now()
	code, b, h := r.post("/jobs", body)
	a := problemAnswer{Status: code, Took: time.Since(start)}
	if h != nil {
		a.RetryAfter, a.Type = h.Get("Retry-After"), h.Get("Content-Type")
	}
	var p struct{ Detail string }
	json.Unmarshal(b, &p)
	a.Detail = p.Detail
	return a
}

// readyz answers GET /readyz: its status and body.
func (r *faultRig) readyz() (int, string) {
	resp, err := r.http.Get("http://" + r.addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// countLines counts the lines of a running process's log containing s.
func countLines(p *workProc, s string) int {
	return strings.Count(p.log(), s)
}

// TestFaults_DiskFull runs sked serve on a 16 MiB tmpfs, fills it while a
// job runs, frees it again, and never restarts the server.
//
// Run: one fill, up to 3000 creates to exhaust SQLite's slack. Pass: once
// the disk is full, POST /jobs answers 507 with Retry-After and a
// problem+json detail saying the disk is full, within answerBound; the refused
// job is absent (nothing half-written) and integrity_check is ok; the
// dispatcher does not spin (fewer failed claims logged than two per second
// of the full period, plus five); the job running when the disk filled
// finishes or is retried and ends done once space returns; and after the
// filler is deleted, creates answer 201 again from the same process.
func TestFaults_DiskFull(t *testing.T) {
	mnt := mountTmpfs(t, "16m")
	r := newFaultRig(t, t.TempDir())
	r.db = filepath.Join(mnt, "sked.db")
	r.http.Timeout = patientTimeout
	p := r.start("")
	waitFor(t, "sked to listen", r.listening)

	running := r.jobBody("running", false)
	running["payload"].(map[string]any)["command"] = []string{"sh", "-c", noopScript, "sh", r.jobsLog, "2"}
	if a := r.postJob(running); a.Status != http.StatusCreated {
		t.Fatalf("create the running job: %+v", a)
	}
	waitFor(t, "the job to start", func() bool { return len(execStarts(t, r.jobsLog)) > 0 })
	dueSoon := r.jobBody("due-soon", false)
	dueSoon["runAt"] = time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	if a := r.postJob(dueSoon); a.Status != http.StatusCreated {
		t.Fatalf("create the job due soon: %+v", a)
	}

	filled := time.Now()
	filler := filepath.Join(mnt, "filler")
	t.Logf("filler took %d bytes", fill(t, filler))
	payload := strings.Repeat("x", 4000)
	var full problemAnswer
	for i := range 3000 {
		body := r.jobBody("full-"+strconv.Itoa(i), false)
		body["payload"].(map[string]any)["env"] = map[string]string{"PAD": payload}
		a := r.postJob(body)
		if a.Status == http.StatusCreated {
			continue
		}
		full = a
		full.Type += " key=full-" + strconv.Itoa(i)
		break
	}
	t.Logf("refused: %+v", full)
	if full.Status != http.StatusInsufficientStorage || full.RetryAfter == "" ||
		!strings.HasPrefix(full.Type, "application/problem+json") || !strings.Contains(full.Detail, "full") {
		t.Fatalf("create on a full disk answered %+v, want 507, Retry-After and a problem detail saying the disk is full\n%s", full, p.log())
	}
	if full.Took > answerBound {
		t.Errorf("the refusal took %s, more than %s", full.Took, answerBound)
	}
	// Refused again, and quickly, while it stays full; and not ready
	// while writes fail for space (its own probe writes nothing). A small
	// write that fits in the WAL's room (the running job's renewal) may
	// land on a full disk and make it ready again, until the next write
	// that needs room fails: a create and /readyz are tried a few times.
	var code int
	var body string
	for i := range 5 {
		if a := r.postJob(r.jobBody("full-again-"+strconv.Itoa(i), false)); a.Status != http.StatusInsufficientStorage {
			t.Errorf("create %d more on a full disk answered %+v", i+1, a)
		}
		if code, body = r.readyz(); code == http.StatusServiceUnavailable {
			break
		}
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "space") {
		t.Errorf("/readyz on a full disk answered %d %s, want 503 saying it lacks space", code, body)
	}

	conn := openReadOnly(t, r.db)
	var n int
	key := strings.TrimPrefix(full.Type[strings.Index(full.Type, "key="):], "key=")
	if err := conn.QueryRow(`SELECT count(*) FROM jobs WHERE idempotency_key = ? OR idempotency_key LIKE 'full-again-%'`, key).Scan(&n); err != nil || n != 0 {
		t.Errorf("refused jobs in the database: %d (%v)", n, err)
	}
	var ok string
	if err := conn.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Errorf("integrity_check on a full disk = %q, %v", ok, err)
	}
	conn.Close()

	// Keep the disk full until the running job has ended or been given up
	// (its heartbeats fail: it cannot keep its lease) and the job due soon
	// has come due and failed to be claimed.
	waitLong(t, "the running job to end or be given up, and a claim to fail", 30*time.Second, func() bool {
		b, _ := os.ReadFile(r.jobsLog)
		over := bytes.Contains(b, []byte(`"end"`)) || countLines(p, "giving the run up")+countLines(p, "stopping the run") > 0
		return over && countLines(p, `"msg":"claim"`) > 0
	})
	claimErrs := countLines(p, `"msg":"claim"`)
	fullFor := time.Since(filled)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if limit := int(2*fullFor.Seconds()) + 5; claimErrs > limit {
		t.Errorf("%d failed claims logged in %s of full disk: the dispatcher spins", claimErrs, fullFor.Round(time.Millisecond))
	}
	waitLong(t, "creates to succeed again", 30*time.Second, func() bool {
		return r.postJob(r.jobBody("after-"+strconv.FormatInt(time.Now().UnixNano(), 10), false)).Status == http.StatusCreated
	})
	if code, body := r.readyz(); code != http.StatusOK {
		t.Errorf("/readyz once writes land again answered %d %s, want 200", code, body)
	}
	waitLong(t, "the running job and the job due soon to end done", 60*time.Second, func() bool {
		conn := openReadOnly(t, r.db)
		defer conn.Close()
		var n int
		conn.QueryRow(`SELECT count(*) FROM jobs WHERE idempotency_key IN ('running', 'due-soon') AND state = 'done'`).Scan(&n)
		return n == 2
	})
	if p.cmd.ProcessState != nil {
		t.Fatalf("sked exited: %v", p.cmd.ProcessState)
	}
	t.Logf("disk full for %s: %d failed claims and %d failed outcome records logged; refusal took %s",
		fullFor.Round(time.Millisecond), claimErrs, countLines(p, "record run outcome"), full.Took.Round(time.Millisecond))
}

// TestFaults_Locked holds the database's write lock from another process
// (a transaction begun IMMEDIATE on a connection of the test) past the
// time sked waits for it (writeBound).
//
// Run: one lock. Pass: while it is held, POST /jobs answers 503 with
// Retry-After and a problem detail saying the database is locked, within
// answerBound, and GET /readyz answers 503; once it is released, POST /jobs
// answers 201 from the same process.
func TestFaults_Locked(t *testing.T) {
	r := newFaultRig(t, t.TempDir())
	r.http.Timeout = patientTimeout
	p := r.start("")
	waitFor(t, "sked to listen", r.listening)
	if a := r.postJob(r.jobBody("before", false)); a.Status != http.StatusCreated {
		t.Fatalf("create before the lock: %+v", a)
	}

	ctx := context.Background()
	other := openWritable(t, r.db)
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	a := r.postJob(r.jobBody("locked", false))
	if a.Status != http.StatusServiceUnavailable || a.RetryAfter == "" || !strings.Contains(a.Detail, "locked") {
		t.Errorf("create while locked answered %+v, want 503 with Retry-After saying the database is locked\n%s", a, p.log())
	}
	if a.Took > answerBound {
		t.Errorf("the refusal took %s, more than %s", a.Took, answerBound)
	}
	resp, err := r.http.Get("http://" + r.addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz while locked answered %d, want 503", resp.StatusCode)
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if a := r.postJob(r.jobBody("after", false)); a.Status != http.StatusCreated {
		t.Errorf("create after the lock was released answered %+v", a)
	}
	t.Logf("refused in %s while locked", a.Took.Round(time.Millisecond))
}

// TestFaults_StartOnFullDisk starts sked serve on a new database on a file
// system with no space left.
//
// Pass: it exits non-zero, without listening, with a message that says the
// disk is full (SQLite says only "disk I/O error" of some of these writes).
func TestFaults_StartOnFullDisk(t *testing.T) {
	for _, existing := range []bool{false, true} {
		mnt := mountTmpfs(t, "4m")
		dbPath := filepath.Join(mnt, "sked.db")
		if existing { // its WAL and shared-memory files are made at start
			if out, err := exec.Command(skedBin, "migrate", "--db", dbPath).CombinedOutput(); err != nil {
				t.Fatalf("sked migrate: %v: %s", err, out)
			}
		}
		fill(t, filepath.Join(mnt, "filler"))
		msg := refusedStart(t, dbPath)
		if !strings.Contains(msg, "full") {
			t.Errorf("sked serve on a full disk (existing database: %t) said %q; want it to say the disk is full", existing, msg)
		}
		t.Logf("existing database %t: sked serve said: %s", existing, strings.TrimSpace(msg))
	}
}

// TestFaults_ReadOnly starts sked serve on a database whose file system is
// mounted read-only (as root, chmod would not stop a write: a read-only
// tmpfs does).
//
// Pass: sked serve exits non-zero within 30 s, without listening, with a
// message that says the database is read-only.
func TestFaults_ReadOnly(t *testing.T) {
	mnt := mountTmpfs(t, "16m")
	dbPath := filepath.Join(mnt, "sked.db")
	if out, err := exec.Command(skedBin, "migrate", "--db", dbPath).CombinedOutput(); err != nil {
		t.Fatalf("sked migrate: %v: %s", err, out)
	}
	remount(t, mnt, "ro")
	defer remount(t, mnt, "rw")
	msg := refusedStart(t, dbPath)
	if !strings.Contains(msg, "read-only") {
		t.Errorf("sked serve on a read-only file system said %q; want it to say read-only", msg)
	}
	t.Logf("sked serve said: %s", strings.TrimSpace(msg))
}

// TestFaults_ImmutableFile starts sked serve on a database file marked
// immutable (chattr +i) in a writable directory: SQLite then opens the
// file read-only, and, without a check at start, sked would serve and fail
// every write with a 500. It is skipped, with the reason, where chattr
// does not work.
//
// Pass: sked serve exits non-zero within 30 s with a message that says the
// database file is read-only, for a database and for an empty file (a
// database not made yet, which it would write to make).
func TestFaults_ImmutableFile(t *testing.T) {
	dir := t.TempDir()
	made, empty := filepath.Join(dir, "sked.db"), filepath.Join(dir, "new.db")
	if out, err := exec.Command(skedBin, "migrate", "--db", made).CombinedOutput(); err != nil {
		t.Fatalf("sked migrate: %v: %s", err, out)
	}
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dbPath := range []string{made, empty} {
		if out, err := exec.Command("chattr", "+i", dbPath).CombinedOutput(); err != nil {
			testneeds.Skip(t, testneeds.Privileged, fmt.Sprintf("chattr +i does not work here (%v: %s)", err, bytes.TrimSpace(out)))
		}
		defer exec.Command("chattr", "-i", dbPath).Run()
		msg := refusedStart(t, dbPath)
		if !strings.Contains(msg, "is read-only (check its permissions") {
			t.Errorf("sked serve on an immutable %s said %q; want it to say the file is read-only, and what to check", dbPath, msg)
		}
		t.Logf("sked serve said: %s", strings.TrimSpace(msg))
	}
}

// TestFaults_SecondServe starts a second sked serve on the database a first
// one is serving, then kills the first with SIGKILL.
//
// Pass: the second exits non-zero within 30 s, without touching the
// database, saying another sked (naming its pid) holds the file; after
// the first is killed, a new one starts (the lock dies with its holder).
func TestFaults_SecondServe(t *testing.T) {
	r := newFaultRig(t, t.TempDir())
	first := r.start("")
	waitFor(t, "sked to listen", r.listening)
	msg := refusedStart(t, r.db)
	want := "another sked (sked serve, or a program that embeds it; pid " + strconv.Itoa(first.cmd.Process.Pid) + ") holds " + r.db
	if !strings.Contains(msg, want) {
		t.Errorf("second sked serve said %q; want %q", msg, want)
	}
	t.Logf("second sked serve said: %s", strings.TrimSpace(msg))
	first.cmd.Process.Signal(syscall.SIGKILL)
	first.cmd.Wait()
	r.start("")
	waitFor(t, "a new sked to listen after the first was killed", r.listening)
}

// refusedStart runs sked serve on dbPath and wants it to exit with an error
// within 30 s; it returns what it wrote.
func refusedStart(t *testing.T, dbPath string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, skedBin, "serve", "--db", dbPath, "--addr", freeAddr(t))
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("sked serve did not give up within 30 s: %s", out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("sked serve exited with %v, want an error: %s", err, out)
	}
	return string(out)
}

// TestFaults_DirectoryNotWritable starts sked serve as a user who may not
// write where its database is: a new database in a directory of another
// user, an existing one there, and one whose lock file another user made.
// Root may write anywhere, so as root the test runs sked as nobody, from a
// copy of the binary that nobody may run.
//
// Pass: sked serve exits non-zero, naming the directory or the lock file,
// the user and the fix, not SQLite's "attempt to write a readonly database"
// or a bare "permission denied".
func TestFaults_DirectoryNotWritable(t *testing.T) {
	top := t.TempDir()
	bin, cred := skedBin, (*syscall.Credential)(nil)
	if os.Getuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
		bin = filepath.Join(top, "sked")
		b, err := os.ReadFile(skedBin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{filepath.Dir(top), top} {
			os.Chmod(d, 0o755)
		}
	}
	serve := func(dbPath string) string {
		t.Helper()
		cmd := exec.Command(bin, "serve", "--db", dbPath, "--addr", freeAddr(t))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("sked serve on %s exited 0: %s", dbPath, out)
		}
		return string(out)
	}
	mkdir := func(name string) string {
		dir := filepath.Join(top, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		if cred != nil {
			os.Chown(dir, int(cred.Uid), int(cred.Gid))
		}
		return dir
	}
	migrate := func(dbPath string) {
		t.Helper()
		if out, err := exec.Command(skedBin, "migrate", "--db", dbPath).CombinedOutput(); err != nil {
			t.Fatalf("sked migrate: %v: %s", err, out)
		}
		os.WriteFile(dbPath+".lock", nil, 0o644)
		if cred != nil {
			for _, f := range []string{dbPath, dbPath + ".lock"} {
				os.Chown(f, int(cred.Uid), int(cred.Gid))
			}
		}
	}

	fresh := mkdir("fresh")
	os.Chmod(fresh, 0o555)
	existing := mkdir("existing")
	migrate(filepath.Join(existing, "sked.db"))
	os.Chmod(existing, 0o555)
	for _, dir := range []string{fresh, existing} {
		msg := serve(filepath.Join(dir, "sked.db"))
		if !strings.Contains(msg, "may not create files in directory "+dir) || !strings.Contains(msg, "make the directory writable") {
			t.Errorf("sked serve in the read-only directory %s said %q; want it to name the directory and the fix", dir, msg)
		}
	}

	locked := mkdir("locked")
	lockPath := filepath.Join(locked, "sked.db.lock")
	os.WriteFile(lockPath, nil, 0o444) // made by another user, or read-only: not writable by this one
	msg := serve(filepath.Join(locked, "sked.db"))
	if !strings.Contains(msg, "may not write its lock file "+lockPath) || !strings.Contains(msg, "chown") {
		t.Errorf("sked serve with another user's lock file said %q; want it to name the file and the fix", msg)
	}
}
