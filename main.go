// Command sked is a job scheduler in one binary: it keeps jobs, runs and
// recurring schedules in a SQLite file and runs the HTTP API, the dispatcher,
// the worker pool and the lease reaper in one process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // IANA zones for schedules, even on a machine without them

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sked:", err)
		os.Exit(1)
	}
}

const usage = `sked runs jobs once, on time, on some machine.

Usage:
  sked serve [flags]     run the scheduler: API, dispatcher, workers, reaper
  sked migrate [flags]   create or upgrade the database and exit
  sked version           print the version
  sked check --db FILE [--client-log F] [--jobs-log F] [--server-log F]
                         judge a run's evidence: nothing lost, doubled or run unasked

Run "sked serve -h" for the flags; each has a SKED_… environment variable.`

// version is set at release builds with -ldflags "-X main.version=…".
var version = "dev"

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return errors.New("no command given")
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		cfg, err := parseServeConfig(rest, getenv, stderr)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, stderr)
	case "migrate":
		cfg, err := parseServeConfig(rest, getenv, stderr)
		if err != nil {
			return err
		}
		store, err := server.OpenStore(ctx, cfg.DB)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s is at the current schema\n", cfg.DB)
		return store.Close()
	case "check":
		return runCheck(ctx, rest, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "sked", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	default:
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// serveConfig is what `sked serve` runs with.
type serveConfig struct {
	DB                  string
	Addr                string
	Workers             int
	Lease               time.Duration
	Grace               time.Duration
	EnableExec          bool
	AllowPrivateTargets bool
	HTTPSecret          string
	MaxBody             int64
	LogFormat           string
}

// parseServeConfig reads flags, each falling back to its SKED_… variable.
func parseServeConfig(args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	fs := flag.NewFlagSet("sked serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c serveConfig
	env := func(name, def string) string {
		if v := getenv("SKED_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&c.DB, "db", env("db", "sked.db"), "SQLite database file, or a postgres:// URL shared by many nodes (SKED_DB)")
	fs.StringVar(&c.Addr, "addr", env("addr", "127.0.0.1:8080"), "HTTP listen address (SKED_ADDR)")
	fs.StringVar(&c.LogFormat, "log-format", env("log-format", "text"), "log format: text or json (SKED_LOG_FORMAT)")
	fs.StringVar(&c.HTTPSecret, "http-secret", env("http-secret", ""), "sign http jobs' requests with this HMAC secret (SKED_HTTP_SECRET)")
	var workers, lease, grace, maxBody, enableExec, allowPrivate string
	fs.StringVar(&workers, "workers", env("workers", strconv.Itoa(worker.DefaultSlots)), "jobs run at once by this process (SKED_WORKERS)")
	fs.StringVar(&lease, "lease", env("lease", db.DefaultLease.String()), "lease of a claimed job, renewed while it runs (SKED_LEASE)")
	fs.StringVar(&grace, "grace", env("grace", worker.DefaultGrace.String()), "how long shutdown waits for running jobs (SKED_GRACE)")
	fs.StringVar(&maxBody, "max-body", env("max-body", "1048576"), "largest request body in bytes (SKED_MAX_BODY)")
	fs.StringVar(&enableExec, "enable-exec", env("enable-exec", "false"), "run jobs of type exec (commands on this machine) (SKED_ENABLE_EXEC)")
	fs.StringVar(&allowPrivate, "allow-private-targets", env("allow-private-targets", "false"),
		"let http jobs call loopback, private and link-local addresses (SKED_ALLOW_PRIVATE_TARGETS)")
	if err := fs.Parse(boolFlags(args, "enable-exec", "allow-private-targets")); err != nil {
		return c, err
	}
	var errs []error
	parse := func(name, v string, f func(string) error) {
		if err := f(v); err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: %w", name, v, err))
		}
	}
	parse("workers", workers, func(v string) (err error) {
		if c.Workers, err = strconv.Atoi(v); err == nil && c.Workers < 1 {
			err = errors.New("must be at least 1")
		}
		return err
	})
	parse("lease", lease, func(v string) (err error) {
		if c.Lease, err = time.ParseDuration(v); err == nil && c.Lease < 300*time.Millisecond {
			err = errors.New("must be at least 300ms")
		}
		return err
	})
	parse("grace", grace, func(v string) (err error) { c.Grace, err = time.ParseDuration(v); return err })
	parse("max-body", maxBody, func(v string) (err error) { c.MaxBody, err = strconv.ParseInt(v, 10, 64); return err })
	parse("enable-exec", enableExec, func(v string) (err error) { c.EnableExec, err = strconv.ParseBool(v); return err })
	parse("allow-private-targets", allowPrivate, func(v string) (err error) { c.AllowPrivateTargets, err = strconv.ParseBool(v); return err })
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q: use text or json", c.LogFormat))
	}
	return c, errors.Join(errs...)
}

// boolFlags turns bare "--name" into "--name=true" for the named flags, which
// are strings so that their SKED_… variables can say false.
func boolFlags(args []string, names ...string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		for _, n := range names {
			if a == "-"+n || a == "--"+n {
				a += "=true"
			}
		}
		out = append(out, a)
	}
	return out
}

// serve runs the appliance until ctx is done.
func serve(ctx context.Context, cfg serveConfig, stderr io.Writer) error {
	var logHandler slog.Handler = slog.NewTextHandler(stderr, nil)
	if cfg.LogFormat == "json" {
		logHandler = slog.NewJSONHandler(stderr, nil)
	}
	return server.New(server.Config{
		DB: cfg.DB, Addr: cfg.Addr, Workers: cfg.Workers, Lease: cfg.Lease, Grace: cfg.Grace,
		EnableExec: cfg.EnableExec, AllowPrivateTargets: cfg.AllowPrivateTargets, HTTPSecret: cfg.HTTPSecret,
		MaxBodyBytes: cfg.MaxBody, Logger: slog.New(logHandler), Version: version,
	}).Run(ctx)
}
