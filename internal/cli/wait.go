package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	skedapi "github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
)

// waitPoll is how often sked wait reads the job.
const waitPoll = 500 * time.Millisecond

func waitCmd(env Env) *cobra.Command {
	var limit time.Duration
	cmd := jobCommand(env, "wait ID|NAME [--wait-timeout DURATION]", "Wait until a one-off job ends; exit 0 when it is done, 1 when dead or cancelled",
		func(ctx context.Context, a *api, id string) error {
			if err := checkWaitLimit("--wait-timeout", limit); err != nil {
				return err
			}
			return a.wait(ctx, id, limit)
		})
	cmd.Flags().DurationVar(&limit, "wait-timeout", 0, "wait at most this long (0: as long as it takes), then exit 124")
	timeoutAlias(cmd.Flags())
	cmd.Long = "sked wait reads the job every " + waitPoll.String() + " until it ends, for scripts and CI: it exits 0 when the job is\n" +
		"done, 1 when it is dead (its last error printed) or cancelled, and 124 when --wait-timeout (--timeout is another\n" +
		"name for it) runs out first. A server that does not answer (restarting), from the first read on, is asked again, after waits\n" +
		"that double from " + waitPoll.String() + " to 8s; once it has given no answer for a minute it exits 3, saying the server\n" +
		"stopped answering: the job goes on there. A paused job waits until it is resumed, or --wait-timeout.\n" +
		"A recurring job does not end by itself: it is refused (sked trigger --wait runs it once and waits for that run).\n" +
		"sked add --wait creates a job and waits for it the same way."
	return cmd
}

// waitFlags are --wait and --wait-timeout of a command that starts a job
// or a run and can wait for it to end (sked add, sked trigger).
type waitFlags struct {
	on    bool
	limit time.Duration // 0: none
}

// register adds --wait, saying what waits for what, and --wait-timeout.
func (w *waitFlags) register(fs *pflag.FlagSet, what string) {
	fs.BoolVar(&w.on, "wait", false, what+", as sked wait does (exit 0 done, 1 dead, failed or cancelled, 3 when the server stops answering)")
	fs.DurationVar(&w.limit, "wait-timeout", 0, "with --wait: wait at most this long (0: as long as it takes), then exit 124")
}

// timeoutAlias makes --timeout another name of --wait-timeout on fs, the
// flags of a command that has no --timeout of its own (sked wait, sked
// trigger; sked add's is the job's limit of one attempt): sked wait named
// it --timeout, the others --wait-timeout. Help shows --wait-timeout
// alone.
func timeoutAlias(fs *pflag.FlagSet) {
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "timeout" {
			name = "wait-timeout"
		}
		return pflag.NormalizedName(name)
	})
}

// check refuses a --wait-timeout that is negative or without --wait.
func (w *waitFlags) check() error {
	if err := checkWaitLimit("--wait-timeout", w.limit); err != nil {
		return err
	}
	if w.limit > 0 && !w.on {
		return usagef("--wait-timeout is how long --wait waits; add --wait")
	}
	return nil
}

// checkWaitLimit refuses a negative limit of a wait given as flag.
func checkWaitLimit(flag string, limit time.Duration) error {
	if limit < 0 {
		return usagef("%s %s: give how long to wait at most, such as 10m, or 0 to wait as long as it takes", flag, limit)
	}
	return nil
}

// wait waits, at most limit when it is above zero, until job id has ended,
// then says how: nil for done, an error for dead or cancelled.
//
// A wait that ends before the job (--timeout, Ctrl-C) says so and how the
// job is, and with --json prints the job as last read.
func (a *api) wait(ctx context.Context, id string, limit time.Duration) error {
	label := id // the job's, once read
	gone := func() string {
		return fmt.Sprintf("job %s goes on there: sked wait %s waits again once the server is back", label, id)
	}
	return waitUntilEnded(ctx, a, limit, gone, func(ctx context.Context) (db.Job, error) {
		job, err := a.c.JobGetWait(ctx, id, waitPoll)
		if err != nil {
			return job, err
		}
		label = jobLabel(job)
		if job.Recurring() {
			// Nothing ran, so not ExitFailed: the command line cannot
			// run as given, as sked add --wait --schedule.
			return db.Job{}, withExit(ExitUsage, nil, "job %s is recurring: it ends only when cancelled, so there is nothing to wait for; "+
				"sked trigger %s --wait runs it once now and waits for that run, and sked runs %s shows how each run ended", jobLabel(job), id, id)
		}
		return a.c.JobWait(ctx, job.ID, waitPoll)
	},
		func(ended db.Job) error {
			switch ended.State {
			case db.StateDone:
				return a.say("job %s done after %s\n", jobLabel(ended), plural(ended.Attempt, "attempt"))
			case db.StateDead:
				return withExit(ExitFailed, nil, "job %s is dead after %s: %s (sked runs %s --output shows each run's output)",
					jobLabel(ended), plural(ended.Attempt, "attempt"), ended.LastError, id)
			}
			return withExit(ExitFailed, nil, "job %s was %s", jobLabel(ended), ended.State)
		},
		func(last db.Job, interrupted bool) error {
			label, state := id, "not read yet"
			if last.ID != "" {
				label, state = jobLabel(last), "it is "+string(last.State)
			}
			if interrupted {
				return withExit(ExitInterrupted, nil, "stopped waiting for job %s (%s): sked wait %s waits again, sked cancel-run %s stops its run", label, state, id, id)
			}
			return withExit(ExitTimedOut, nil, "job %s has not ended after %s (%s): sked wait %s waits again", label, limit, state, id)
		})
}

// waitTriggered waits, at most limit when it is above zero, until the run
// that trigger started of recurring job triggered (as JobTrigger returned
// it) has ended, then says how: nil for succeeded, an error for failed,
// timed out, cancelled, or dropped before it started. With --json it
// prints the run as it ended, or as last read when the wait ends first.
func (a *api) waitTriggered(ctx context.Context, id string, triggered db.Job, limit time.Duration) error {
	label := jobLabel(triggered)
	gone := func() string {
		return fmt.Sprintf("the triggered run of job %s goes on there: sked runs %s shows how it ends once the server is back", label, id)
	}
	return waitUntilEnded(ctx, a, limit, gone, func(ctx context.Context) (db.Run, error) { return a.c.TriggeredRunWait(ctx, triggered, waitPoll) },
		func(ended db.Run) error {
			took := ""
			if ended.StartedAt != nil && ended.FinishedAt != nil {
				took = " after " + ended.FinishedAt.Sub(*ended.StartedAt).Round(time.Millisecond).String()
			}
			if ended.Outcome == db.OutcomeSucceeded {
				return a.say("run %d of job %s succeeded%s\n", ended.ID, label, took)
			}
			msg := fmt.Sprintf("run %d of job %s %s%s", ended.ID, label, ended.Outcome, took)
			if ended.Error != "" {
				msg += ": " + ended.Error
			}
			return withExit(ExitFailed, nil, "%s (sked runs %s --output shows its output)", msg, id)
		},
		func(last db.Run, interrupted bool) error {
			state := "not started yet"
			if last.ID != 0 {
				state = fmt.Sprintf("run %d is %s", last.ID, last.Outcome)
			}
			if interrupted {
				return withExit(ExitInterrupted, nil, "stopped waiting for the triggered run of job %s (%s): it goes on; sked runs %s shows how it ends, sked cancel-run %s stops it",
					label, state, id, id)
			}
			return withExit(ExitTimedOut, nil, "the triggered run of job %s has not ended after %s (%s): it goes on; sked runs %s shows how it ends", label, limit, state, id)
		})
}

// waitUntilEnded runs wait, bounded by limit when it is above zero, and
// says how what it waited for (a job, a run) ended with ended; with --json
// it first prints it as it ended. A wait that ends before it (limit, or
// the command interrupted) is said by stopped, after, with --json, what
// was last read (if anything was): a script reads one document whatever
// happened. A server that stopped answering (skedapi.ErrNoAnswer) is said
// so, then gone: that what was waited for goes on, and how to see it end.
func waitUntilEnded[T any](ctx context.Context, a *api, limit time.Duration, gone func() string, wait func(context.Context) (T, error),
	ended func(T) error, stopped func(last T, interrupted bool) error) error {
	parent := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	// A wait only reads: with several nodes, one that stops answering
	// is replaced by the next, which serves the same jobs.
	a.readAnywhere()
	v, err := wait(ctx)
	if err != nil && ctx.Err() != nil {
		if a.json && !reflect.ValueOf(&v).Elem().IsZero() {
			if err := a.printJSON(v); err != nil {
				return err
			}
		}
		return stopped(v, parent.Err() != nil)
	}
	if errors.Is(err, skedapi.ErrTriggerDropped) {
		return withExit(ExitFailed, err, "")
	}
	if errors.Is(err, skedapi.ErrNoAnswer) {
		cause := err
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			cause = ue.Err // not the request again
		}
		at := "server at " + a.server
		if len(a.servers) > 1 { // each was asked in turn
			at = "servers at " + strings.Join(a.servers, ", ")
		}
		return withExit(ExitUnreachable, err, "%s stopped answering: %v; %s", at, cause, gone())
	}
	if err != nil {
		return err
	}
	if a.json {
		if err := a.printJSON(v); err != nil {
			return err
		}
	}
	return ended(v)
}

// say prints, unless the output is JSON, format with args.
func (a *api) say(format string, args ...any) error {
	if a.json {
		return nil
	}
	_, err := fmt.Fprintf(a.env.Stdout, format, args...)
	return err
}
