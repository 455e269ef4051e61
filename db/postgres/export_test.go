package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/engine"
)

// InTx runs fn in a transaction of s's dialect, for tests of its statements.
func InTx(ctx context.Context, s *Store, fn func(engine.Tx) error) error {
	return s.d.InTx(ctx, nil, fn)
}

// Setting returns the value of the run-time parameter name on a
// connection of s's pool.
func Setting(ctx context.Context, s *Store, name string) (string, error) {
	var v string
	err := s.d.pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// Migrations are the embedded migrations, for tests that migrate a
// database step by step.
var Migrations = migrations

// The statements whose plans TestTx_Plans checks.
const (
	ClaimSettings     = claimSettings
	LeasedJobsSQL     = leasedJobsSQL
	EndRunsSQL        = endRunsSQL
	PruneJobsSQL      = pruneJobsSQL
	SchedulesStatsSQL = schedulesStatsSQL
)

// ClaimSQL and UpdateJobsSQL are claimSQL and updateJobsSQL, for
// TestTx_Plans.
var ClaimSQL, UpdateJobsSQL = claimSQL, updateJobsSQL

// Explain returns the plan that a transaction of s's keeps for sql, with
// args, after the statements of setup: the statement is prepared in the
// transaction and its execution explained, as the transaction runs it,
// then rolled back.
func Explain(ctx context.Context, s *Store, setup []string, sql string, args ...any) (plan string, err error) {
	explained := errors.New("explained")
	err = s.d.InTx(ctx, nil, func(etx engine.Tx) error {
		t := etx.(*tx)
		for _, q := range setup {
			t.exec(nil, q)
		}
		if err := t.flush(ctx); err != nil {
			return err
		}
		sd, err := t.conn.Prepare(ctx, "explained", sql)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		defer t.conn.Deallocate(ctx, "explained")
		literals := make([]string, len(args))
		for i, a := range args {
			text, err := t.conn.TypeMap().Encode(sd.ParamOIDs[i], pgtype.TextFormatCode, a, nil)
			if err != nil {
				return fmt.Errorf("argument %d: %w", i+1, err)
			}
			literals[i] = "NULL"
			if text != nil {
				literals[i] = "'" + strings.ReplaceAll(string(text), "'", "''") + "'"
			}
		}
		execute := "EXECUTE explained" // a statement of no parameters takes no parentheses
		if len(literals) > 0 {
			execute += "(" + strings.Join(literals, ", ") + ")"
		}
		rows, err := t.conn.Query(ctx, "EXPLAIN "+execute)
		if err != nil {
			return fmt.Errorf("explain: %w", err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("explain: %w", err)
		}
		plan = strings.Join(lines, "\n")
		return explained
	})
	if errors.Is(err, explained) {
		err = nil
	}
	return plan, err
}

// Queue queues sql in tx, a transaction of InTx's, as its writes are
// queued: sent with its next statement that has an answer.
func Queue(t engine.Tx, sql string, args ...any) {
	t.(*tx).exec(nil, sql, args...)
}

// JobsPageSQL is the statement that reads a page of jobs, and its
// arguments.
func JobsPageSQL(p db.JobListParams, limit int) (string, []any) { return jobsPageSQL(p, limit) }
