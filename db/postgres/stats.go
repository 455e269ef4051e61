package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
)

// Stats reads the queue's gauges in one snapshot; see db.StatsReader. The
// ready figures read the jobs_ready partial index, type by type.
func (d *dialect) Stats(ctx context.Context, now time.Time) (db.Stats, error) {
	st := db.NewStats()
	err := pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, readyTypes("$3")+` SELECT types.type, due.oldest, due.n
			FROM types CROSS JOIN LATERAL (SELECT min(next_run_at) FILTER (WHERE next_run_at <= $1) AS oldest,
				count(*) AS n FROM jobs WHERE state = 'ready' AND type = types.type AND next_run_at <= $2) due`,
			now, now.Add(time.Minute), []string{})
		if err != nil {
			return fmt.Errorf("read ready stats: %w", err)
		}
		var (
			typ    string
			oldest *time.Time
			n      int64
		)
		if _, err := pgx.ForEachRow(rows, []any{&typ, &oldest, &n}, func() error {
			d := db.Due{NextMinute: n}
			if oldest != nil {
				d.Oldest = oldest.UTC()
			}
			st.AddDue(typ, d)
			return nil
		}); err != nil {
			return fmt.Errorf("read ready stats: %w", err)
		}
		if err := readCounts(ctx, tx, `SELECT state, count(*) FROM jobs GROUP BY state`, func(k string, n int64) {
			st.JobsByState[db.JobState(k)] = n
		}); err != nil {
			return fmt.Errorf("count jobs by state: %w", err)
		}
		if err := readCounts(ctx, tx, `SELECT type, count(*) FROM jobs WHERE state = 'running' GROUP BY type`, func(k string, n int64) {
			st.RunningByType[k] = n
		}); err != nil {
			return fmt.Errorf("count running jobs: %w", err)
		}
		err = tx.QueryRow(ctx, schedulesStatsSQL).
			Scan(&st.MissedSlots, &st.FailingSchedules, &st.QuietSchedules)
		if err != nil {
			return fmt.Errorf("read the schedules' stats: %w", err)
		}
		return nil
	})
	if err != nil {
		return db.Stats{}, translate(err)
	}
	return st, nil
}

// schedulesStatsSQL reads the schedules' figures of Stats, reading only
// the rows of the jobs that count: the sum of their missed slots, by the
// two stretches of jobs_recurring that are not zero, and how many are
// failing and quiet, not cancelled, through jobs_failing and jobs_quiet.
const schedulesStatsSQL = `SELECT
	(SELECT coalesce(sum(missed_slots), 0)::bigint FROM jobs WHERE schedule IS NOT NULL AND missed_slots > 0) +
	(SELECT coalesce(sum(missed_slots), 0)::bigint FROM jobs WHERE schedule IS NOT NULL AND missed_slots < 0),
	(SELECT count(*) FROM jobs WHERE failing_since IS NOT NULL AND schedule IS NOT NULL AND state <> 'cancelled'),
	(SELECT count(*) FROM jobs WHERE quiet_since IS NOT NULL AND expect_success_ms > 0 AND state <> 'cancelled')`

// readCounts runs a query of (key, count) rows and hands each to add.
func readCounts(ctx context.Context, tx pgx.Tx, q string, add func(string, int64)) error {
	rows, err := tx.Query(ctx, q)
	if err != nil {
		return err
	}
	var (
		k string
		n int64
	)
	_, err = pgx.ForEachRow(rows, []any{&k, &n}, func() error { add(k, n); return nil })
	return err
}
