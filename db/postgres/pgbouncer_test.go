package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/internal/testneeds"
)

// TestOpen_ThroughPgBouncer opens a store through PgBouncer in session
// mode, the pooler docs/postgresql.md points to, and runs a job's life
// through it: the migration under its advisory lock, a wake-up heard by
// LISTEN, a claim and a finish. PgBouncer refuses a connection whose
// start names a parameter it does not know, such as plan_cache_mode.
func TestOpen_ThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := postgrestest.ServerURL(t)
	bouncer := startPgBouncer(t, server)

	b := make([]byte, 6)
	rand.Read(b)
	name := "sked_pgbouncer_" + hex.EncodeToString(b)
	postgrestest.Exec(t, server, "CREATE DATABASE "+name)
	t.Cleanup(func() { postgrestest.Exec(t, server, "DROP DATABASE "+name+" WITH (FORCE)") })

	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	u.Host, u.Path = bouncer, "/"+name
	s, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatalf("open through PgBouncer: %v", err)
	}
	t.Cleanup(func() { s.Close() })

	if mode, err := postgres.Setting(ctx, s, "plan_cache_mode"); err != nil || mode != "force_custom_plan" {
		t.Errorf("plan_cache_mode of the pool's connections = %q, %v; want force_custom_plan", mode, err)
	}
	wakeCtx, stop := context.WithCancel(ctx)
	defer stop()
	postgrestest.AwaitListening(t, s, s.Wakeups(wakeCtx), "pgbouncer")

	claims, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"pgbouncer"}, Max: 1, Lease: time.Minute})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim through PgBouncer: %d jobs, %v; want 1", len(claims), err)
	}
	job, err := s.RunFinish(ctx, db.RunFinishParams{JobID: claims[0].Job.ID, Generation: claims[0].Job.LeaseGeneration, Outcome: db.OutcomeSucceeded})
	if err != nil || job.State != db.StateDone {
		t.Fatalf("finish through PgBouncer: state %q, %v; want %q", job.State, err, db.StateDone)
	}
}

// startPgBouncer runs PgBouncer in session mode in front of the server at
// serverURL, trusting its user, until the test ends, and returns the
// address it listens on. It skips the test where PgBouncer is not
// installed (testneeds.PgBouncer).
func startPgBouncer(t *testing.T, serverURL string) (addr string) {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/pgbouncer"); statErr != nil {
			testneeds.Skip(t, testneeds.PgBouncer, "no pgbouncer on PATH or in /usr/sbin")
		}
		bin = "/usr/sbin/pgbouncer"
	}
	server, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	// PgBouncer refuses to run as root: it runs as postgres then.
	// Its directory is not under t.TempDir, whose parent only root reads.
	var cred *syscall.Credential
	dir, err := os.MkdirTemp("", "sked-pgbouncer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("PgBouncer refuses to run as root, and there is no postgres user to run it as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %s
unix_socket_dir =
pool_mode = session
auth_type = trust
auth_file = %s
max_client_conn = 100
default_pool_size = 40
log_connections = 0
log_disconnections = 0
`, server.Hostname(), server.Port(), port, filepath.Join(dir, "users.txt"))
	for file, text := range map[string]string{"pgbouncer.ini": ini, "users.txt": fmt.Sprintf("%q \"\"\n", server.User.Username())} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("pgbouncer exited before it listened on %s: %v", addr, err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer does not listen on %s after 10s: %v", addr, err)
		}
	}
}
