package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sked-dev/sked/bench"
	"github.com/sked-dev/sked/checker"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/sqlite"
)

func backupCmd(env Env) *cobra.Command {
	var (
		dbPath string
		force  bool
	)
	cmd := &cobra.Command{
		Use:   "backup [--db sked.db] [--force] FILE",
		Short: "Write an online, consistent copy of the SQLite database to FILE",
		Long: "sked backup writes an online, consistent copy of the SQLite database with VACUUM INTO: it reads one snapshot,\n" +
			"so a running sked goes on writing meanwhile. The copy is written beside FILE and renamed into place, so FILE is\n" +
			"never half written. Back up PostgreSQL with pg_dump.",
		Args: exactArgs(1, "one FILE to write the copy to"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return backup(cmd.Context(), dbPath, args[0], force, env.Stdout)
		},
	}
	cmd.Flags().StringVar(&dbPath, "db", "sked.db", "SQLite database file to copy")
	withEnv(cmd.Flags(), "db")
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	return cmd
}

// backup copies the database at dbPath to out (see backupCmd).
func backup(ctx context.Context, dbPath, out string, force bool, stdout io.Writer) error {
	if postgres.IsURL(dbPath) {
		return usagef("sked backup copies a SQLite file; back up PostgreSQL with pg_dump while the nodes run " +
			"(pg_dump --format=custom --file=sked.pgdump URL) and restore it with pg_restore; see docs/postgresql.md")
	}
	if _, err := os.Stat(dbPath); errors.Is(err, fs.ErrNotExist) {
		return usagef("back up %s: there is no such file; give the database sked serve uses with --db (SKED_DB)", dbPath)
	} else if err != nil {
		return fmt.Errorf("back up %s: %w", dbPath, err)
	}
	if _, err := os.Stat(out); err == nil && !force {
		return usagef("%s exists; pass --force to replace it", out)
	}
	if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
		return usagef("directory %s does not exist; create it (mkdir -p %s) or write the copy elsewhere", filepath.Dir(out), filepath.Dir(out))
	}
	removeStaleCopies(out)
	tmp := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".tmp-"+strconv.Itoa(os.Getpid()))
	os.Remove(tmp)
	defer os.Remove(tmp)
	defer os.Remove(tmp + "-journal") // of a copy that failed midway
	jobs, runs, err := sqlite.Backup(ctx, dbPath, tmp)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("move copy into place: %w", err)
	}
	st, err := os.Stat(out)
	if err != nil {
		return fmt.Errorf("back up %s: %w", dbPath, err)
	}
	fmt.Fprintf(stdout, "wrote %s: %d bytes, %d jobs, %d runs (a consistent copy of %s)\n", out, st.Size(), jobs, runs, dbPath)
	return nil
}

// staleCopyAge is how long after its last write a backup's temporary copy
// is taken for one a killed sked backup left: a copy being made is
// written all the time.
const staleCopyAge = time.Hour

// removeStaleCopies removes the temporary copies (and their journals) of
// out that earlier runs of sked backup, killed midway (kill -9, the OOM
// killer), left beside it: a nightly backup would otherwise fill the disk
// with them.
func removeStaleCopies(out string) {
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*"))
	for _, f := range left {
		if st, err := os.Stat(f); err == nil && time.Since(st.ModTime()) > staleCopyAge {
			os.Remove(f)
		}
	}
}

func healthcheckCmd(env Env) *cobra.Command {
	var (
		addr    string
		ready   bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 if the local server answers /healthz (for containers)",
		Long:  "sked healthcheck GETs /healthz (or /readyz with --ready) of a local sked and fails unless it answers 200:\na container HEALTHCHECK for images with no shell or curl.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return healthcheck(cmd.Context(), addr, ready, timeout, env.Stdout)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&addr, "addr", defaultAddr, "address sked serve listens on; a wildcard host is checked on loopback")
	withEnv(fs, "addr")
	fs.BoolVar(&ready, "ready", false, "check /readyz (the database takes writes) instead of /healthz")
	fs.DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}

// healthcheck checks the sked at addr (see healthcheckCmd).
func healthcheck(ctx context.Context, addr string, ready bool, timeout time.Duration, stdout io.Writer) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--addr %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	path := "/healthz"
	if ready {
		path = "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, port) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("check %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("check %s: nothing listens at %s; is sked serve running, and listening on --addr (SKED_ADDR)?", url, net.JoinHostPort(host, port))
	}
	if err != nil {
		return fmt.Errorf("check %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("check %s: %s: %s", url, resp.Status, body)
	}
	fmt.Fprintf(stdout, "%s: %s", url, body)
	return nil
}

func checkCmd(env Env) *cobra.Command {
	var (
		in    checker.Input
		allow string
		end   rfc3339Value
	)
	cmd := &cobra.Command{
		Use:   "check --db FILE [--client-log F] [--jobs-log F] [--server-log F] [--finished]",
		Short: "Judge a run's evidence: nothing lost, doubled, run unasked or silently missed",
		Long: "sked check judges the evidence of a run (the database and the logs of the test client, the no-op jobs and the\n" +
			"server) and fails when a guarantee was broken, printing each violation with its evidence.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if in.DB == "" {
				return usagef("--db is required: the run's SQLite database")
			}
			if postgres.IsURL(in.DB) {
				return usagef("sked check reads a SQLite file; it does not check PostgreSQL databases")
			}
			in.End = time.Time(end)
			if allow != "" {
				in.AllowTypes = strings.Split(allow, ",")
			}
			r, err := checker.Check(cmd.Context(), in)
			if err != nil {
				return err
			}
			for _, v := range r.Violations {
				fmt.Fprintln(env.Stdout, v)
			}
			fmt.Fprintln(env.Stdout, r.Summary())
			if len(r.Violations) > 0 {
				return fmt.Errorf("check: %d violations", len(r.Violations))
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&in.DB, "db", "", "the run's SQLite database, opened read-only (required)")
	fs.StringVar(&in.ClientLog, "client-log", "", "JSON lines of acknowledged enqueues and cancels")
	fs.StringVar(&in.JobsLog, "jobs-log", "", "JSON lines of the no-op jobs' starts and ends")
	fs.StringVar(&in.ServerLog, "server-log", "", "sked serve --log-format json output")
	fs.StringVar(&allow, "allow-type", "", "comma-separated job types that need no enqueue (internal jobs)")
	fs.BoolVar(&in.Finished, "finished", false, "the run is over and drained: acknowledged jobs must be final and have executed, schedules must not have stopped firing")
	fs.Var(&end, "end", "when the run ended, RFC 3339 (default: the latest time in the evidence)")
	return cmd
}

func benchCmd(env Env) *cobra.Command {
	var (
		cfg        bench.Config
		cpuProfile string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure sked on temporary SQLite databases, or on PostgreSQL with --db",
		Long: "sked bench measures sked on temporary SQLite databases, or on fresh schemas of a PostgreSQL server with --db,\n" +
			"and prints one table with the command line that reproduces it.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if s := strings.ToLower(cfg.Sync); s != "full" && s != "normal" {
				return usagef("--sync %q: use full or normal", cfg.Sync)
			}
			if cfg.Nodes < 1 || cfg.Nodes > 1 && cfg.DB == "" {
				return usagef("--nodes %d: use 1, or more with --db postgres://…", cfg.Nodes)
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("create cpu profile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("start cpu profile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			r, err := bench.Run(cmd.Context(), cfg, env.Stderr)
			if err != nil {
				return err
			}
			load, _ := os.ReadFile("/proc/loadavg")
			fields := strings.Fields(string(load))
			return r.Write(env.Stdout, strings.Join(fields[:min(3, len(fields))], " "))
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&cfg.Jobs, "jobs", 50_000, "jobs of the throughput run")
	fs.IntVar(&cfg.Spike, "spike", 2_000, "jobs due at the same instant")
	fs.IntVar(&cfg.Backlog, "backlog", 1_000_000, "future jobs waiting during the backlog spike")
	fs.IntVar(&cfg.Workers, "workers", 256, "worker slots of the throughput run (a spike gets at least --spike)")
	fs.StringVar(&cfg.Dir, "db-dir", os.TempDir(), "directory for the temporary databases")
	fs.StringVar(&cfg.Sync, "sync", "full", "SQLite synchronous: full (every commit fsynced) or normal")
	fs.StringVar(&cfg.DB, "db", "", "a postgres:// URL: measure PostgreSQL (a fresh schema per run, dropped after) instead of SQLite")
	fs.IntVar(&cfg.Nodes, "nodes", 1, "with --db: nodes in this process, each with its own connection pool and worker pool")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	return cmd
}
