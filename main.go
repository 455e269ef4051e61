// Command sked is a job scheduler in one binary: it keeps jobs, runs and
// recurring schedules in a SQLite file and runs the HTTP API, the dispatcher,
// the worker pool and the lease reaper in one process. Its command line is
// internal/cli; main wires it to the process.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // IANA zones for schedules, even on a machine without them

	"github.com/sked-dev/sked/internal/cli"
)

// main runs the command line until it ends or the first SIGTERM, SIGINT or
// SIGHUP (a closed terminal) ends its context: sked serve and sked work
// then drain. A second Ctrl-C (SIGINT) ends the process at once; a
// SIGTERM or SIGHUP sent again, as some supervisors do, does not cut the
// drain short.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	interrupts := make(chan os.Signal, 2)
	signal.Notify(interrupts, os.Interrupt) // also where SIGINT was ignored at start (nohup, cmd &)
	go func() {
		<-interrupts
		<-interrupts
		fmt.Fprintln(os.Stderr, "sked: interrupted again: exiting at once")
		os.Exit(130)
	}()
	code := cli.Main(ctx, os.Args[1:], cli.Env{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
