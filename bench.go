package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/sked-dev/sked/bench"
)

// runBench is `sked bench`: it measures sked on temporary SQLite databases,
// or on fresh schemas of a PostgreSQL server with --db, and prints one table with the command line that reproduces it.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sked bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.Config
	fs.IntVar(&cfg.Jobs, "jobs", 50_000, "jobs of the throughput run")
	fs.IntVar(&cfg.Spike, "spike", 2_000, "jobs due at the same instant")
	fs.IntVar(&cfg.Backlog, "backlog", 1_000_000, "future jobs waiting during the backlog spike")
	fs.IntVar(&cfg.Workers, "workers", 256, "worker slots of the throughput run (a spike gets at least --spike)")
	fs.StringVar(&cfg.Dir, "db-dir", os.TempDir(), "directory for the temporary databases")
	fs.StringVar(&cfg.Sync, "sync", "full", "SQLite synchronous: full (every commit fsynced) or normal")
	fs.StringVar(&cfg.DB, "db", "", "a postgres:// URL: measure PostgreSQL (a fresh schema per run, dropped after) instead of SQLite")
	fs.IntVar(&cfg.Nodes, "nodes", 1, "with --db: nodes in this process, each with its own connection pool and worker pool")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s := strings.ToLower(cfg.Sync); s != "full" && s != "normal" {
		return fmt.Errorf("--sync %q: use full or normal", cfg.Sync)
	}
	if cfg.Nodes < 1 || cfg.Nodes > 1 && cfg.DB == "" {
		return fmt.Errorf("--nodes %d: use 1, or more with --db postgres://…", cfg.Nodes)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("create cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("start cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	r, err := bench.Run(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	load, _ := os.ReadFile("/proc/loadavg")
	return r.Write(stdout, strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
}
