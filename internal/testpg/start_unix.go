//go:build unix

package testpg

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// watchdog is the write end of the pipe the watchdog process reads: the
// pipe closes only when this process exits, and the watchdog then stops
// the server. It is held here, never read, so that it is never collected
// (and closed).
//
//lint:ignore U1000 held, not read: see above
var watchdog any

// start finds the binaries, runs initdb and starts the server.
func start() (string, error) {
	bin, err := binDir()
	if err != nil {
		return "", err
	}
	// As root, every PostgreSQL program runs as the postgres user.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", &MissingError{"PostgreSQL refuses to run as root, and there is no postgres user to run it as (" + err.Error() + ")"}
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "sked-pg")
	if err != nil {
		return "", fmt.Errorf("start postgres: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("start postgres: %w", err)
		}
	}
	command := func(path string, args ...string) *exec.Cmd {
		cmd := exec.Command(path, args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setsid: true}
		return cmd
	}

	// The watchdog waits for the end of this process (the end of its
	// stdin), then stops the server and removes its directory. Its own
	// session keeps a Ctrl-C at the terminal from killing it before it has
	// cleaned up, and its own PATH from a PATH that is gone by then.
	w := command("/bin/sh", "-c", `while read -r _; do :; done; "$1" -D "$2/data" stop -m immediate >/dev/null 2>&1; rm -rf "$2"`,
		"sh", filepath.Join(bin, "pg_ctl"), dir)
	w.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
	pipe, err := w.StdinPipe()
	if err == nil {
		err = w.Start()
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("start postgres watchdog: %w", err)
	}
	watchdog = pipe

	data := filepath.Join(dir, "data")
	if out, err := command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb in %s: %v\n%s", dir, err, out)
	}
	// A port the kernel calls free; another process may take it before the
	// server binds it, so a start that finds it taken tries another.
	for try := 1; ; try++ {
		port, err := freePort()
		if err != nil {
			return "", fmt.Errorf("start postgres: %w", err)
		}
		log := filepath.Join(dir, "server.log")
		out, err := command(filepath.Join(bin, "pg_ctl"), "-D", data, "-l", log, "-w", "-t", "60", "start", "-o",
			"-c listen_addresses=127.0.0.1 -p "+port+" -k "+dir+
				" -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off").CombinedOutput()
		if err == nil {
			return "postgres://postgres@127.0.0.1:" + port + "/postgres?sslmode=disable", nil
		}
		logged, _ := os.ReadFile(log)
		if try == 5 || !strings.Contains(string(logged), "could not bind") {
			return "", fmt.Errorf("start postgres in %s: %v\n%s\n%s", dir, err, out, logged)
		}
	}
}

// binDir returns the directory of the PostgreSQL programs: the one of
// initdb on PATH, else the newest /usr/lib/postgresql/VERSION/bin (Debian
// and Ubuntu keep them off PATH).
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		return "", &MissingError{"no PostgreSQL is installed (no initdb on PATH or in /usr/lib/postgresql/*/bin)"}
	}
	version := func(initdb string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(initdb))), 64)
		return v
	}
	return filepath.Dir(slices.MaxFunc(found, func(a, b string) int { return cmp.Compare(version(a), version(b)) })), nil
}

// freePort returns a TCP port on 127.0.0.1 that is free now.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}
