package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sked-dev/sked/db"
)

// Stats reads the queue statistics on the read pool; see db.StatsReader.
// The ready and running figures come from the partial indexes, the per-state
// counts from the (state, id) index; the schedules' figures read the rows
// of the jobs with missed slots, failing or quiet only.
func (d *dialect) Stats(ctx context.Context, now time.Time) (db.Stats, error) {
	st := db.NewStats()
	rows, err := d.read.QueryContext(ctx, readyTypes("'[]'")+` SELECT type,
			(SELECT next_run_at FROM jobs INDEXED BY jobs_ready WHERE state = 'ready' AND type = types.type AND next_run_at <= ?1
				ORDER BY next_run_at LIMIT 1),
			(SELECT count(*) FROM jobs INDEXED BY jobs_ready WHERE state = 'ready' AND type = types.type AND next_run_at <= ?2)
		FROM types`, fmtTime(now), fmtTime(now.Add(time.Minute)))
	if err := addDues(&st, rows, err); err != nil {
		return db.Stats{}, fmt.Errorf("read ready stats: %w", translate(err))
	}
	if err := d.readCounts(ctx, `SELECT state, count(*) FROM jobs GROUP BY state`, func(k string, n int64) {
		st.JobsByState[db.JobState(k)] = n
	}); err != nil {
		return db.Stats{}, fmt.Errorf("count jobs by state: %w", translate(err))
	}
	if err := d.readCounts(ctx, `SELECT type, count(*) FROM jobs INDEXED BY jobs_running
		WHERE state = 'running' GROUP BY type`, func(k string, n int64) {
		st.RunningByType[k] = n
	}); err != nil {
		return db.Stats{}, fmt.Errorf("count running jobs: %w", translate(err))
	}
	if err := d.read.QueryRowContext(ctx, missedSlotsSQL).Scan(&st.MissedSlots); err != nil {
		return db.Stats{}, fmt.Errorf("sum missed slots: %w", translate(err))
	}
	if err := d.read.QueryRowContext(ctx, failingSQL).Scan(&st.FailingSchedules); err != nil {
		return db.Stats{}, fmt.Errorf("count failing schedules: %w", translate(err))
	}
	if err := d.read.QueryRowContext(ctx, quietSQL).Scan(&st.QuietSchedules); err != nil {
		return db.Stats{}, fmt.Errorf("count quiet schedules: %w", translate(err))
	}
	return st, nil
}

// The schedules' figures of Stats, reading only the rows of the jobs that
// count: the sum of their missed slots, by the two stretches of
// jobs_recurring that are not zero, and how many are failing and quiet,
// not cancelled.
const (
	missedSlotsSQL = `SELECT
		(SELECT coalesce(sum(missed_slots), 0) FROM jobs INDEXED BY jobs_recurring WHERE schedule IS NOT NULL AND missed_slots > 0) +
		(SELECT coalesce(sum(missed_slots), 0) FROM jobs INDEXED BY jobs_recurring WHERE schedule IS NOT NULL AND missed_slots < 0)`
	failingSQL = `SELECT count(*) FROM jobs INDEXED BY jobs_failing
		WHERE failing_since IS NOT NULL AND schedule IS NOT NULL AND state <> 'cancelled'`
	quietSQL = `SELECT count(*) FROM jobs INDEXED BY jobs_quiet
		WHERE quiet_since IS NOT NULL AND expect_success_ms > 0 AND state <> 'cancelled'`
)

// addDues adds each row of (type, oldest due, due within a minute) to st.
func addDues(st *db.Stats, rows *sql.Rows, err error) error {
	return forEach(rows, err, func(r scanner) error {
		var (
			typ    string
			oldest *time.Time
			d      db.Due
		)
		if err := r.Scan(&typ, at{&oldest}, &d.NextMinute); err != nil {
			return err
		}
		d.Oldest = db.Deref(oldest)
		st.AddDue(typ, d)
		return nil
	})
}

// readCounts runs a query of (key, count) rows and hands each to add.
func (d *dialect) readCounts(ctx context.Context, q string, add func(string, int64)) error {
	rows, err := d.read.QueryContext(ctx, q)
	return forEach(rows, err, func(r scanner) error {
		var (
			k string
			n int64
		)
		if err := r.Scan(&k, &n); err != nil {
			return err
		}
		add(k, n)
		return nil
	})
}

// forEach hands each row of a query's answer to fn.
func forEach(rows *sql.Rows, err error, fn func(scanner) error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
