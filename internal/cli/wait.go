package cli

import (
	"cmp"
	"context"
	"errors"
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
func (a *api) wait(ctx context.Context, id string, limit time.Duration) error {
	job, err := a.c.JobGet(ctx, id)
	if err != nil {
		return err
	}
	if job.Recurring() {
		return fmt.Errorf("job %s is recurring: it ends only when cancelled, so there is nothing to wait for; "+
			"sked trigger %s runs it once now, and sked runs %s shows how each run ended", jobLabel(job), id, id)
	}
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	ended, err := a.c.JobWait(ctx, job.ID, waitPoll)
	if errors.Is(err, context.DeadlineExceeded) && limit > 0 {
		return fmt.Errorf("job %s has not ended after %s: it is %s", jobLabel(job), limit, cmp.Or(ended.State, job.State))
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
