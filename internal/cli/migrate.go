package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/server"
)

func migrateCmd(env Env) *cobra.Command {
	var dsn string
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
			store, err := server.OpenStore(cmd.Context(), dsn, slog.New(slog.NewTextHandler(env.Stderr, nil)))
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
			}
			return store.Close()
		},
	}
	dbFlag(cmd.Flags(), &dsn)
	return cmd
}
