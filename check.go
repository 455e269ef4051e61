package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sked-dev/sked/checker"
)

// runCheck is `sked check`: it judges the evidence of a run (the database
// and the logs of the test client, the no-op jobs and the server) and fails
// when a guarantee was broken, printing each violation with its evidence.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sked check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var in checker.Input
	fs.StringVar(&in.DB, "db", "", "the run's SQLite database, opened read-only (required)")
	fs.StringVar(&in.ClientLog, "client-log", "", "JSON lines of acknowledged enqueues and cancels")
	fs.StringVar(&in.JobsLog, "jobs-log", "", "JSON lines of the no-op jobs' starts and ends")
	fs.StringVar(&in.ServerLog, "server-log", "", "sked serve --log-format json output")
	allow := fs.String("allow-type", "", "comma-separated job types that need no enqueue (internal jobs)")
	fs.BoolVar(&in.Finished, "finished", false, "the run is over and drained: acknowledged jobs must be final and have executed, schedules must not have stopped firing")
	end := fs.String("end", "", "when the run ended, RFC 3339 (default: the latest time in the evidence)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if in.DB == "" || fs.NArg() > 0 {
		return fmt.Errorf("usage: sked check --db FILE [--client-log FILE] [--jobs-log FILE] [--server-log FILE] [--allow-type T,…] [--finished [--end TIME]]")
	}
	if *end != "" {
		t, err := time.Parse(time.RFC3339Nano, *end)
		if err != nil {
			return fmt.Errorf("--end %q is not an RFC 3339 time such as 2026-03-02T12:00:00Z", *end)
		}
		in.End = t
	}
	if *allow != "" {
		in.AllowTypes = strings.Split(*allow, ",")
	}
	r, err := checker.Check(ctx, in)
	if err != nil {
		return err
	}
	for _, v := range r.Violations {
		fmt.Fprintln(stdout, v)
	}
	fmt.Fprintln(stdout, r.Summary())
	if len(r.Violations) > 0 {
		return fmt.Errorf("check: %d violations", len(r.Violations))
	}
	return nil
}
