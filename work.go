package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	apiclient "github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/buildinfo"
	"github.com/sked-dev/sked/worker"
)

// workConfig is what `sked work` runs with.
type workConfig struct {
	Server      string
	Token       string
	Types       []string
	Concurrency int
	Lease       time.Duration
	Grace       time.Duration
	WorkerID    string
	LogFormat   string
	Command     []string // argv run per job
	ExecEnv     []string // variables of sked's environment the command gets too
}

// parseWorkConfig reads `sked work` flags, each falling back to its SKED_…
// variable (SKED_TYPE holds a comma-separated list), and the command after
// "--".
func parseWorkConfig(args []string, getenv func(string) string, stderr io.Writer) (workConfig, error) {
	fs := flag.NewFlagSet("sked work", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sked work --server URL --type T [--type T2] [flags] -- CMD ARGS…")
		fmt.Fprintln(stderr, "Claims jobs of the types from the server and runs CMD for each, with the payload on stdin and SKED_* in the environment.")
		fs.PrintDefaults()
	}
	env := func(name, def string) string {
		return cmp.Or(getenv("SKED_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))), def)
	}
	hostname, _ := os.Hostname()
	var c workConfig
	fs.StringVar(&c.Server, "server", env("server", "http://127.0.0.1:8080"), "URL of the sked server (SKED_SERVER)")
	fs.StringVar(&c.Token, "token", env("token", ""), "bearer token for the server's API (SKED_TOKEN)")
	fs.StringVar(&c.WorkerID, "worker-id", env("worker-id", hostname+"/"+strconv.Itoa(os.Getpid())), "name of this worker in leases and runs (SKED_WORKER_ID)")
	fs.StringVar(&c.LogFormat, "log-format", env("log-format", "text"), "log format: text or json (SKED_LOG_FORMAT)")
	fs.Func("type", "job type to claim; repeat for several (SKED_TYPE, comma-separated)", func(v string) error {
		c.Types = append(c.Types, v)
		return nil
	})
	execEnv := execEnvFlag(fs, env)
	var concurrency, lease, grace string
	fs.StringVar(&concurrency, "concurrency", env("concurrency", "1"), "jobs run at once (SKED_CONCURRENCY)")
	fs.StringVar(&lease, "lease", env("lease", db.DefaultLease.String()), "lease of a claimed job, renewed every third of it (SKED_LEASE)")
	fs.StringVar(&grace, "grace", env("grace", worker.DefaultGrace.String()), "how long SIGTERM waits for running jobs before stopping them (SKED_GRACE)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.Command = fs.Args()
	if len(c.Types) == 0 && env("type", "") != "" {
		c.Types = strings.Split(env("type", ""), ",")
	}

	var errs []error
	if len(c.Types) == 0 {
		errs = append(errs, errors.New("--type is required: the job type this worker runs"))
	}
	if len(c.Command) == 0 || c.Command[0] == "" {
		errs = append(errs, errors.New("no command: give it after --, e.g. sked work --type thumbnail -- ./make-thumbnail"))
	}
	if !strings.HasPrefix(c.Server, "http://") && !strings.HasPrefix(c.Server, "https://") {
		errs = append(errs, fmt.Errorf("--server %q: must be an http:// or https:// URL", c.Server))
	}
	var err error
	if c.ExecEnv, err = execEnv(); err != nil {
		errs = append(errs, err)
	}
	if c.Concurrency, err = strconv.Atoi(concurrency); err != nil || c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("--concurrency %q: must be a whole number of at least 1", concurrency))
	}
	if c.Lease, err = time.ParseDuration(lease); err != nil || c.Lease < 300*time.Millisecond {
		errs = append(errs, fmt.Errorf("--lease %q: must be a duration of at least 300ms", lease))
	}
	if c.Grace, err = time.ParseDuration(grace); err != nil || c.Grace < 0 {
		errs = append(errs, fmt.Errorf("--grace %q: must be a duration", grace))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q: use text or json", c.LogFormat))
	}
	return c, errors.Join(errs...)
}

// work runs a remote worker until ctx is done: a worker.Pool over the
// server's worker protocol whose handler runs cfg.Command per job, as the
// exec kind does. On ctx's end it stops claiming, lets running commands
// finish within the grace period, stops the rest (SIGTERM) and hands their
// jobs back.
func work(ctx context.Context, cfg workConfig, stderr io.Writer) error {
	var logHandler slog.Handler = slog.NewTextHandler(stderr, nil)
	if cfg.LogFormat == "json" {
		logHandler = slog.NewJSONHandler(stderr, nil)
	}
	log := slog.New(logHandler)
	c := &apiclient.Client{BaseURL: cfg.Server, Token: cfg.Token}
	cmd := worker.ExecPayload{Command: cfg.Command}
	execCfg := worker.ExecConfig{Env: cfg.ExecEnv}
	run := func(ctx context.Context, job *worker.Job) error { return worker.RunCommand(ctx, job, cmd, execCfg) }
	handlers := make(map[string]worker.HandlerFunc, len(cfg.Types))
	for _, t := range cfg.Types {
		handlers[t] = run
	}
	pool := worker.NewPool(worker.PoolConfig{
		Store: c, Handlers: handlers, WorkerID: cfg.WorkerID, Slots: cfg.Concurrency,
		Lease: cfg.Lease, Grace: cfg.Grace, NextDueFunc: c.NextDue, Logger: log,
	})
	log.Info("sked working", "server", cfg.Server, "types", strings.Join(pool.Types(), ","),
		"concurrency", cfg.Concurrency, "worker_id", cfg.WorkerID, "version", buildinfo.Read().Version)
	err := pool.Run(ctx)
	log.Info("stopped")
	return err
}
