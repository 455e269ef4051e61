package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/engine"
)

// jobColumns is the column list every job query selects, in scanJob's order.
const jobColumns = `id, type, payload, schedule, timezone, state, next_run_at, slot,
	attempt, max_attempts, lease_owner, lease_until, lease_generation,
	idempotency_key, overlap, misfire, timeout_ms, backoff_ms, jitter_ms,
	cancel_requested, missed_slots, last_error, created_at, updated_at,
	pause_reason, pause_until, expect_success_ms, last_success_at, quiet_since,
	triggered, parent_id, name, request_hash, notify, failing_since, rescheduled_at, pause_requested, watch_from,
	coalesce(lease_ms, 0) AS lease_ms`

type scanner interface{ Scan(dest ...any) error }

func scanJob(row scanner) (db.Job, error) {
	var (
		j      db.Job
		notify string
	)
	err := row.Scan(&j.ID, &j.Type, (*[]byte)(&j.Payload), text{&j.Schedule}, &j.Timezone, &j.State, at{&j.NextRunAt}, at{&j.Slot},
		&j.Attempt, &j.MaxAttempts, text{&j.LeaseOwner}, at{&j.LeaseUntil}, &j.LeaseGeneration,
		text{&j.IdempotencyKey}, &j.Overlap, &j.Misfire, millis{&j.Timeout}, millis{&j.Backoff}, millis{&j.Jitter},
		&j.CancelRequested, &j.MissedSlots, text{&j.LastError}, moment{&j.CreatedAt}, moment{&j.UpdatedAt},
		text{&j.PauseReason}, at{&j.PauseUntil}, millis{&j.ExpectSuccessWithin}, at{&j.LastSuccessAt}, at{&j.QuietSince},
		&j.Triggered, text{&j.ParentID}, text{&j.Name}, text{&j.RequestHash}, text{&notify}, at{&j.FailingSince}, at{&j.RescheduledAt}, &j.PauseRequested, at{&j.WatchFrom}, millis{&j.LeaseFor})
	if errors.Is(err, sql.ErrNoRows) {
		return db.Job{}, db.ErrNotFound
	}
	if err != nil {
		return db.Job{}, fmt.Errorf("scan job: %w", err)
	}
	if j.Notify, err = db.ParseNotify(notify); err != nil {
		return db.Job{}, err
	}
	if !j.Recurring() {
		j.Overlap, j.Misfire = "", "" // recurring policies; stored defaults mean nothing here
	}
	j.KeepWatchFrom()
	return j, nil
}

// scanJobs reads the jobs of a query's answer.
func scanJobs(rows *sql.Rows, err error) ([]db.Job, error) { return collect(rows, err, scanJob) }

// collect scans every row of a query's answer.
func collect[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, translate(err)
		}
		out = append(out, v)
	}
	return out, translate(rows.Err())
}

// insertJobSQL inserts one job, or nothing when a job that is not
// cancelled holds its idempotency key. A one-off job stores the recurring
// policies' defaults.
const insertJobSQL = `INSERT INTO jobs (id, type, payload, schedule, timezone, state, next_run_at, slot,
		max_attempts, idempotency_key, overlap, misfire, timeout_ms, backoff_ms, jitter_ms,
		expect_success_ms, parent_id, created_at, updated_at, name, request_hash, notify)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce(?, 'skip'), coalesce(?, 'run_once'), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL AND state <> 'cancelled' DO NOTHING`

// JobsInsert inserts jobs one statement each; see engine.Tx.
func (t *tx) JobsInsert(ctx context.Context, jobs []db.Job) ([]bool, error) {
	ins := t.stmt(ctx, t.stmts.insertJob)
	inserted := make([]bool, len(jobs))
	for i, j := range jobs {
		res, err := ins.ExecContext(ctx, j.ID, j.Type, string(j.Payload), nullString(j.Schedule), j.Timezone, j.State,
			nullTime(db.Deref(j.NextRunAt)), nullTime(db.Deref(j.Slot)), j.MaxAttempts, nullString(j.IdempotencyKey),
			nullString(j.Overlap), nullString(j.Misfire), ms(j.Timeout), ms(j.Backoff), ms(j.Jitter),
			ms(j.ExpectSuccessWithin), nullString(j.ParentID), fmtTime(j.CreatedAt), fmtTime(j.UpdatedAt),
			nullString(j.Name), nullString(j.RequestHash), nullString(db.NotifyText(j.Notify)))
		if err != nil {
			return nil, fmt.Errorf("insert job: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, fmt.Errorf("insert job: %w", err)
		}
		inserted[i] = n == 1
	}
	return inserted, nil
}

// JobsByKey reads the jobs holding keys; see engine.Tx.
func (t *tx) JobsByKey(ctx context.Context, keys []string) ([]db.Job, error) {
	get := t.stmt(ctx, t.stmts.jobByKey)
	jobs, err := scanEach(keys, func(k string) scanner { return get.QueryRowContext(ctx, k) })
	if err != nil {
		return nil, fmt.Errorf("jobs by key: %w", err)
	}
	return jobs, nil
}

// JobsByName reads the jobs holding names; see engine.Tx.
func (t *tx) JobsByName(ctx context.Context, names []string) ([]db.Job, error) {
	return scanEach(names, func(n string) scanner { return t.tx.QueryRowContext(ctx, jobByNameSQL, n) })
}

// JobLock reads a job; the writer holds the database. See engine.Tx.
func (t *tx) JobLock(ctx context.Context, id string) (db.Job, error) {
	return scanJob(t.tx.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
}

// JobLockName reads the live job of a name; see engine.Tx.
func (t *tx) JobLockName(ctx context.Context, name string) (db.Job, error) {
	return scanJob(t.tx.QueryRowContext(ctx, jobByNameSQL, name))
}

// jobByNameSQL reads the live job of a name. Argument: the name.
const jobByNameSQL = `SELECT ` + jobColumns + ` FROM jobs INDEXED BY jobs_name_live
	WHERE name = ? AND state <> 'cancelled'`

// leasedJobsSQL reads the jobs named in a JSON array of ids, by rowid
// through the id index, in one statement. Argument: the ids.
const leasedJobsSQL = `SELECT ` + jobColumns + ` FROM jobs WHERE id IN (SELECT value FROM json_each(?))`

// JobsLeased reads the jobs that leases name; see engine.Tx. The writer
// holds the database, so nothing else changes them before the transaction
// ends.
func (t *tx) JobsLeased(ctx context.Context, leases []engine.Lease) ([]db.Job, error) {
	return scanJobs(t.stmt(ctx, t.stmts.leasedJobs).QueryContext(ctx, leasedIDs(leases)))
}

// leasedIDs is the ids of the leases' jobs as a JSON array, for json_each.
func leasedIDs(leases []engine.Lease) string {
	ids := make([]string, len(leases))
	for i, l := range leases {
		ids[i] = l.JobID
	}
	return jsonArray(ids)
}

// jsonArray is ss as a JSON array, "[]" for none, for json_each.
func jsonArray(ss []string) string {
	if len(ss) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(ss) // strings: it cannot fail
	return string(b)
}

// scanEach scans the job row that row reads for each of items, leaving
// out the items that have none.
func scanEach(items []string, row func(string) scanner) ([]db.Job, error) {
	var jobs []db.Job
	for _, it := range items {
		j, err := scanJob(row(it))
		if errors.Is(err, db.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// JobsExpired reads jobs whose lease ended; see engine.Tx.
func (t *tx) JobsExpired(ctx context.Context, limit int) ([]db.Job, error) {
	return scanJobs(t.tx.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs INDEXED BY jobs_running
		WHERE state = 'running' AND lease_until < ? ORDER BY lease_until LIMIT ?`, fmtTime(t.now), limit))
}

// JobsPauseOver reads paused jobs whose pause ended; see engine.Tx.
func (t *tx) JobsPauseOver(ctx context.Context, limit int) ([]db.Job, error) {
	return scanJobs(t.tx.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs INDEXED BY jobs_pause_until
		WHERE state = 'paused' AND pause_until IS NOT NULL AND pause_until <= ? ORDER BY pause_until LIMIT ?`, fmtTime(t.now), limit))
}

// JobsWatched reads the schedules with a dead-man's switch; see engine.Tx.
// A SQLite write transaction holds the whole database: none passes over
// a row. Without all it reads only the rows whose window ran out, give or
// take a second (julianday's arithmetic is in floating point), rather than
// every watched job every sweep while holding the writer.
func (t *tx) JobsWatched(ctx context.Context, all bool) ([]db.Job, error) {
	const watched = `SELECT ` + jobColumns + ` FROM jobs INDEXED BY jobs_watched
		WHERE expect_success_ms > 0 AND schedule IS NOT NULL AND state IN ('ready', 'running')`
	if all {
		return scanJobs(t.tx.QueryContext(ctx, watched))
	}
	return scanJobs(t.tx.QueryContext(ctx, watched+` AND quiet_since IS NULL
		AND julianday(max(created_at, coalesce(last_success_at, ''), coalesce(watch_from, ''))) + expect_success_ms / 86400000.0 <= julianday(?)`,
		fmtTime(t.now.Add(time.Second))))
}

// SweptAt reads when a quiet sweep last watched; see engine.Tx.
func (t *tx) SweptAt(ctx context.Context) (time.Time, error) {
	var at string
	err := t.tx.QueryRowContext(ctx, `SELECT swept_at FROM watch WHERE id = 1`).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read the last quiet sweep: %w", err)
	}
	return parseTime(at)
}

// SetSweptAt records that a quiet sweep watched at at; see engine.Tx.
func (t *tx) SetSweptAt(ctx context.Context, at time.Time) error {
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO watch (id, swept_at) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET swept_at = excluded.swept_at`, fmtTime(at)); err != nil {
		return fmt.Errorf("record the quiet sweep: %w", err)
	}
	return nil
}

// readyTypes starts a WITH list whose "types" are the job types a
// statement reads ready jobs of: those of the JSON array param or, when it
// is "[]", every type that has a ready job, found by stepping through
// jobs_ready from one type to the next. A statement then reads each type's
// own stretch of jobs_ready (type, next_run_at), so that a backlog of one
// type is never walked to find another's jobs.
func readyTypes(param string) string {
	return `WITH RECURSIVE present(type) AS (
		SELECT min(type) FROM jobs INDEXED BY jobs_ready WHERE state = 'ready' AND ` + param + ` = '[]'
		UNION ALL
		SELECT (SELECT min(type) FROM jobs INDEXED BY jobs_ready WHERE state = 'ready' AND type > p.type)
		FROM present p WHERE p.type IS NOT NULL
	), types(type) AS (
		SELECT value FROM json_each(` + param + `) UNION ALL SELECT type FROM present WHERE type IS NOT NULL
	)`
}

// claimSQL leases due jobs: each type's earliest due, up to the limit,
// from its stretch of jobs_ready, and of those the earliest due of all.
// The candidates are named by rowid, which the partial index holds, so
// that each is found without a search of the id index. Arguments: worker,
// lease until, now, due by, the types as a JSON array ("[]": any), the
// limit, the lease's length in milliseconds.
var claimSQL = readyTypes("?5") + ` UPDATE jobs SET state = 'running', lease_owner = ?1, lease_until = ?2, lease_ms = ?7,
		lease_generation = lease_generation + 1, attempt = attempt + 1, cancel_requested = 0, updated_at = max(?3, updated_at)
	WHERE rowid IN (SELECT picked.rowid FROM types, jobs AS picked WHERE picked.rowid IN (
			SELECT rowid FROM jobs INDEXED BY jobs_ready WHERE state = 'ready' AND type = types.type AND next_run_at <= ?4
			ORDER BY next_run_at LIMIT ?6)
		ORDER BY picked.next_run_at LIMIT ?6)
	RETURNING ` + jobColumns

// claimRunsSQL writes the run rows of the just-claimed jobs named in a JSON
// array, in one statement, from the jobs' rows as the claim left them (see
// engine.Tx.JobsClaim). Argument: the job ids.
const claimRunsSQL = `INSERT INTO runs (job_id, slot, attempt, generation, worker_id, started_at, outcome, reason)
	SELECT id, CASE WHEN triggered = 1 THEN updated_at ELSE slot END, attempt, lease_generation, lease_owner,
		max(updated_at, next_run_at), 'running', CASE WHEN triggered = 1 THEN '` + db.ReasonManual + `' END
	FROM jobs WHERE id IN (SELECT value FROM json_each(?1))
	RETURNING id, job_id`

// JobsClaim leases due jobs and writes their runs; see engine.Tx.
func (t *tx) JobsClaim(ctx context.Context, a engine.ClaimArgs) ([]db.Claim, error) {
	now := fmtTime(t.now)
	jobs, err := scanJobs(t.stmt(ctx, t.stmts.claim).QueryContext(ctx, a.Worker, fmtTime(t.now.Add(a.Lease)), now, fmtTime(t.now.Add(a.Ahead)), jsonArray(a.Types), a.Max, a.Lease.Milliseconds()))
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	ids := make([]string, len(jobs))
	byID := make(map[string]*db.Claim, len(jobs))
	claims := make([]db.Claim, len(jobs))
	for i, j := range jobs {
		ids[i], claims[i].Job = j.ID, j
		byID[j.ID] = &claims[i]
	}
	rows, err := t.stmt(ctx, t.stmts.insertRuns).QueryContext(ctx, jsonArray(ids))
	if err != nil {
		return nil, fmt.Errorf("insert runs: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			runID int64
			jobID string
		)
		if err := rows.Scan(&runID, &jobID); err != nil {
			return nil, fmt.Errorf("insert runs: %w", err)
		}
		if c := byID[jobID]; c != nil {
			c.RunID = runID
			n++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert runs: %w", err)
	}
	if n != len(claims) {
		return nil, fmt.Errorf("insert runs: %d run rows written for %d claims", n, len(claims))
	}
	return claims, nil
}

// updateJobSQL writes a job's lifecycle columns, fenced by the state and
// generation it was read with.
const updateJobSQL = `UPDATE jobs SET state = ?, next_run_at = ?, slot = ?, attempt = ?,
		lease_owner = ?, lease_until = ?, cancel_requested = ?, missed_slots = ?, last_error = ?,
		pause_reason = ?, pause_until = ?, last_success_at = ?, quiet_since = ?, triggered = ?, updated_at = ?,
		failing_since = ?, rescheduled_at = ?, pause_requested = ?, watch_from = ?
	WHERE id = ? AND state = ? AND lease_generation = ?`

// JobsUpdate writes jobs, fenced; see engine.Tx.
func (t *tx) JobsUpdate(ctx context.Context, us []engine.JobUpdate) error {
	upd := t.stmt(ctx, t.stmts.updateJob)
	for _, u := range us {
		j := u.Job
		res, err := upd.ExecContext(ctx, j.State, nullTime(db.Deref(j.NextRunAt)), nullTime(db.Deref(j.Slot)), j.Attempt,
			nullString(j.LeaseOwner), nullTime(db.Deref(j.LeaseUntil)), j.CancelRequested, j.MissedSlots, nullString(j.LastError),
			nullString(j.PauseReason), nullTime(db.Deref(j.PauseUntil)), nullTime(db.Deref(j.LastSuccessAt)), nullTime(db.Deref(j.QuietSince)),
			j.Triggered, fmtTime(j.UpdatedAt), nullTime(db.Deref(j.FailingSince)), nullTime(db.Deref(j.RescheduledAt)), j.PauseRequested, nullTime(db.Deref(j.WatchFrom)),
			j.ID, u.From, j.LeaseGeneration)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("job %s is no longer %s at generation %d (%d rows, %v)", j.ID, u.From, j.LeaseGeneration, n, err)
		}
	}
	return nil
}

// JobRedefine writes a job's definition and lifecycle; see engine.Tx.
func (t *tx) JobRedefine(ctx context.Context, u engine.JobUpdate) error {
	j := u.Job
	res, err := t.tx.ExecContext(ctx, `UPDATE jobs SET name = ?, payload = ?, schedule = ?, timezone = ?,
			max_attempts = ?, timeout_ms = ?, backoff_ms = ?, jitter_ms = ?, overlap = coalesce(?, 'skip'), misfire = coalesce(?, 'run_once'),
			expect_success_ms = ?, notify = ?, slot = ?, next_run_at = ?, updated_at = ?, attempt = ?, missed_slots = ?,
			rescheduled_at = ?, quiet_since = ?, watch_from = ?
		WHERE id = ? AND state = ? AND lease_generation = ?`,
		nullString(j.Name), string(j.Payload), nullString(j.Schedule), j.Timezone,
		j.MaxAttempts, ms(j.Timeout), ms(j.Backoff), ms(j.Jitter), nullString(j.Overlap), nullString(j.Misfire),
		ms(j.ExpectSuccessWithin), nullString(db.NotifyText(j.Notify)), nullTime(db.Deref(j.Slot)), nullTime(db.Deref(j.NextRunAt)),
		fmtTime(j.UpdatedAt), j.Attempt, j.MissedSlots, nullTime(db.Deref(j.RescheduledAt)), nullTime(db.Deref(j.QuietSince)),
		nullTime(db.Deref(j.WatchFrom)), j.ID, u.From, j.LeaseGeneration)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("job %s is no longer %s at generation %d (%d rows, %v)", j.ID, u.From, j.LeaseGeneration, n, err)
	}
	return nil
}

// heartbeatSQL extends a live lease and says whether cancellation was
// requested. Arguments: lease until, job id, generation, now.
const heartbeatSQL = `UPDATE jobs SET lease_until = max(lease_until, ?)
	WHERE id = ? AND lease_generation = ? AND state = 'running' AND lease_until >= ?
	RETURNING cancel_requested, lease_until`

// Heartbeat extends a live lease, never shortening it; see engine.Tx.
func (t *tx) Heartbeat(ctx context.Context, job string, generation int64, until time.Time) (bool, time.Time, error) {
	var (
		cancel     int
		leaseUntil time.Time
	)
	err := t.stmt(ctx, t.stmts.heartbeat).QueryRowContext(ctx, fmtTime(until), job, generation, fmtTime(t.now)).Scan(&cancel, moment{&leaseUntil})
	if errors.Is(err, sql.ErrNoRows) {
		return false, time.Time{}, db.ErrNotFound
	}
	return cancel != 0, leaseUntil, err
}

// Notify does nothing: one process owns a SQLite file.
func (t *tx) Notify(context.Context, map[string]int) error { return nil }

// JobGet returns a job; see db.Store.
func (d *dialect) JobGet(ctx context.Context, id string) (db.Job, error) {
	j, err := scanJob(d.read.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return db.Job{}, fmt.Errorf("get job %s: %w", id, translate(err))
	}
	return j, err
}

// JobsPage reads a page of jobs; see engine.Reader.
func (d *dialect) JobsPage(ctx context.Context, p db.JobListParams, limit int) ([]db.Job, error) {
	q, args := jobsPageSQL(p, limit)
	return scanJobs(d.read.QueryContext(ctx, q, args...))
}

// jobsPageSQL is the statement of a page of jobs and its arguments.
func jobsPageSQL(p db.JobListParams, limit int) (string, []any) {
	where, args := p.Where(func(int) string { return "?" })
	return `SELECT ` + jobColumns + ` FROM jobs` + where + ` ORDER BY id DESC LIMIT ?`, append(args, limit)
}

// nextDueSQL reads when the earliest ready job of some types is due, from
// the first entry of each type's stretch of jobs_ready. Argument: the
// types as a JSON array ("[]": any).
var nextDueSQL = readyTypes("?1") + ` SELECT min((SELECT next_run_at FROM jobs INDEXED BY jobs_ready
	WHERE state = 'ready' AND type = types.type ORDER BY next_run_at LIMIT 1)) FROM types`

// JobNextDue returns when the earliest ready job of types is due; see
// db.Store. It reads the jobs_ready index only.
func (d *dialect) JobNextDue(ctx context.Context, types []string) (time.Time, bool, error) {
	var next *time.Time
	err := d.read.QueryRowContext(ctx, nextDueSQL, jsonArray(types)).Scan(at{&next})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next due: %w", translate(err))
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return *next, true, nil
}

// JobByName reads the job of a name; see engine.Reader.
func (d *dialect) JobByName(ctx context.Context, name string) (db.Job, error) {
	j, err := scanJob(d.read.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs INDEXED BY jobs_name
		WHERE name = ? ORDER BY state = 'cancelled', id DESC LIMIT 1`, name))
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return db.Job{}, fmt.Errorf("get job %s: %w", name, translate(err))
	}
	return j, err
}

// ms is d in whole milliseconds, as the *_ms columns keep durations.
func ms(d db.Duration) int64 { return time.Duration(d).Milliseconds() }
