package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// workersCmd lists the workers that hold jobs or were seen claiming in the
// last hour.
func workersCmd(env Env) *cobra.Command {
	return clientCommand(env, &cobra.Command{
		Use:   "workers",
		Short: "List the workers: what they claim, when they were last seen, what they run",
		Args:  noArgs,
	}, func(ctx context.Context, a *api, _ []string) error {
		ws, err := a.c.Workers(ctx)
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(ws)
		}
		if len(ws.Workers) == 0 {
			fmt.Fprintln(a.env.Stdout, "no worker has claimed in the last hour (sked serve runs its built-in types; sked work --type T serves others)")
			return nil
		}
		tw := table(a.env.Stdout, "WORKER", "TYPES", "LAST SEEN", "RUNNING", "FIRST SEEN")
		for _, w := range ws.Workers {
			seen := sinceText(w.LastSeen(), ws.At)
			switch {
			case w.StoppedAt != nil:
				seen = "stopped " + sinceText(w.StoppedAt, ws.At)
			case w.SilentAt(ws.At):
				seen += ", silent"
			}
			row(tw, w.WorkerID, typesText(w.Types), seen, strconv.Itoa(len(w.Running)), timeText(w.FirstSeenAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if ws.Truncated {
			fmt.Fprintln(a.env.Stdout, "more jobs run than the 500 read: some workers holding jobs may be missing")
		}
		return nil
	})
}

// typesText is a worker's types for a table cell.
func typesText(types []string) string {
	switch {
	case types == nil:
		return "?"
	case len(types) == 0:
		return "any"
	}
	return strings.Join(types, ",")
}

// sinceText is how long before now t was, to the second, or "-".
func sinceText(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return max(now.Sub(*t), 0).Truncate(time.Second).String() + " ago"
}

// serves says whether some worker of ws may claim jobs of type typ: it
// claims the type (or any type), or, when the store has no record of what
// it claims, runs a job of the type; and it is not silent
// (wire.Worker.SilentAt) and has not said it stopped.
func serves(ws wire.WorkersResponse, typ string) bool {
	return slices.ContainsFunc(ws.Workers, func(w wire.Worker) bool {
		claims := w.Types != nil && (len(w.Types) == 0 || slices.Contains(w.Types, typ)) ||
			w.Types == nil && slices.ContainsFunc(w.Running, func(r wire.WorkerJob) bool { return r.Job.Type == typ })
		return claims && w.StoppedAt == nil && !w.SilentAt(ws.At)
	})
}

// warnUnserved tells on stderr when no worker seems to serve the type of a
// job just created.
func warnUnserved(ctx context.Context, a *api, job db.Job) {
	if msg := unserved(ctx, a, job); msg != "" {
		fmt.Fprintf(a.env.Stderr, "warning: %s\n", msg)
	}
}

// unserved says that no worker seems to serve job's type, or "": some
// worker does, or the workers cannot be read (a server that keeps no
// record of them, or does not answer).
func unserved(ctx context.Context, a *api, job db.Job) string {
	ws, err := a.c.Workers(ctx)
	if err != nil || ws.SeenWithin == 0 || serves(ws, job.Type) {
		return ""
	}
	return fmt.Sprintf("no worker has claimed type %q in the last %s (or those that did have stopped), so the job waits until one does "+
		"(sked workers lists them; sked serve runs its built-in types, sked work --type %s serves others)",
		job.Type, wire.SilentAfter, job.Type)
}
