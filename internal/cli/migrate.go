package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/handlers"
	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/wire"
)

func migrateCmd(env Env) *cobra.Command {
	var (
		dsn  string
		wait time.Duration
	)
	cmd := &cobra.Command{
		Use:   "migrate [--db sked.db]",
		Short: "Create or upgrade the database (--db) and exit",
		Long: "sked migrate creates the database, or upgrades it to this version's schema, and exits, saying from which\n" +
			"schema version to which; sked serve does the same as it starts. It is for doing that alone, such as before\n" +
			"the nodes that share a PostgreSQL database start.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := server.CheckDB("--db", dsn); err != nil {
				return usagef("%v", err)
			}
			where := postgres.Redacted(dsn)
			_, statErr := os.Stat(dsn) // a new SQLite file is created
			created := !postgres.IsURL(dsn) && errors.Is(statErr, fs.ErrNotExist)
			// A sked serve on a SQLite file would go on with a schema it
			// does not know: the file is taken as serve takes it, or refused.
			lock, err := server.LockStore(dsn)
			if err != nil {
				return err
			}
			if lock != nil {
				defer lock.Close()
			}
			store, err := server.OpenStore(cmd.Context(), dsn, wait, slog.New(slog.NewTextHandler(env.Stderr, nil)))
			if err != nil {
				return err
			}
			v := server.MigratedOf(store)
			switch {
			case created:
				fmt.Fprintf(env.Stdout, "created %s at schema version %d\n", where, v.To)
			case v.From == v.To:
				fmt.Fprintf(env.Stdout, "%s: schema is up to date at version %d\n", where, v.To)
			default:
				fmt.Fprintf(env.Stdout, "migrated %s: schema version %d → %d\n", where, v.From, v.To)
				if v.From > 0 {
					warnLiveNodes(cmd.Context(), env, store)
				}
			}
			return store.Close()
		},
	}
	dbFlag(cmd.Flags(), &dsn, &wait)
	return cmd
}

// warnLiveNodes tells on stderr of the nodes (sked serve, each named once
// for all its pools) that were seen claiming within wire.SilentAfter and did
// not say they stopped, or that hold a job's lease that has not run out,
// after a migration of their
// database: those of the older version keep running on a schema they do
// not know. The leases name the nodes of a sked too old to record its
// claims (the workers table is newer than it). Only PostgreSQL's nodes can
// be: a SQLite file's one node holds it locked.
func warnLiveNodes(ctx context.Context, env Env, store db.Store) {
	now := store.Now()
	ws, err := store.Workers(ctx, now.Add(-wire.SilentAfter))
	if err != nil {
		fmt.Fprintf(env.Stderr, "warning: could not read which nodes are live: %v\n", err)
		return
	}
	var live []string
	add := func(id string) {
		if node, ok := db.ServeNode(id); ok && !slices.Contains(live, node) {
			live = append(live, node)
		}
	}
	for _, w := range ws {
		if w.StoppedAt == nil {
			add(w.ID)
		}
	}
	page := db.JobListParams{State: db.StateRunning, Limit: handlers.MaxPageLimit}
	for {
		running, next, err := store.JobList(ctx, page)
		if err != nil {
			fmt.Fprintf(env.Stderr, "warning: could not read which nodes hold jobs: %v\n", err)
			return
		}
		for _, j := range running {
			if j.LeaseUntil != nil && j.LeaseUntil.After(now) {
				add(j.LeaseOwner)
			}
		}
		if next == "" {
			break
		}
		page.Cursor = next
	}
	if len(live) == 0 {
		return
	}
	fmt.Fprintf(env.Stderr, "warning: %d node(s) of this database were seen in the last %s, or hold a job's lease, and did not say they stopped: %s. "+
		"One that runs an older sked goes on running jobs under a schema it does not know: stop each and start it on this binary\n", len(live), wire.SilentAfter, strings.Join(live, ", "))
}
