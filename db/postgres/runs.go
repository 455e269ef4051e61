package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/engine"
)

// runColumns is the column list every run query selects, in scanRun's
// order. A text column that may be NULL reads as the empty string.
const runColumns = `id, job_id, slot, attempt, generation, coalesce(worker_id, '') AS worker_id, started_at,
	finished_at, outcome, coalesce(error, '') AS error, coalesce(reason, '') AS reason, gave_up,
	coalesce(output, '') AS output, coalesce(late_outcome, '') AS late_outcome, coalesce(late_error, '') AS late_error,
	late_finished_at, slot_count, last_slot`

func scanRun(row pgx.Row) (db.Run, error) {
	var (
		r         db.Run
		slotCount *int64
	)
	err := row.Scan(&r.ID, &r.JobID, &r.Slot, &r.Attempt, &r.Generation, &r.WorkerID, &r.StartedAt,
		&r.FinishedAt, &r.Outcome, &r.Error, &r.Reason, &r.GaveUp, &r.Output, &r.LateOutcome, &r.LateError, &r.LateFinishedAt,
		&slotCount, &r.LastSlot)
	if err != nil {
		if err = translate(err); errors.Is(err, db.ErrNotFound) {
			return db.Run{}, err
		}
		return db.Run{}, fmt.Errorf("scan run: %w", err)
	}
	inUTC(r.Slot, r.StartedAt, r.FinishedAt, r.LateFinishedAt)
	if slotCount != nil {
		r.SlotCount = *slotCount
		inUTC(r.LastSlot)
	}
	return r, nil
}

// RunsInsert inserts runs in one statement; see engine.Tx.
func (t *tx) RunsInsert(ctx context.Context, runs []db.Run) ([]int64, error) {
	n := len(runs)
	var (
		jobs, outcomes      = make([]string, n), make([]string, n)
		slots, starts, ends = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		lasts               = make([]*time.Time, n)
		counts              = make([]*int64, n)
		attempts            = make([]int32, n)
		gens                = make([]int64, n)
		workers, reasons    = make([]*string, n), make([]*string, n)
	)
	for i, r := range runs {
		jobs[i], outcomes[i], slots[i], starts[i], ends[i] = r.JobID, string(r.Outcome), r.Slot, r.StartedAt, r.FinishedAt
		attempts[i], gens[i], workers[i], reasons[i] = int32(r.Attempt), r.Generation, nullString(r.WorkerID), nullString(r.Reason)
		if r.SlotCount != 0 {
			counts[i], lasts[i] = &runs[i].SlotCount, r.LastSlot
		}
	}
	var ids []int64
	err := t.query(ctx, func(rows pgx.Rows) (err error) {
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	}, `INSERT INTO runs (job_id, slot, attempt, generation, worker_id, started_at, finished_at, outcome, reason, slot_count, last_slot)
		SELECT job_id, slot, attempt, generation, worker_id, started_at, finished_at, outcome, reason, slot_count, last_slot
		FROM unnest($1::text[], $2::timestamptz[], $3::integer[], $4::bigint[], $5::text[], $6::timestamptz[],
			$7::timestamptz[], $8::text[], $9::text[], $10::bigint[], $11::timestamptz[])
			WITH ORDINALITY AS u (job_id, slot, attempt, generation, worker_id, started_at, finished_at, outcome, reason, slot_count, last_slot, n)
		ORDER BY n
		RETURNING id`, jobs, slots, attempts, gens, workers, starts, ends, outcomes, reasons, counts, lasts)
	return ids, err
}

// RunsDelete deletes runs; see engine.Tx.
func (t *tx) RunsDelete(ctx context.Context, ids []int64) error {
	t.exec(nil, `DELETE FROM runs WHERE id = ANY($1)`, ids)
	return nil
}

// leases is ends as arrays, for statements over many leases.
func leases(ends []engine.RunEnd) (jobs []string, gens []int64, outcomes []string, errs, outputs []*string, gaveUp []bool) {
	for _, e := range ends {
		jobs, gens, outcomes = append(jobs, e.JobID), append(gens, e.Generation), append(outcomes, string(e.Outcome))
		errs, outputs = append(errs, nullString(e.Error)), append(outputs, nullString(e.Output))
		gaveUp = append(gaveUp, e.GaveUp)
	}
	return
}

// endRunsSQL closes the running runs of leases given as arrays, found
// from the arrays by runs_lease. Arguments: the end, the leases' job ids
// and generations, and each run's outcome, error, output and gave_up.
const endRunsSQL = `UPDATE runs r SET outcome = u.outcome, error = u.error, output = u.output, gave_up = u.gave_up,
		finished_at = $1, started_at = least(r.started_at, $1)
	FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::boolean[])
		AS u (job_id, generation, outcome, error, output, gave_up)
	WHERE r.job_id = u.job_id AND r.generation = u.generation AND r.outcome = 'running'`

// RunsEnd closes runs in one statement; see engine.Tx.
func (t *tx) RunsEnd(ctx context.Context, ends []engine.RunEnd) error {
	jobs, gens, outcomes, errs, outputs, gaveUp := leases(ends)
	t.exec(nil, endRunsSQL, t.Now(), jobs, gens, outcomes, errs, outputs, gaveUp)
	return nil
}

// RunsLate records late outcomes in one statement; see engine.Tx.
func (t *tx) RunsLate(ctx context.Context, ends []engine.RunEnd) error {
	jobs, gens, outcomes, errs, _, _ := leases(ends)
	t.exec(nil, `UPDATE runs r SET late_outcome = u.outcome, late_error = u.error, late_finished_at = $1
		FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[]) AS u (job_id, generation, outcome, error)
		WHERE r.job_id = u.job_id AND r.generation = u.generation AND r.late_outcome IS NULL`,
		t.Now(), jobs, gens, outcomes, errs)
	return nil
}

// RunLive reads the running run of a lease; see engine.Tx.
func (t *tx) RunLive(ctx context.Context, job string, generation int64) (db.Run, error) {
	var r db.Run
	err := t.queryRow(ctx, func(row pgx.Row) (err error) { r, err = scanRun(row); return err }, `SELECT `+runColumns+` FROM runs
		WHERE job_id = $1 AND generation = $2 AND outcome = 'running'`, job, generation)
	return r, err
}

// RunsSkippedAhead reads the ids of a job's missed runs of slots after a
// time; see engine.Tx.
func (t *tx) RunsSkippedAhead(ctx context.Context, job string, after time.Time) ([]int64, error) {
	var ids []int64
	err := t.query(ctx, func(rows pgx.Rows) (err error) {
		ids, err = collect(rows, func(r pgx.Row) (id int64, err error) { return id, r.Scan(&id) })
		return err
	}, `SELECT id FROM (SELECT id, slot, outcome FROM runs WHERE job_id = $1 ORDER BY id DESC LIMIT $2) newest
		WHERE slot > $3 AND outcome = 'missed'`, job, engine.LedgerLookback, after)
	return ids, err
}

// RunsOf reads the run of each lease in one statement; see engine.Tx.
func (t *tx) RunsOf(ctx context.Context, leases []engine.Lease) ([]db.Run, error) {
	ids, gens := leaseArrays(leases)
	var runs []db.Run
	err := t.query(ctx, func(rows pgx.Rows) (err error) {
		runs, err = collect(rows, scanRun)
		return err
	}, `SELECT `+runColumns+` FROM runs
		WHERE (job_id, generation) IN (SELECT * FROM unnest($1::text[], $2::bigint[]))`, ids, gens)
	return runs, err
}

// RunsSucceeded reads which slots have a succeeded run; see engine.Tx.
func (t *tx) RunsSucceeded(ctx context.Context, job string, slots []time.Time) ([]time.Time, error) {
	var ran []time.Time
	err := t.query(ctx, func(rows pgx.Rows) (err error) {
		ran, err = collect(rows, func(r pgx.Row) (at time.Time, err error) {
			err = r.Scan(&at)
			return at.UTC(), err
		})
		return err
	}, `SELECT DISTINCT slot FROM runs WHERE job_id = $1 AND outcome = 'succeeded' AND slot = ANY($2)`, job, slots)
	return ran, err
}

// Prune deletes old history; see engine.Tx. A job's runs and events go
// with it, deleted by the trigger jobs_delete_history (migration 00006).
// The jobs statement reads only the jobs created before p.Before (by id,
// in the (state, id) index): a job changes only after it is created, so no
// later one can have finished before then. The runs statement walks runs by id,
// oldest first, so a batch ends as soon as it has found its Limit, and
// stops at runsBelow; runs has no index on finished_at. Both take their rows FOR UPDATE SKIP LOCKED, so
// pruners on several nodes share the work instead of waiting for each other.
func (t *tx) Prune(ctx context.Context, p db.PruneParams, runsBelow int64) (db.Pruned, error) {
	var out db.Pruned
	count := func(n *int) func(pgconn.CommandTag) error {
		return func(tag pgconn.CommandTag) error { *n = int(tag.RowsAffected()); return nil }
	}
	t.exec(count(&out.Jobs), pruneJobsSQL, p.Before, p.Limit, db.IDCeiling(p.Before))
	t.exec(count(&out.Runs), `DELETE FROM runs WHERE id = ANY(ARRAY(
			SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job_id
			WHERE r.id < $3 AND j.schedule IS NOT NULL AND r.outcome <> 'running' AND r.finished_at < $1
			ORDER BY r.id LIMIT $2 FOR UPDATE OF r SKIP LOCKED))`, p.Before, p.Limit, runsBelow)
	t.exec(count(&out.Events), `DELETE FROM job_events WHERE id = ANY(ARRAY(
			SELECT e.id FROM job_events e JOIN jobs j ON j.id = e.job_id
			WHERE j.schedule IS NOT NULL AND e.at < $1
			ORDER BY e.id LIMIT $2 FOR UPDATE OF e SKIP LOCKED))`, p.Before, p.Limit)
	return out, t.flush(ctx)
}

// RunStartedFrom reads the first run from an id on that has a start; see
// engine.Tx.
func (t *tx) RunStartedFrom(ctx context.Context, id int64) (int64, time.Time, bool, error) {
	var (
		run     int64
		started time.Time
	)
	err := t.queryRow(ctx, func(r pgx.Row) error { return r.Scan(&run, &started) },
		`SELECT id, started_at FROM runs WHERE id >= $1 AND started_at IS NOT NULL ORDER BY id LIMIT 1`, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("read the run from %d: %w", id, err)
	}
	return run, started.UTC(), true, nil
}

// pruneJobsSQL deletes finished jobs that ended before a time and were
// created before it (see Prune), oldest first: the order is the (state,
// id) index's, so that the plan reads that index within both bounds; by
// id alone (the primary key) it would walk every older job of any state
// each pass, such as the dead ones, which are kept. Arguments: the time,
// the limit, the least id of a job created after the time (db.IDCeiling).
const pruneJobsSQL = `DELETE FROM jobs WHERE id = ANY(ARRAY(
		SELECT id FROM jobs WHERE state IN ('done', 'cancelled') AND id < $3 AND schedule IS NULL AND updated_at < $1
		ORDER BY state, id LIMIT $2 FOR UPDATE SKIP LOCKED))`

// RunsPage reads a page of a job's runs; see engine.Reader.
func (d *dialect) RunsPage(ctx context.Context, job string, before int64, limit int) ([]db.Run, error) {
	return query(ctx, d.pool, scanRun, `SELECT `+runColumns+` FROM runs
		WHERE job_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, job, before, limit)
}

// RunsLive reads the running run of each lease, one probe of the index
// runs_lease a lease (a job's history can be long); see engine.Reader.
func (d *dialect) RunsLive(ctx context.Context, leases []engine.Lease) ([]db.Run, error) {
	ids, gens := leaseArrays(leases)
	return query(ctx, d.pool, scanRun, `SELECT `+runColumns+` FROM runs
		WHERE (job_id, generation) IN (SELECT * FROM unnest($1::text[], $2::bigint[])) AND outcome = 'running'`, ids, gens)
}

// RunStarts reads the runs of an activity window; see engine.Reader. Both
// queries walk only the newest p.Scan runs by primary key, so their cost
// does not grow with the history.
func (d *dialect) RunStarts(ctx context.Context, p db.RunActivityParams) (int64, []engine.Start, error) {
	var finished int64
	err := d.pool.QueryRow(ctx, `SELECT count(*) FROM
			(SELECT finished_at, outcome FROM runs ORDER BY id DESC LIMIT $1) r
		WHERE outcome <> 'missed' AND finished_at > $2 AND finished_at <= $3`,
		p.Scan, p.From, p.To).Scan(&finished)
	if err != nil {
		return 0, nil, fmt.Errorf("count finished runs: %w", translate(err))
	}
	rows, err := d.pool.Query(ctx, `SELECT r.job_id, r.slot, r.started_at, j.jitter_ms FROM
			(SELECT id, job_id, slot, attempt, started_at, outcome FROM runs ORDER BY id DESC LIMIT $1) r
			JOIN jobs j ON j.id = r.job_id
		WHERE r.attempt = 1 AND r.outcome <> 'missed' AND r.slot IS NOT NULL AND j.parent_id IS NULL
			AND r.started_at > $2 AND r.started_at <= $3
		ORDER BY r.id DESC LIMIT $4`,
		p.Scan, p.From, p.To, p.MaxLateness)
	if err != nil {
		return 0, nil, fmt.Errorf("read starts: %w", translate(err))
	}
	var (
		st       engine.Start
		jitterMS int64
		starts   []engine.Start
	)
	_, err = pgx.ForEachRow(rows, []any{&st.JobID, &st.Slot, &st.Started, &jitterMS}, func() error {
		starts = append(starts, engine.Start{JobID: st.JobID, Slot: st.Slot.UTC(), Started: st.Started.UTC(), Jitter: time.Duration(jitterMS) * time.Millisecond})
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("read starts: %w", translate(err))
	}
	return finished, starts, nil
}
