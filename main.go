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
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // IANA zones for schedules, even on a machine without them

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/buildinfo"
	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sked:", err)
		os.Exit(exitCode(err))
	}
}

const usage = `sked runs jobs once, on time, on some machine.

Usage:
  sked serve [flags]     run the scheduler: API, dispatcher, workers, reaper
  sked migrate [flags]   create or upgrade the database and exit
  sked work [flags] -- CMD ARGS…
                         a worker on any machine: claims jobs from a server, runs CMD per job
  sked version           print the version, commit, commit date and Go version (also --version)
  sked check --db FILE [--client-log F] [--jobs-log F] [--server-log F] [--finished]
                         judge a run's evidence: nothing lost, doubled, run unasked or silently missed
  sked backup FILE       an online, consistent copy of the database
  sked healthcheck       exit 0 if the local server answers /healthz (for containers)
  sked add | ls | show | runs | cancel | pause | resume | retry | trigger | skip | cancel-run | backfill
                         a client of the API; "sked add -h" for its flags

Run "sked serve -h" for the flags; each has a SKED_… environment variable.`

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
	case "work":
		cfg, err := parseWorkConfig(rest, getenv, stderr)
		if err != nil {
			return err
		}
		return work(ctx, cfg, stderr)
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
	case "bench":
		return runBench(ctx, rest, stdout, stderr)
	case "add", "ls", "show", "runs", "cancel", "pause", "resume", "retry", "trigger", "skip", "cancel-run", "backfill":
		return runClient(ctx, cmd, rest, getenv, stdout, stderr)
	case "backup":
		return backup(ctx, rest, getenv, stdout, stderr)
	case "healthcheck":
		return healthcheck(ctx, rest, getenv, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, buildinfo.Read())
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
	ClaimAhead          time.Duration // claim jobs this long before they are due; 0: only due jobs
	EnableExec          bool
	ExecEnv             []string // variables of sked's environment that commands get too
	AllowPrivateTargets bool
	HTTPSecret          string
	MaxBody             int64
	LogFormat           string
	TestClock           time.Time              // zero: the real clock
	Tokens              []string               // bearer tokens the API requires; none: open
	AllowedHosts        []string               // Host names served without a token besides loopback ones
	Insecure            bool                   // serve beyond loopback without a token
	Retention           time.Duration          // prune history older than this; 0: never
	JobDefaults         map[string]db.Defaults // attempts and backoff by type (server.Config.JobDefaults)
	NotifySinks         []notify.Sink          // where dead jobs, quiet schedules and clock steps are told
	PublicURL           string                 // the dashboard's address, linked from notifications
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
	var workers, lease, grace, claimAhead, maxBody, enableExec, allowPrivate, testClock string
	fs.StringVar(&workers, "workers", env("workers", strconv.Itoa(worker.DefaultSlots)), "jobs run at once by this process (SKED_WORKERS)")
	fs.StringVar(&lease, "lease", env("lease", db.DefaultLease.String()), "lease of a claimed job, renewed while it runs (SKED_LEASE)")
	fs.StringVar(&grace, "grace", env("grace", worker.DefaultGrace.String()), "how long shutdown waits for running jobs (SKED_GRACE)")
	fs.StringVar(&claimAhead, "claim-ahead", env("claim-ahead", worker.DefaultClaimAhead.String()),
		"claim jobs this long before they are due and start each when it is due, so that a spike starts on time; 0: claim only due jobs (SKED_CLAIM_AHEAD)")
	fs.StringVar(&maxBody, "max-body", env("max-body", "1048576"), "largest request body in bytes (SKED_MAX_BODY)")
	fs.StringVar(&enableExec, "enable-exec", env("enable-exec", "false"), "run jobs of type exec (commands on this machine) (SKED_ENABLE_EXEC)")
	fs.StringVar(&allowPrivate, "allow-private-targets", env("allow-private-targets", "false"),
		"let http jobs call loopback, private and link-local addresses (SKED_ALLOW_PRIVATE_TARGETS)")
	fs.StringVar(&testClock, "test-clock", env("test-clock", ""),
		"run on a virtual clock that starts at this RFC 3339 time (or now, when given bare) and moves only by POST /test/clock; for testing schedules (SKED_TEST_CLOCK)")
	notifyFlag, notifyGiven := env("notify", ""), false
	fs.Func("notify", "send dead jobs, quiet and recovered schedules and clock steps to a sink: webhook:URL, ntfy:URL/TOPIC, "+
		"gotify:URL?token=T, slack:WEBHOOK_URL, discord:WEBHOOK_URL, or email as smtp://USER:PASSWORD@HOST:587?to=ADDR&from=ADDR "+
		"(STARTTLS; smtps:// or port 465 for implicit TLS; percent-encode @ : / ? # in USER and PASSWORD; repeat to= for more recipients); "+
		"repeat the flag for several (SKED_NOTIFY, space-separated)", func(v string) error {
		if !notifyGiven { // flags replace SKED_NOTIFY
			notifyFlag, notifyGiven = "", true
		}
		notifyFlag += " " + v
		return nil
	})
	fs.StringVar(&c.PublicURL, "public-url", env("public-url", ""),
		"the address people open the dashboard at, e.g. https://sked.example.com; every notification links to the job's page there (SKED_PUBLIC_URL)")
	execEnv := execEnvFlag(fs, env)
	var ops opsFlags
	ops.register(fs, env)
	if err := fs.Parse(boolFlags(args, "enable-exec", "allow-private-targets", "test-clock", "insecure")); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q: give flag values as --name=value", fs.Arg(0))
	}
	var (
		errs []error
		err  error
	)
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
	parse("claim-ahead", claimAhead, func(v string) (err error) {
		if c.ClaimAhead, err = time.ParseDuration(v); err == nil && (c.ClaimAhead < 0 || c.ClaimAhead > c.Lease/4) {
			err = fmt.Errorf("must be between 0 and a quarter of --lease (%s)", c.Lease/4)
		}
		return err
	})
	parse("max-body", maxBody, func(v string) (err error) { c.MaxBody, err = strconv.ParseInt(v, 10, 64); return err })
	parse("enable-exec", enableExec, func(v string) (err error) { c.EnableExec, err = strconv.ParseBool(v); return err })
	parse("allow-private-targets", allowPrivate, func(v string) (err error) { c.AllowPrivateTargets, err = strconv.ParseBool(v); return err })
	parse("test-clock", testClock, func(v string) (err error) {
		switch v {
		case "", "false":
		case "true":
			c.TestClock = time.Now()
		default:
			if c.TestClock, err = time.Parse(time.RFC3339, v); err != nil {
				err = errors.New(`give an RFC 3339 start time such as "2026-03-08T06:00:00Z", or no value to start now`)
			}
		}
		return err
	})
	if u, err := url.Parse(c.PublicURL); c.PublicURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "") {
		errs = append(errs, fmt.Errorf("--public-url %q: give the dashboard's absolute address without query or fragment, e.g. https://sked.example.com or https://example.com/sked/", c.PublicURL))
	}
	if c.ExecEnv, err = execEnv(); err != nil {
		errs = append(errs, err)
	}
	for _, v := range strings.Fields(notifyFlag) {
		sink, err := notify.ParseSink(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("--notify: %w", err))
			continue
		}
		c.NotifySinks = append(c.NotifySinks, sink)
	}
	if err := ops.apply(&c); err != nil {
		errs = append(errs, err)
	}
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

// execEnvFlag registers --exec-env on fs and returns the function that
// gives its names once fs is parsed: the flag, repeated, or else
// SKED_EXEC_ENV, comma-separated.
func execEnvFlag(fs *flag.FlagSet, env func(name, def string) string) func() ([]string, error) {
	var names []string
	fs.Func("exec-env", "pass this variable of sked's own environment on to commands, which get only PATH, HOME, LANG, TZ, "+
		"their SKED_* and their payload's env otherwise; repeat for several (SKED_EXEC_ENV, comma-separated)", func(v string) error {
		names = append(names, v)
		return nil
	})
	return func() ([]string, error) {
		if len(names) == 0 && env("exec-env", "") != "" {
			names = strings.Split(env("exec-env", ""), ",")
		}
		for _, n := range names {
			if n == "" || strings.ContainsAny(n, "=\x00") {
				return nil, fmt.Errorf("--exec-env %q: give the name of a variable, such as --exec-env AWS_PROFILE", n)
			}
		}
		return names, nil
	}
}

// serve runs the appliance until ctx is done.
func serve(ctx context.Context, cfg serveConfig, stderr io.Writer) error {
	if err := cfg.checkExposure(); err != nil {
		return err
	}
	var logHandler slog.Handler = slog.NewTextHandler(stderr, nil)
	if cfg.LogFormat == "json" {
		logHandler = slog.NewJSONHandler(stderr, nil)
	}
	return server.New(server.Config{
		DB: cfg.DB, Addr: cfg.Addr, Workers: cfg.Workers, Lease: cfg.Lease, Grace: cfg.Grace,
		EnableExec: cfg.EnableExec, ExecEnv: cfg.ExecEnv, AllowPrivateTargets: cfg.AllowPrivateTargets, HTTPSecret: cfg.HTTPSecret,
		MaxBodyBytes: cfg.MaxBody, Logger: slog.New(logHandler), TestClock: cfg.TestClock,
		Tokens: cfg.Tokens, AllowedHosts: cfg.AllowedHosts, Retention: offWhenZero(cfg.Retention), NotifySinks: cfg.NotifySinks, ClaimAhead: offWhenZero(cfg.ClaimAhead),
		JobDefaults: cfg.JobDefaults,
		PublicURL:   cfg.PublicURL,
	}).Run(ctx)
}
