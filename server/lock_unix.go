//go:build unix

package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// lockWait is how long lockDB waits for a lock that is held: a previous sked
// serve that was just killed holds it a moment longer, through a child it
// was forking (the descriptor is close-on-exec, but not before the exec) and
// through the supervisors of its commands, which hold it until they have
// killed them.
const lockWait = 3 * time.Second

// flockWait takes an exclusive flock on f, trying again every 50 ms for up
// to wait while another process holds it.
func flockWait(f *os.File, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lockDB takes an exclusive flock on the database's lock file (see
// lockName), and writes this process's id into it. A second sked serve on
// the same database fails here, naming the holder, instead of sharing the
// file: two dispatchers would each run their own reaper and clock guard over
// one set of leases. The kernel drops the lock when the last descriptor of
// the returned file is closed: when the process and the supervisors it gave
// the file to have exited or been killed, so a crash never leaves it behind.
func lockDB(path string) (*os.File, error) {
	name := lockName(path)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, syscall.EROFS) {
		return nil, fmt.Errorf("database %s is on a read-only file system; sked serve writes to it and beside it (%w)", path, err)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("database %s: directory %s does not exist; create it (mkdir -p %s) or give --db a path in one that does", path, filepath.Dir(name), filepath.Dir(name))
	}
	if errors.Is(err, fs.ErrPermission) {
		if unix.Access(filepath.Dir(name), unix.W_OK) == nil {
			return nil, fmt.Errorf("database %s: this user (uid %d) may not write its lock file %s, made by another user (root, say); "+
				"give the database's files (%s*) to this user with chown, or run sked serve as their owner", path, os.Getuid(), name, path)
		}
		return nil, notWritable(path)
	}
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err) // *PathError names the file
	}
	// SQLite makes its -wal and -shm files beside the database too: a
	// directory this user may not write fails later, and less clearly.
	if err := unix.Access(filepath.Dir(name), unix.W_OK); errors.Is(err, unix.EACCES) {
		f.Close()
		return nil, notWritable(path)
	}
	if err := flockWait(f, lockWait); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if b, rerr := os.ReadFile(name); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
						return nil, fmt.Errorf("the sked serve that held %s (pid %d) is gone, but commands it started are still being stopped and hold its lock (ps shows them under sked-supervisor); try again in a moment", path, pid)
					}
					holder = "pid " + strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("another sked (sked serve, or a program that embeds it; %s) holds %s (lock file %s); stop it first, or give this one its own --db (embedded: Config.DB)", holder, path, name)
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	// The pid is for the message above only; the lock is the flock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockName is the lock file of the SQLite database at path: the file it
// names, with symbolic links resolved, and ".lock". A link to the database
// or to its directory names the same lock as the database's own path, as
// SQLite, which resolves them too, names the same -wal file: two sked
// serves on one database through two names would run the same jobs at
// once. (A hard link is another name SQLite cannot tell either; its
// documentation says not to make one.)
func lockName(path string) string {
	// A link whose target does not exist yet (SQLite makes it) is followed
	// to that target, as the database will be there.
	for range 40 { // as many links as the kernel follows
		target, err := os.Readlink(path)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real + ".lock"
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil { // a new database
		return filepath.Join(dir, filepath.Base(path)) + ".lock"
	}
	return path + ".lock"
}

// notWritable is the error for a database whose directory this process may
// not write to.
func notWritable(path string) error {
	dir := filepath.Dir(path)
	return fmt.Errorf("database %s: this user (uid %d) may not create files in directory %s, where sked serve keeps the database, its lock file and SQLite's -wal and -shm files; "+
		"make the directory writable for it (chown or chmod), or give --db a path in one that is", path, os.Getuid(), dir)
}
