package testpg_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/internal/testneeds"
	"github.com/sked-dev/sked/internal/testpg"
)

// helperEnv makes TestHelperServer start a server; TestURL runs it in a
// child process and watches the server outlive it or not.
const helperEnv = "SKED_TESTPG_HELPER"

// TestHelperServer starts the server twice (the second call must return
// the first server), prints its URL and data directory, and then exits or
// waits to be killed, as $SKED_TESTPG_HELPER says.
func TestHelperServer(t *testing.T) {
	how := os.Getenv(helperEnv)
	if how == "" {
		return // run only as the child of TestURL
	}
	u, err := testpg.URL()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := testpg.URL(); again != u || err != nil {
		t.Fatalf("second URL() = %q, %v; want the first server %q", again, err, u)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	var data string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&data); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	os.Stdout.WriteString("server " + u + " " + data + "\n")
	if how == "wait" {
		select {} // until killed
	}
}

// TestURL starts a server in a child process that then exits, or is
// killed with SIGKILL, and checks that the server stops and its directory
// is removed after the child is gone.
func TestURL(t *testing.T) {
	if _, err := testpg.URL(); err != nil {
		if missing, ok := errors.AsType[*testpg.MissingError](err); ok {
			testneeds.Skip(t, testneeds.Postgres, missing.Reason)
		}
	}
	for _, how := range []string{"exit", "wait"} {
		t.Run(how, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServer$")
			cmd.Env = append(os.Environ(), helperEnv+"="+how)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var url, data string
			for sc := bufio.NewScanner(out); url == "" && sc.Scan(); {
				if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "server" {
					url, data = f[1], f[2]
				}
			}
			if url == "" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal("the child printed no server")
			}
			if how == "wait" {
				cmd.Process.Signal(syscall.SIGKILL)
			}
			if err := cmd.Wait(); how == "exit" && err != nil {
				t.Fatalf("child: %v", err)
			}
			// The server was up: the child connected. Now it must go.
			cfg, err := pgx.ParseConfig(url)
			if err != nil {
				t.Fatal(err)
			}
			addr := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
			deadline := time.Now().Add(time.Minute)
			for {
				conn, dialErr := net.Dial("tcp", addr)
				if conn != nil {
					conn.Close()
				}
				_, statErr := os.Stat(data)
				if dialErr != nil && errors.Is(statErr, os.ErrNotExist) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("a minute after the child's end, the server listens on %s (dial: %v) or %s is there (stat: %v)", addr, dialErr, data, statErr)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
