package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/engine"
)

// jobColumns is the column list every job query selects, in scanJob's order.
// A text column that may be NULL reads as the empty string, as the job's
// field keeps it.
const jobColumns = `id, type, payload, coalesce(schedule, '') AS schedule, timezone, state, next_run_at, slot,
	attempt, max_attempts, coalesce(lease_owner, '') AS lease_owner, lease_until, lease_generation,
	coalesce(idempotency_key, '') AS idempotency_key, overlap, misfire, timeout_ms, backoff_ms, jitter_ms,
	cancel_requested, missed_slots, coalesce(last_error, '') AS last_error, created_at, updated_at,
	coalesce(pause_reason, '') AS pause_reason, pause_until, expect_success_ms, last_success_at, quiet_since,
	triggered, coalesce(parent_id, '') AS parent_id, coalesce(name, '') AS name,
	coalesce(request_hash, '') AS request_hash, coalesce(notify, '') AS notify, failing_since, rescheduled_at, pause_requested,
	watch_from, coalesce(lease_ms, 0) AS lease_ms`

// readJob reads one job row.
func readJob(row pgx.Row) (j db.Job, err error) {
	err = scanJob(row, &j)
	return j, err
}

// scanJob reads a row of jobColumns, and then of extra's columns, into j:
// in place, so that the jobs of a many-row answer are each written once,
// into their slice.
func scanJob(row pgx.Row, j *db.Job, extra ...any) error {
	var notify string
	dest := append(make([]any, 0, 39+len(extra)), &j.ID, &j.Type, (*[]byte)(&j.Payload), &j.Schedule, &j.Timezone,
		&j.State, &j.NextRunAt, &j.Slot, &j.Attempt, &j.MaxAttempts, &j.LeaseOwner, &j.LeaseUntil, &j.LeaseGeneration,
		&j.IdempotencyKey, &j.Overlap, &j.Misfire, (*int64)(&j.Timeout), (*int64)(&j.Backoff), (*int64)(&j.Jitter),
		&j.CancelRequested, &j.MissedSlots, &j.LastError, &j.CreatedAt, &j.UpdatedAt,
		&j.PauseReason, &j.PauseUntil, (*int64)(&j.ExpectSuccessWithin), &j.LastSuccessAt, &j.QuietSince,
		&j.Triggered, &j.ParentID, &j.Name, &j.RequestHash, &notify, &j.FailingSince, &j.RescheduledAt, &j.PauseRequested,
		&j.WatchFrom, (*int64)(&j.LeaseFor))
	if err := row.Scan(append(dest, extra...)...); err != nil {
		if err = translate(err); errors.Is(err, db.ErrNotFound) {
			return err
		}
		return fmt.Errorf("scan job: %w", err)
	}
	for _, d := range []*db.Duration{&j.Timeout, &j.Backoff, &j.Jitter, &j.ExpectSuccessWithin, &j.LeaseFor} {
		*d *= db.Duration(time.Millisecond) // the *_ms columns
	}
	var err error
	if j.Notify, err = db.ParseNotify(notify); err != nil {
		return err
	}
	if !j.Recurring() {
		j.Overlap, j.Misfire = "", "" // recurring policies; stored defaults mean nothing here
	}
	inUTC(j.NextRunAt, j.Slot, j.LeaseUntil, j.PauseUntil, j.LastSuccessAt, j.QuietSince, j.FailingSince, j.RescheduledAt, j.WatchFrom, &j.CreatedAt, &j.UpdatedAt)
	j.KeepWatchFrom()
	return nil
}

// querier is what queryJobs reads from: the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func queryJobs(ctx context.Context, q querier, sql string, args ...any) ([]db.Job, error) {
	return query(ctx, q, readJob, sql, args...)
}

// query scans every row of sql's answer.
func query[T any](ctx context.Context, q querier, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, translate(err)
	}
	return collect(rows, scan)
}

// collect scans every row of rows.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
	return out, translate(err)
}

// scanAll scans every row of rows, each in place into the slice it returns.
// n is the most rows there can be (0: unknown); room for them, up to
// scanAhead, is made before the first is read.
func scanAll[T any](rows pgx.Rows, n int, scan func(pgx.Row, *T) error) ([]T, error) {
	defer rows.Close()
	out := make([]T, 0, min(n, scanAhead))
	for rows.Next() {
		var zero T
		out = append(out, zero)
		if err := scan(rows, &out[len(out)-1]); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// scanAhead bounds the rows scanAll makes room for before it reads any: a
// claim may ask for hundreds of jobs and find none.
const scanAhead = 128

// jobs reads the jobs of sql's answer, at most n of them (0: unknown),
// sending the queued writes first.
func (t *tx) jobs(ctx context.Context, n int, sql string, args ...any) (jobs []db.Job, err error) {
	err = t.query(ctx, func(rows pgx.Rows) error {
		jobs, err = scanAll(rows, n, func(r pgx.Row, j *db.Job) error { return scanJob(r, j) })
		return err
	}, sql, args...)
	return jobs, err
}

// newJobColumns are the columns a new job's row fills, with their types,
// in the order of newJobRow.
var newJobColumns = []struct{ name, typ string }{
	{"id", "text"}, {"type", "text"}, {"payload", "json"}, {"schedule", "text"}, {"timezone", "text"},
	{"state", "text"}, {"next_run_at", "timestamptz"}, {"slot", "timestamptz"}, {"max_attempts", "integer"},
	{"idempotency_key", "text"}, {"overlap", "text"}, {"misfire", "text"}, {"timeout_ms", "bigint"},
	{"backoff_ms", "bigint"}, {"jitter_ms", "bigint"}, {"expect_success_ms", "bigint"}, {"parent_id", "text"},
	{"created_at", "timestamptz"}, {"updated_at", "timestamptz"}, {"name", "text"}, {"request_hash", "text"},
	{"notify", "text"},
}

// newJobRow is j's row in newJobColumns. A one-off job stores the recurring
// policies' defaults.
func newJobRow(j db.Job) []any {
	return []any{j.ID, j.Type, string(j.Payload), nullString(j.Schedule), j.Timezone,
		string(j.State), j.NextRunAt, j.Slot, int32(j.MaxAttempts),
		nullString(j.IdempotencyKey), cmp.Or(j.Overlap, db.OverlapSkip), cmp.Or(j.Misfire, db.MisfireRunOnce), ms(j.Timeout),
		ms(j.Backoff), ms(j.Jitter), ms(j.ExpectSuccessWithin), nullString(j.ParentID),
		j.CreatedAt, j.CreatedAt, nullString(j.Name), nullString(j.RequestHash),
		nullString(db.NotifyText(j.Notify))}
}

// newJobNames are the names of newJobColumns.
var newJobNames = func() []string {
	names := make([]string, len(newJobColumns))
	for i, c := range newJobColumns {
		names[i] = c.name
	}
	return names
}()

// insertJobsSQL inserts jobs given as one array per column of
// newJobColumns, except those whose idempotency key is taken (by a job
// that is not cancelled, or an earlier one of the same statement), and
// returns the ids it inserted. Rows with keys go in the order of their
// keys (the earlier of a key repeated in the batch first, which takes it),
// those without in the order of their names: two batches that hold the
// same keys, or the same names, in other orders then take their locks in
// one order instead of deadlocking. (Batches whose keys and names cross
// still can: PostgreSQL then ends one, which is db.ErrBusy.)
var insertJobsSQL = func() string {
	arrays := make([]string, len(newJobColumns))
	for i, c := range newJobColumns {
		arrays[i] = fmt.Sprintf("$%d::%s[]", i+1, c.typ)
	}
	cols := strings.Join(newJobNames, ", ")
	return `INSERT INTO jobs (` + cols + `) SELECT ` + cols + `
		FROM unnest(` + strings.Join(arrays, ", ") + `) WITH ORDINALITY AS u (` + cols + `, n)
		ORDER BY idempotency_key, CASE WHEN idempotency_key IS NULL THEN name END, n
		ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL AND state <> 'cancelled' DO NOTHING
		RETURNING id`
}()

// copyMin is the smallest batch without idempotency keys that JobsInsert
// copies in (COPY) rather than inserts. Measured, jobs a second in batches
// of 1,000: COPY 55,000–65,000, INSERT 41,000–52,000; of 10: 6,600 and
// 6,100. Below about 8 jobs COPY's own round trip costs more than it saves
// (of 1: 1,100 and 1,300).
const copyMin = 8

// JobsInsert inserts jobs in one statement; see engine.Tx. A batch without
// idempotency keys cannot conflict, and is copied in when it is large.
func (t *tx) JobsInsert(ctx context.Context, jobs []db.Job) ([]bool, error) {
	if len(jobs) >= copyMin && !slices.ContainsFunc(jobs, func(j db.Job) bool { return j.IdempotencyKey != "" }) {
		return t.copyJobs(ctx, jobs)
	}
	columns, args := make([][]any, len(newJobColumns)), make([]any, len(newJobColumns))
	for c := range columns {
		columns[c] = make([]any, len(jobs))
		args[c] = columns[c]
	}
	index := make(map[string]int, len(jobs))
	for i, j := range jobs {
		for c, v := range newJobRow(j) {
			columns[c][i] = v
		}
		index[j.ID] = i
	}
	inserted := make([]bool, len(jobs))
	err := t.query(ctx, func(rows pgx.Rows) error {
		var id string
		_, err := pgx.ForEachRow(rows, []any{&id}, func() error { inserted[index[id]] = true; return nil })
		return err
	}, insertJobsSQL, args...)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", translate(err))
	}
	return inserted, nil
}

// copyJobs writes new jobs with COPY, after the queued writes; all of them
// are inserted, or the transaction fails. Named jobs go in the order of
// their names, for the reason insertJobsSQL inserts in the order of keys.
func (t *tx) copyJobs(ctx context.Context, jobs []db.Job) ([]bool, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(jobs, func(j db.Job) bool { return j.Name != "" }) {
		jobs = slices.SortedStableFunc(slices.Values(jobs), func(a, b db.Job) int { return strings.Compare(a.Name, b.Name) })
	}
	rows := pgx.CopyFromSlice(len(jobs), func(i int) ([]any, error) { return newJobRow(jobs[i]), nil })
	if _, err := t.conn.CopyFrom(ctx, pgx.Identifier{"jobs"}, newJobNames, rows); err != nil {
		return nil, fmt.Errorf("copy jobs: %w", translate(err))
	}
	inserted := make([]bool, len(jobs))
	for i := range inserted {
		inserted[i] = true
	}
	return inserted, nil
}

// JobsByKey reads the jobs holding keys; see engine.Tx.
func (t *tx) JobsByKey(ctx context.Context, keys []string) ([]db.Job, error) {
	return t.jobs(ctx, len(keys), `SELECT `+jobColumns+` FROM jobs WHERE idempotency_key = ANY($1) AND state <> 'cancelled'`, keys)
}

// JobsByName reads the jobs holding names; see engine.Tx.
func (t *tx) JobsByName(ctx context.Context, names []string) ([]db.Job, error) {
	return t.jobs(ctx, len(names), `SELECT `+jobColumns+` FROM jobs WHERE name = ANY($1) AND state <> 'cancelled'`, names)
}

// JobLockName reads and locks the live job of a name; see engine.Tx.
func (t *tx) JobLockName(ctx context.Context, name string) (db.Job, error) {
	var j db.Job
	err := t.queryRow(ctx, func(r pgx.Row) error { return scanJob(r, &j) },
		`SELECT `+jobColumns+` FROM jobs WHERE name = $1 AND state <> 'cancelled' FOR UPDATE`, name)
	return j, err
}

// JobLock reads and locks a job; see engine.Tx.
func (t *tx) JobLock(ctx context.Context, id string) (db.Job, error) {
	var j db.Job
	err := t.queryRow(ctx, func(r pgx.Row) error { return scanJob(r, &j) },
		`SELECT `+jobColumns+` FROM jobs WHERE id = $1 FOR UPDATE`, id)
	return j, err
}

// JobsLeased reads and locks the jobs that leases name, in id order so
// that groups of completions on several nodes lock in one order; see
// engine.Tx. The rows are found by primary key alone: a condition on state
// or lease_until would let the planner walk jobs_running instead, whose
// statistics on a queue table are always stale (measured: 17,022 index
// entries visited to lock 200 rows). Rows whose generation is none of the
// leases' are not locked; a row of another of their generations is (a
// completion then waits for, and briefly holds, a job another worker may
// be running).
func (t *tx) JobsLeased(ctx context.Context, leases []engine.Lease) ([]db.Job, error) {
	ids, gens := leaseArrays(leases)
	return t.jobs(ctx, len(leases), leasedJobsSQL, ids, gens)
}

// leasedJobsSQL reads and locks jobs by id, in id order, those of the
// generations given. Arguments: the ids, the generations.
const leasedJobsSQL = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ANY($1) AND lease_generation = ANY($2)
	ORDER BY id FOR UPDATE`

// leaseArrays is leases as an array of job ids and one of generations.
func leaseArrays(leases []engine.Lease) ([]string, []int64) {
	ids, gens := make([]string, len(leases)), make([]int64, len(leases))
	for i, l := range leases {
		ids[i], gens[i] = l.JobID, l.Generation
	}
	return ids, gens
}

// JobsExpired reads jobs whose lease ended; see engine.Tx.
func (t *tx) JobsExpired(ctx context.Context, limit int) ([]db.Job, error) {
	return t.jobs(ctx, limit, `SELECT `+jobColumns+` FROM jobs
		WHERE state = 'running' AND lease_until < $1 ORDER BY lease_until LIMIT $2
		FOR UPDATE SKIP LOCKED`, t.Now(), limit)
}

// JobsPauseOver reads paused jobs whose pause ended; see engine.Tx.
func (t *tx) JobsPauseOver(ctx context.Context, limit int) ([]db.Job, error) {
	return t.jobs(ctx, limit, `SELECT `+jobColumns+` FROM jobs
		WHERE state = 'paused' AND pause_until IS NOT NULL AND pause_until <= $1
		ORDER BY pause_until LIMIT $2 FOR UPDATE SKIP LOCKED`, t.Now(), limit)
}

// watchedSQL reads the schedules with a dead-man's switch.
const watchedSQL = `SELECT ` + jobColumns + ` FROM jobs
	WHERE expect_success_ms > 0 AND schedule IS NOT NULL AND state IN ('ready', 'running')`

// JobsWatched reads the schedules with a dead-man's switch; see engine.Tx.
// A sweep locks only those whose window ran out: locking every watched row
// each sweep (every 5 s) wrote a WAL record for each of them.
// With all it waits for the rows other transactions hold, taking the locks
// in the order of the primary key, so that two nodes that start at once
// do not deadlock on them.
func (t *tx) JobsWatched(ctx context.Context, all bool) ([]db.Job, error) {
	if all {
		return t.jobs(ctx, 0, watchedSQL+` ORDER BY id FOR UPDATE`)
	}
	return t.jobs(ctx, 0, watchedSQL+` AND quiet_since IS NULL
		AND greatest(created_at, last_success_at, watch_from) + expect_success_ms * interval '1 millisecond' <= $1
		FOR UPDATE SKIP LOCKED`, t.Now())
}

// SweptAt reads when a quiet sweep last watched; see engine.Tx.
func (t *tx) SweptAt(ctx context.Context) (time.Time, error) {
	var at time.Time
	err := t.queryRow(ctx, func(r pgx.Row) error { return r.Scan(&at) }, `SELECT swept_at FROM watch WHERE id = 1`)
	if err = translate(err); errors.Is(err, db.ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read the last quiet sweep: %w", err)
	}
	return at.UTC(), nil
}

// SetSweptAt records that a quiet sweep watched at at; see engine.Tx.
func (t *tx) SetSweptAt(ctx context.Context, at time.Time) error {
	t.exec(nil, `INSERT INTO watch (id, swept_at) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET swept_at = excluded.swept_at`, at)
	return nil
}

// readyTypes starts a WITH list whose "types" are the job types a
// statement reads ready jobs of: those of the text array param or, when it
// is empty, every type that has a ready job, found by stepping through
// jobs_ready from one type to the next. A statement then reads each type's
// own stretch of jobs_ready (type, next_run_at), so that a backlog of one
// type is never walked to find another's jobs.
func readyTypes(param string) string {
	return `WITH RECURSIVE present(type) AS (
		SELECT min(type) FROM jobs WHERE state = 'ready' AND cardinality(` + param + `::text[]) = 0
		UNION ALL
		SELECT (SELECT min(type) FROM jobs WHERE state = 'ready' AND type > p.type) FROM present p WHERE p.type IS NOT NULL
	), types(type) AS (
		SELECT unnest(` + param + `::text[]) UNION ALL SELECT type FROM present WHERE type IS NOT NULL
	)`
}

// claimSQL leases due jobs picked FOR UPDATE SKIP LOCKED (rows another node
// is claiming, cancelling or finishing are passed over, not waited for) and
// writes their runs in the same statement (see engine.Tx.JobsClaim). Each
// type's earliest due jobs are picked from its stretch of jobs_ready, up to
// the limit, and the earliest due of all those are claimed; the others
// stay locked, passed over by other claims, until the claim commits. The
// picked ids are gathered into an array first (= ANY(ARRAY(…))), so that
// the jobs are then looked up by primary key whatever the planner thinks
// the limit is: with IN (…) a plan made without the arguments joined them
// with a scan of the whole table. Each
// claimed job takes its run's id from the sequence before the insert, so
// that the answer needs no join of the claimed jobs with their runs: the
// planner, which cannot estimate either, joined them in a nested loop,
// quadratic in the batch (measured: 13 of a claim's 25 ms for 99 jobs).
// Arguments: worker, the lease's length in microseconds, now (NULL: the
// transaction's now(), its start, which the claim then reads for the
// transaction: see tx.Now), how far ahead jobs may be due in
// microseconds, the types ({}: any), the limit.
var claimSQL = readyTypes("$5") + `, ` + claimOf(`SELECT id FROM (`+pickDue(``)+`) due`) + `
	SELECT * FROM numbered`

// pickDue picks, FOR UPDATE SKIP LOCKED, the earliest due jobs of a
// claim's types (see claimSQL), each with its id, next_run_at and the
// columns cols (each beginning with a comma).
func pickDue(cols string) string {
	return `SELECT picked.* FROM types CROSS JOIN LATERAL (
				SELECT id, next_run_at` + cols + ` FROM jobs WHERE state = 'ready' AND type = types.type
					AND next_run_at <= ` + claimNow + ` + $4::bigint * interval '1 microsecond'
				ORDER BY next_run_at LIMIT $6 FOR UPDATE SKIP LOCKED) picked
			ORDER BY picked.next_run_at LIMIT $6`
}

// claimOf is the part of a claim statement that leases the jobs of the
// query ids and writes their runs (see claimSQL), as CTEs; numbered
// answers the claims.
func claimOf(ids string) string {
	return `claimed AS (
		UPDATE jobs SET state = 'running', lease_owner = $1, lease_until = ` + claimNow + ` + $2::bigint * interval '1 microsecond', lease_ms = $2::bigint / 1000,
			lease_generation = lease_generation + 1, attempt = attempt + 1, cancel_requested = false, updated_at = greatest(` + claimNow + `, updated_at)
		WHERE id = ANY(ARRAY(` + ids + `))
		RETURNING ` + jobColumns + `
	), numbered AS (
		SELECT claimed.*, nextval('runs_id_seq') AS run_id FROM claimed
	), started AS (
		INSERT INTO runs (id, job_id, slot, attempt, generation, worker_id, started_at, outcome, reason)
		SELECT run_id, id, CASE WHEN triggered THEN updated_at ELSE slot END, attempt, lease_generation, lease_owner,
			greatest(updated_at, next_run_at), 'running', CASE WHEN triggered THEN '` + db.ReasonManual + `' END
		FROM numbered
	)`
}

// claimQuickSQL is claimSQL for engine.QuickClaimer: of the jobs claimSQL
// would pick it claims those that need no writes after their claims (no
// recurring job, no job with notifications: as the engine's
// quickClaimable), and none when its clock lies outside the span of
// arguments 7 and 8 (NULL: open). Each row answers whether it left a
// picked job (or all, outside the span) to the ordinary claim (rest), then
// a claim; when it claims nothing, one row with no claim.
var claimQuickSQL = readyTypes("$5") + `, due AS MATERIALIZED (` + pickDue(`, schedule IS NULL AND notify IS NULL AS quick`) + `
	), quiet AS (
		SELECT ($7::timestamptz IS NULL OR ` + claimNow + ` >= $7) AND ($8::timestamptz IS NULL OR ` + claimNow + ` < $8) AS ok
	), ` + claimOf(`SELECT id FROM due, quiet WHERE due.quick AND quiet.ok`) + `
	SELECT (SELECT NOT ok FROM quiet) OR EXISTS (SELECT FROM due WHERE NOT quick) AS rest, numbered.*
	FROM (SELECT) one LEFT JOIN numbered ON true`

// claimNow is the claim's clock: its argument 3, or the transaction's.
const claimNow = `coalesce($3::timestamptz, now())`

// claimSettings is what a claim's transaction sets before the claim (see
// JobsClaim).
const claimSettings = `SET LOCAL enable_sort = off`

// JobsClaim leases due jobs and writes their runs in one statement; see
// engine.Tx. The candidates must come from walking jobs_ready in order,
// however many are due: with the statistics of a table that has just
// grown (a batch of jobs enqueued and due at once), the planner estimates
// a few due rows and would rather fetch them all and sort them (measured:
// 188 ms for 20,000 due jobs, linear in them), and the plan a connection
// keeps would keep doing so. Sorting is off for the rest of the claim's
// transaction, whose other statements look rows up by key.
func (t *tx) JobsClaim(ctx context.Context, a engine.ClaimArgs) ([]db.Claim, error) {
	t.exec(nil, claimSettings)
	var claims []db.Claim
	err := t.query(ctx, func(rows pgx.Rows) (err error) {
		claims, err = scanAll(rows, a.Max, func(r pgx.Row, c *db.Claim) error { return scanJob(r, &c.Job, &c.RunID) })
		return err
	}, claimSQL, a.Worker, a.Lease.Microseconds(), t.given(), a.Ahead.Microseconds(), append([]string{}, a.Types...), a.Max)
	return claims, err
}

// ClaimQuick claims in a transaction of its own, sending its COMMIT with
// the claim; see engine.QuickClaimer. Should the connection break once
// the COMMIT may have gone out, it returns db.ErrCommitUnknown, as InTx
// does: the caller looks up what its worker holds (db.Store.RunsHeld).
func (d *dialect) ClaimQuick(ctx context.Context, now func() time.Time, a engine.ClaimArgs, q engine.Quiet) (claims []db.Claim, rest bool, err error) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("acquire connection: %w", translate(err))
	}
	defer c.Release()
	t := d.begin(ctx, c.Conn(), now)
	t.exec(nil, claimSettings)
	var undecoded error // a row that did not decode, after the COMMIT went out
	t.queued.Queue(claimQuickSQL, a.Worker, a.Lease.Microseconds(), t.given(), a.Ahead.Microseconds(), append([]string{}, a.Types...), a.Max,
		openBound(q.From), openBound(q.Until)).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		claims = make([]db.Claim, 0, min(a.Max, scanAhead))
		for rows.Next() {
			if rows.RawValues()[1] == nil {
				// No claim: the row only says rest.
				dest := make([]any, len(rows.FieldDescriptions()))
				dest[0] = &rest
				if err := rows.Scan(dest...); err != nil {
					undecoded = fmt.Errorf("scan claim: %w", err)
					return undecoded
				}
				continue
			}
			var c db.Claim
			if err := scanJob(prefixed{rows, &rest}, &c.Job, &c.RunID); err != nil {
				undecoded = err
				return undecoded
			}
			claims = append(claims, c)
		}
		return rows.Err()
	})
	if err := t.commit(ctx); err != nil {
		if undecoded != nil && errors.Is(err, undecoded) {
			// pgx read the COMMIT's answer past the row and kept only
			// the row's error: the server may well have leased the jobs.
			return nil, false, fmt.Errorf("claim: %w: %w", db.ErrCommitUnknown, err)
		}
		return nil, false, err
	}
	return claims, rest, nil
}

// prefixed is a row whose first column is scanned into first, before the
// columns a Scan of it names.
type prefixed struct {
	pgx.Row
	first any
}

// Scan scans the row's first column into p.first, the rest into dest.
func (p prefixed) Scan(dest ...any) error { return p.Row.Scan(append([]any{p.first}, dest...)...) }

// openBound is t as an argument, NULL when zero.
func openBound(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// updateJobsSQL writes jobs' lifecycle columns, given as arrays, each
// fenced by the state and generation it was read with; it fails unless
// every job is written (argument 23: how many). The rows are found from
// the arrays, one lookup by primary key each (see tx's plans).
var updateJobsSQL = expectRows(23, "update jobs in the state and generation they were read in", `UPDATE jobs j SET state = u.state, next_run_at = u.next_run_at, slot = u.slot,
		attempt = u.attempt, lease_owner = u.lease_owner, lease_until = u.lease_until,
		cancel_requested = u.cancel_requested, missed_slots = u.missed_slots, last_error = u.last_error,
		pause_reason = u.pause_reason, pause_until = u.pause_until, last_success_at = u.last_success_at,
		quiet_since = u.quiet_since, triggered = u.triggered, updated_at = u.updated_at, failing_since = u.failing_since,
		rescheduled_at = u.rescheduled_at, pause_requested = u.pause_requested, watch_from = u.watch_from
	FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::timestamptz[], $6::timestamptz[],
		$7::integer[], $8::text[], $9::timestamptz[], $10::boolean[], $11::bigint[], $12::text[],
		$13::text[], $14::timestamptz[], $15::timestamptz[], $16::timestamptz[], $17::boolean[], $18::timestamptz[],
		$19::timestamptz[], $20::timestamptz[], $21::boolean[], $22::timestamptz[])
		AS u (id, from_state, generation, state, next_run_at, slot,
			attempt, lease_owner, lease_until, cancel_requested, missed_slots, last_error,
			pause_reason, pause_until, last_success_at, quiet_since, triggered, updated_at, failing_since, rescheduled_at, pause_requested,
			watch_from)
	WHERE j.id = u.id AND j.state = u.from_state AND j.lease_generation = u.generation`)

// JobsUpdate writes jobs, fenced, in one statement; see engine.Tx.
func (t *tx) JobsUpdate(ctx context.Context, us []engine.JobUpdate) error {
	n := len(us)
	var (
		ids, froms, states                    = make([]string, n), make([]string, n), make([]string, n)
		gens, missed                          = make([]int64, n), make([]int64, n)
		nexts, slots, untils, pauses, oks, qs = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		attempts                              = make([]int32, n)
		owners, lastErrs, reasons             = make([]*string, n), make([]*string, n), make([]*string, n)
		cancels, triggered, pausing           = make([]bool, n), make([]bool, n), make([]bool, n)
		updated                               = make([]time.Time, n)
		failing, rescheduled, watches         = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
	)
	for i, u := range us {
		j := u.Job
		ids[i], froms[i], gens[i], states[i] = j.ID, string(u.From), j.LeaseGeneration, string(j.State)
		nexts[i], slots[i], attempts[i], owners[i], untils[i] = j.NextRunAt, j.Slot, int32(j.Attempt), nullString(j.LeaseOwner), j.LeaseUntil
		cancels[i], missed[i], lastErrs[i] = j.CancelRequested, j.MissedSlots, nullString(j.LastError)
		reasons[i], pauses[i], oks[i], qs[i] = nullString(j.PauseReason), j.PauseUntil, j.LastSuccessAt, j.QuietSince
		triggered[i], updated[i], failing[i], rescheduled[i], pausing[i] = j.Triggered, j.UpdatedAt, j.FailingSince, j.RescheduledAt, j.PauseRequested
		watches[i] = j.WatchFrom
	}
	// The rows are locked, so the fence holds for each; were one not to,
	// the statement, and with it the transaction, would fail.
	t.exec(nil, updateJobsSQL, ids, froms, gens, states, nexts, slots,
		attempts, owners, untils, cancels, missed, lastErrs, reasons, pauses, oks, qs, triggered, updated, failing, rescheduled, pausing, watches, n)
	return nil
}

// redefineJobSQL writes a job's definition and lifecycle, fenced as
// updateJobsSQL (argument 20: 1).
var redefineJobSQL = expectRows(20, "redefine a job in the state and generation it was read in", `UPDATE jobs SET name = $1,
		payload = $2::json, schedule = $3, timezone = $4, max_attempts = $5, timeout_ms = $6, backoff_ms = $7, jitter_ms = $8,
		overlap = coalesce($9, 'skip'), misfire = coalesce($10, 'run_once'), expect_success_ms = $11, notify = $12,
		slot = $13, next_run_at = $14, updated_at = $15, attempt = $19, missed_slots = $21,
		rescheduled_at = $22, quiet_since = $23, watch_from = $24
	WHERE id = $16 AND state = $17 AND lease_generation = $18`)

// JobRedefine writes a job's definition and lifecycle; see engine.Tx.
func (t *tx) JobRedefine(ctx context.Context, u engine.JobUpdate) error {
	j := u.Job
	t.exec(nil, redefineJobSQL, nullString(j.Name), string(j.Payload), nullString(j.Schedule), j.Timezone, j.MaxAttempts,
		ms(j.Timeout), ms(j.Backoff), ms(j.Jitter), nullString(j.Overlap), nullString(j.Misfire), ms(j.ExpectSuccessWithin),
		nullString(db.NotifyText(j.Notify)), j.Slot, j.NextRunAt, j.UpdatedAt, j.ID, string(u.From), j.LeaseGeneration, int32(j.Attempt), 1, j.MissedSlots, j.RescheduledAt,
		j.QuietSince, j.WatchFrom)
	return nil
}

// Heartbeat extends a live lease, never shortening it; see engine.Tx.
func (t *tx) Heartbeat(ctx context.Context, job string, generation int64, until time.Time) (bool, time.Time, error) {
	var (
		cancel     bool
		leaseUntil time.Time
	)
	err := t.queryRow(ctx, func(r pgx.Row) error { return r.Scan(&cancel, &leaseUntil) }, `UPDATE jobs SET lease_until = greatest(lease_until, $1)
		WHERE id = $2 AND lease_generation = $3 AND state = 'running' AND lease_until >= $4
		RETURNING cancel_requested, lease_until`, until, job, generation, t.Now())
	return cancel, leaseUntil.UTC(), translate(err)
}

// Notify wakes every node's dispatcher when the transaction commits, with
// the counts of due jobs by type as its payload (see wakePayload); see
// engine.Tx.
func (t *tx) Notify(ctx context.Context, due map[string]int) error {
	t.exec(nil, `SELECT pg_notify($1, $2)`, t.channel, wakePayload(due))
	return nil
}

// JobGet returns a job; see db.Store.
func (d *dialect) JobGet(ctx context.Context, id string) (db.Job, error) {
	j, err := readJob(d.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, id))
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return db.Job{}, fmt.Errorf("get job %s: %w", id, err)
	}
	return j, err
}

// JobsPage reads a page of jobs; see engine.Reader.
func (d *dialect) JobsPage(ctx context.Context, p db.JobListParams, limit int) ([]db.Job, error) {
	sql, args := jobsPageSQL(p, limit)
	return queryJobs(ctx, d.pool, sql, args...)
}

// jobsPageSQL is the statement that reads a page of jobs, and its
// arguments.
func jobsPageSQL(p db.JobListParams, limit int) (string, []any) {
	where, args := p.Where(func(n int) string { return "$" + strconv.Itoa(n) })
	args = append(args, limit)
	return `SELECT ` + jobColumns + ` FROM jobs` + where + ` ORDER BY id DESC LIMIT $` + strconv.Itoa(len(args)), args
}

// JobNextDue returns when the earliest ready job of types is due; see
// db.Store. It reads the jobs_ready partial index only.
func (d *dialect) JobNextDue(ctx context.Context, types []string) (time.Time, bool, error) {
	var next *time.Time
	err := d.pool.QueryRow(ctx, readyTypes("$1")+` SELECT min(first.next_run_at) FROM types CROSS JOIN LATERAL (
			SELECT next_run_at FROM jobs WHERE state = 'ready' AND type = types.type ORDER BY next_run_at LIMIT 1) first`,
		append([]string{}, types...)).Scan(&next)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next due: %w", translate(err))
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return next.UTC(), true, nil
}

// JobByName reads the job of a name; see engine.Reader.
func (d *dialect) JobByName(ctx context.Context, name string) (db.Job, error) {
	j, err := readJob(d.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs
		WHERE name = $1 ORDER BY state = 'cancelled', id DESC LIMIT 1`, name))
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return db.Job{}, fmt.Errorf("get job %s: %w", name, err)
	}
	return j, err
}

// ms is d in whole milliseconds, as the *_ms columns keep durations.
func ms(d db.Duration) int64 { return time.Duration(d).Milliseconds() }
