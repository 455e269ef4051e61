package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sked-dev/sked/db"
)

// waitPoll is how often sked wait reads the job.
const waitPoll = 500 * time.Millisecond

func waitCmd(env Env) *cobra.Command {
	var limit time.Duration
	cmd := jobCommand(env, "wait ID|NAME [--timeout DURATION]", "Wait until a one-off job ends; exit 0 when it is done, 1 when dead or cancelled",
		func(ctx context.Context, a *api, id string) error {
			if limit < 0 {
				return usagef("--timeout %s: give how long to wait at most, such as 10m, or 0 to wait as long as it takes", limit)
			}
			return a.wait(ctx, id, limit)
		})
	cmd.Flags().DurationVar(&limit, "timeout", 0, "wait at most this long (0: as long as it takes), then exit 1")
	cmd.Long = "sked wait reads the job every " + waitPoll.String() + " until it ends, for scripts and CI: it exits 0 when the job is\n" +
		"done, and 1 when it is dead (its last error printed) or cancelled, or when --timeout runs out. A server that\n" +
		"does not answer meanwhile (restarting) is asked again. A paused job waits until it is resumed, or --timeout.\n" +
		"A recurring job does not end by itself: it is refused.\n" +
		"sked add --wait creates a job and waits for it the same way."
	return cmd
}

// wait waits, at most limit when it is above zero, until job id has ended,
// then says how: nil for done, an error for dead or cancelled.
//
// A wait that ends before the job (--timeout, Ctrl-C) says so and how the
// job is, and with --json prints the job as last read.
func (a *api) wait(ctx context.Context, id string, limit time.Duration) error {
	parent := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	job, err := a.c.JobGet(ctx, id)
	if err == nil && job.Recurring() {
		return fmt.Errorf("job %s is recurring: it ends only when cancelled, so there is nothing to wait for; "+
			"sked trigger %s runs it once now, and sked runs %s shows how each run ended", jobLabel(job), id, id)
	}
	ended := job
	if err == nil {
		var last db.Job
		if last, err = a.c.JobWait(ctx, job.ID, waitPoll); last.ID != "" {
			ended = last
		}
	}
	if err != nil && ctx.Err() != nil {
		return a.stoppedWaiting(id, ended, limit, parent.Err() != nil)
	}
	if err != nil {
		return err
	}
	if a.json {
		if err := a.printJSON(ended); err != nil {
			return err
		}
	}
	switch ended.State {
	case db.StateDone:
		if a.json {
			return nil
		}
		_, err := fmt.Fprintf(a.env.Stdout, "job %s done after %s\n", jobLabel(ended), plural(ended.Attempt, "attempt"))
		return err
	case db.StateDead:
		return fmt.Errorf("job %s is dead after %s: %s (sked runs %s --output shows each run's output)",
			jobLabel(ended), plural(ended.Attempt, "attempt"), ended.LastError, id)
	default:
		return fmt.Errorf("job %s was %s", jobLabel(ended), ended.State)
	}
}

// stoppedWaiting is the error of a wait that ended before job did: after
// limit, or interrupted. With --json the job as last read (if it was read)
// is printed first, so that a script has one document to read.
func (a *api) stoppedWaiting(id string, job db.Job, limit time.Duration, interrupted bool) error {
	if a.json && job.ID != "" {
		if err := a.printJSON(job); err != nil {
			return err
		}
	}
	label, state := id, "not read yet"
	if job.ID != "" {
		label, state = jobLabel(job), "it is "+string(job.State)
	}
	if interrupted {
		return fmt.Errorf("stopped waiting for job %s (%s): sked wait %s waits again, sked cancel-run %s stops its run", label, state, id, id)
	}
	return fmt.Errorf("job %s has not ended after %s (%s): sked wait %s waits again", label, limit, state, id)
}
