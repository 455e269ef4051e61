package cli

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/spf13/cobra"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

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
			if err := checkDB(dsn); err != nil {
				return err
			}
			ctx, where := cmd.Context(), postgres.Redacted(dsn)
			_, statErr := os.Stat(dsn) // a new SQLite file is created
			created := !postgres.IsURL(dsn) && errors.Is(statErr, fs.ErrNotExist)
			var (
				from    int64
				fromErr error
			)
			if !created {
				from, fromErr = schemaVersion(ctx, dsn)
			}
			// Opening says best what is wrong with a database that cannot
			// be read.
			store, err := server.OpenStore(ctx, dsn, slog.New(slog.NewTextHandler(env.Stderr, nil)))
			if err != nil {
				return err
			}
			to, err := schemaVersion(ctx, dsn)
			if err = cmp.Or(fromErr, err); err != nil {
				return errors.Join(fmt.Errorf("%s: %w", where, err), store.Close())
			}
			switch {
			case created:
				fmt.Fprintf(env.Stdout, "created %s at schema version %d\n", where, to)
			case from == to:
				fmt.Fprintf(env.Stdout, "%s: schema is up to date at version %d\n", where, to)
			default:
				fmt.Fprintf(env.Stdout, "migrated %s: schema version %d → %d\n", where, from, to)
			}
			return store.Close()
		},
	}
	dbFlag(cmd.Flags(), &dsn)
	return cmd
}

// schemaVersion reads, without changing anything, the schema version that
// goose recorded in the existing database dsn names: 0 when sked never
// migrated it (there is no version table, or no version in it).
func schemaVersion(ctx context.Context, dsn string) (int64, error) {
	dialect, conn, err := openVersionReader(dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	versions, err := database.NewStore(dialect, goose.DefaultTablename)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if exists, err := versionTableExists(ctx, conn, versions); err != nil || !exists {
		return 0, err
	}
	v, err := versions.GetLatestVersion(ctx, conn)
	switch {
	case errors.Is(err, database.ErrVersionNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// openVersionReader opens the database dsn names for schemaVersion: a
// SQLite file read-only, a PostgreSQL database with the URL's settings
// (its pool_* parameters read, not sent).
func openVersionReader(dsn string) (database.Dialect, *sql.DB, error) {
	if !postgres.IsURL(dsn) {
		conn, err := sql.Open("sqlite", "file:"+dsn+"?mode=ro")
		return database.DialectSQLite3, conn, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("parse postgres url: %w", err)
	}
	return database.DialectPostgres, stdlib.OpenDB(*cfg.ConnConfig), nil
}

// versionTableExists says whether versions' table is in the database of
// conn: goose asks PostgreSQL itself, and SQLite's schema table is read
// here, which goose does not do.
func versionTableExists(ctx context.Context, conn *sql.DB, versions database.Store) (bool, error) {
	if ext, ok := versions.(database.StoreExtender); ok {
		exists, err := ext.TableExists(ctx, conn)
		if !errors.Is(err, errors.ErrUnsupported) {
			return exists, err
		}
	}
	var n int
	err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, versions.Tablename()).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	return n > 0, nil
}
