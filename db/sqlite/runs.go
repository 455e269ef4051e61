package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/engine"
)

const runColumns = `id, job_id, slot, attempt, generation, worker_id, started_at,
	finished_at, outcome, error, reason, gave_up, output, late_outcome, late_error, late_finished_at,
	slot_count, last_slot`

func scanRun(row scanner) (db.Run, error) {
	var r db.Run
	err := row.Scan(&r.ID, &r.JobID, at{&r.Slot}, &r.Attempt, &r.Generation, text{&r.WorkerID}, at{&r.StartedAt},
		at{&r.FinishedAt}, &r.Outcome, text{&r.Error}, text{&r.Reason}, &r.GaveUp, text{&r.Output},
		text{(*string)(&r.LateOutcome)}, text{&r.LateError}, at{&r.LateFinishedAt}, count{&r.SlotCount}, at{&r.LastSlot})
	if errors.Is(err, sql.ErrNoRows) {
		return db.Run{}, db.ErrNotFound
	}
	if err != nil {
		return db.Run{}, fmt.Errorf("scan run: %w", err)
	}
	return r, nil
}

// insertRunSQL inserts one run.
const insertRunSQL = `INSERT INTO runs (job_id, slot, attempt, generation, worker_id, started_at, finished_at, outcome, reason,
		slot_count, last_slot)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// RunsInsert inserts runs one statement each; see engine.Tx.
func (t *tx) RunsInsert(ctx context.Context, runs []db.Run) ([]int64, error) {
	ins := t.stmt(ctx, t.stmts.insertRun)
	ids := make([]int64, len(runs))
	for i, r := range runs {
		res, err := ins.ExecContext(ctx, r.JobID, nullTime(db.Deref(r.Slot)), r.Attempt, r.Generation, nullString(r.WorkerID),
			nullTime(db.Deref(r.StartedAt)), nullTime(db.Deref(r.FinishedAt)), r.Outcome, nullString(r.Reason),
			nullCount(r.SlotCount), nullTime(db.Deref(r.LastSlot)))
		if err != nil {
			return nil, err
		}
		if ids[i], err = res.LastInsertId(); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// RunsDelete deletes runs; see engine.Tx.
func (t *tx) RunsDelete(ctx context.Context, ids []int64) error {
	for _, id := range ids {
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM runs WHERE id = ?`, id); err != nil {
			return err
		}
	}
	return nil
}

// endRunSQL closes the running run of a lease. Arguments: outcome, error,
// output, gave up, now, job id, generation.
const endRunSQL = `UPDATE runs INDEXED BY runs_live SET outcome = ?, error = ?, output = ?, gave_up = ?,
		finished_at = ?5, started_at = min(started_at, ?5)
	WHERE job_id = ? AND generation = ? AND outcome = 'running'`

// RunsEnd closes runs; see engine.Tx.
func (t *tx) RunsEnd(ctx context.Context, ends []engine.RunEnd) error {
	end := t.stmt(ctx, t.stmts.endRun)
	for _, e := range ends {
		_, err := end.ExecContext(ctx, e.Outcome, nullString(e.Error), nullString(e.Output), e.GaveUp, fmtTime(t.now), e.JobID, e.Generation)
		if err != nil {
			return err
		}
	}
	return nil
}

// RunsLate records late outcomes; see engine.Tx.
func (t *tx) RunsLate(ctx context.Context, ends []engine.RunEnd) error {
	for _, e := range ends {
		_, err := t.tx.ExecContext(ctx, `UPDATE runs SET late_outcome = ?, late_error = ?, late_finished_at = ?
			WHERE job_id = ? AND generation = ? AND late_outcome IS NULL`,
			e.Outcome, nullString(e.Error), fmtTime(t.now), e.JobID, e.Generation)
		if err != nil {
			return err
		}
	}
	return nil
}

// liveRunSQL reads the running run of a lease. Arguments: job id,
// generation.
const liveRunSQL = `SELECT ` + runColumns + ` FROM runs INDEXED BY runs_live
	WHERE job_id = ? AND generation = ? AND outcome = 'running'`

// RunLive reads the running run of a lease; see engine.Tx.
func (t *tx) RunLive(ctx context.Context, job string, generation int64) (db.Run, error) {
	return scanRun(t.stmt(ctx, t.stmts.liveRun).QueryRowContext(ctx, job, generation))
}

// RunsSkippedAhead reads the ids of a job's missed runs of slots after a
// time; see engine.Tx. Every slot is written at the one width
// (timeFormat), so text compares as time does.
func (t *tx) RunsSkippedAhead(ctx context.Context, job string, after time.Time) ([]int64, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT id FROM (SELECT id, slot, outcome FROM runs
		WHERE job_id = ? ORDER BY id DESC LIMIT ?)
		WHERE slot > ? AND outcome = 'missed'`, job, engine.LedgerLookback, fmtTime(after))
	return collect(rows, err, func(r scanner) (id int64, err error) { return id, r.Scan(&id) })
}

// RunsOf reads the run of each lease, one lookup a lease; see engine.Tx.
// Only a stale report reads them, so no index serves (job_id, generation)
// for every outcome: runs_job narrows the search to the job's runs.
func (t *tx) RunsOf(ctx context.Context, leases []engine.Lease) ([]db.Run, error) {
	var runs []db.Run
	for _, l := range leases {
		r, err := scanRun(t.tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs
			WHERE job_id = ? AND generation = ?`, l.JobID, l.Generation))
		switch {
		case err == nil:
			runs = append(runs, r)
		case !errors.Is(err, db.ErrNotFound):
			return nil, err
		}
	}
	return runs, nil
}

// RunsSucceeded reads which slots have a succeeded run; see engine.Tx.
func (t *tx) RunsSucceeded(ctx context.Context, job string, slots []time.Time) ([]time.Time, error) {
	var ran []time.Time
	for _, slot := range slots {
		var n int
		err := t.tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE job_id = ? AND slot = ? AND outcome = 'succeeded'`,
			job, fmtTime(slot)).Scan(&n)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			ran = append(ran, slot)
		}
	}
	return ran, nil
}

// Prune deletes old history; see engine.Tx. A job's runs go with it through
// the foreign key's ON DELETE CASCADE. The jobs statement reads only the
// jobs created before p.Before (by id, in the (state, id) index): a job
// changes only after it is created, so no later one can have finished
// before then. The runs statement walks runs by id,
// oldest first, so a batch ends as soon as it has found its Limit, and
// stops at runsBelow; runs has no index on finished_at.
func (t *tx) Prune(ctx context.Context, p db.PruneParams, runsBelow int64) (db.Pruned, error) {
	var out db.Pruned
	before := fmtTime(p.Before)
	res, err := t.tx.ExecContext(ctx, `DELETE FROM jobs WHERE id IN (
			SELECT id FROM jobs WHERE state IN ('done', 'cancelled') AND id < ? AND schedule IS NULL AND updated_at < ?
			LIMIT ?)`, db.IDCeiling(p.Before), before, p.Limit)
	if err != nil {
		return out, fmt.Errorf("delete jobs: %w", err)
	}
	n, _ := res.RowsAffected()
	out.Jobs = int(n)
	res, err = t.tx.ExecContext(ctx, `DELETE FROM runs WHERE id IN (
			SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job_id
			WHERE r.id < ? AND j.schedule IS NOT NULL AND r.outcome <> 'running' AND r.finished_at < ?
			ORDER BY r.id LIMIT ?)`, runsBelow, before, p.Limit)
	if err != nil {
		return out, fmt.Errorf("delete runs: %w", err)
	}
	n, _ = res.RowsAffected()
	out.Runs = int(n)
	res, err = t.tx.ExecContext(ctx, `DELETE FROM job_events WHERE id IN (
			SELECT e.id FROM job_events e JOIN jobs j ON j.id = e.job_id
			WHERE j.schedule IS NOT NULL AND e.at < ? ORDER BY e.id LIMIT ?)`, before, p.Limit)
	if err != nil {
		return out, fmt.Errorf("delete events: %w", err)
	}
	n, _ = res.RowsAffected()
	out.Events = int(n)
	return out, nil
}

// RunStartedFrom reads the first run from an id on that has a start; see
// engine.Tx.
func (t *tx) RunStartedFrom(ctx context.Context, id int64) (int64, time.Time, bool, error) {
	var (
		run     int64
		started *time.Time
	)
	err := t.tx.QueryRowContext(ctx, `SELECT id, started_at FROM runs WHERE id >= ? AND started_at IS NOT NULL
		ORDER BY id LIMIT 1`, id).Scan(&run, at{&started})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("read the run from %d: %w", id, err)
	}
	return run, *started, true, nil
}

// RunsPage reads a page of a job's runs; see engine.Reader.
func (d *dialect) RunsPage(ctx context.Context, job string, before int64, limit int) ([]db.Run, error) {
	rows, err := d.read.QueryContext(ctx, `SELECT `+runColumns+` FROM runs
		WHERE job_id = ? AND id < ? ORDER BY id DESC LIMIT ?`, job, before, limit)
	return collect(rows, err, scanRun)
}

// RunsLive reads the running runs of the leases' jobs, of any generation,
// through the index of running runs; see engine.Reader.
func (d *dialect) RunsLive(ctx context.Context, leases []engine.Lease) ([]db.Run, error) {
	rows, err := d.read.QueryContext(ctx, `SELECT `+runColumns+` FROM runs INDEXED BY runs_live
		WHERE job_id IN (SELECT value FROM json_each(?)) AND outcome = 'running'`, leasedIDs(leases))
	return collect(rows, err, scanRun)
}

// RunStarts reads the runs of an activity window; see engine.Reader. Both
// queries walk only the newest p.Scan runs by primary key, so their cost
// does not grow with the history: runs has no index on its times.
func (d *dialect) RunStarts(ctx context.Context, p db.RunActivityParams) (int64, []engine.Start, error) {
	from, to := fmtTime(p.From), fmtTime(p.To)
	var finished int64
	err := d.read.QueryRowContext(ctx, `SELECT count(*) FROM
			(SELECT finished_at, outcome FROM runs ORDER BY id DESC LIMIT ?)
		WHERE outcome <> 'missed' AND finished_at > ? AND finished_at <= ?`,
		p.Scan, from, to).Scan(&finished)
	if err != nil {
		return 0, nil, fmt.Errorf("count finished runs: %w", translate(err))
	}
	rows, err := d.read.QueryContext(ctx, `SELECT r.job_id, r.slot, r.started_at, j.jitter_ms FROM
			(SELECT id, job_id, slot, attempt, started_at, outcome FROM runs ORDER BY id DESC LIMIT ?) r
			JOIN jobs j ON j.id = r.job_id
		WHERE r.attempt = 1 AND r.outcome <> 'missed' AND r.slot IS NOT NULL AND j.parent_id IS NULL
			AND r.started_at > ? AND r.started_at <= ?
		ORDER BY r.id DESC LIMIT ?`,
		p.Scan, from, to, p.MaxLateness)
	if err != nil {
		return 0, nil, fmt.Errorf("read starts: %w", translate(err))
	}
	defer rows.Close()
	var starts []engine.Start
	for rows.Next() {
		var st engine.Start
		jitter := db.Duration(0)
		if err := rows.Scan(&st.JobID, moment{&st.Slot}, moment{&st.Started}, millis{&jitter}); err != nil {
			return 0, nil, fmt.Errorf("read starts: %w", translate(err))
		}
		st.Jitter = time.Duration(jitter)
		starts = append(starts, st)
	}
	return finished, starts, translate(rows.Err())
}

// RunExpireOwnedBy ends now the leases of running jobs whose owner starts
// with prefix, so that the reaper returns them at once instead of when they
// run out. sked serve calls it at start, before its own pool claims, for the
// in-process pool of the serve it replaces: it holds the database's
// single-instance lock, so that pool is dead and its leases cannot be live,
// even those under this process's own worker id (a container's sked serve
// is pid 1 each time it starts). It returns how many leases it ended.
func (s *Store) RunExpireOwnedBy(ctx context.Context, prefix string) (int, error) {
	var n int64
	err := s.d.InTx(ctx, s.NowFunc, func(etx engine.Tx) error {
		t := etx.(*tx)
		res, err := t.tx.ExecContext(ctx, `UPDATE jobs INDEXED BY jobs_running SET lease_until = ?
			WHERE state = 'running' AND lease_until >= ? AND substr(lease_owner, 1, ?) = ?`,
			fmtTime(t.now.Add(-time.Millisecond)), fmtTime(t.now), len(prefix), prefix)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("expire leases of %s*: %w", prefix, err)
	}
	return int(n), nil
}
