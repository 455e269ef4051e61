package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/lifecycle"
	"github.com/sked-dev/sked/schedule"
)

// jobColumns is the column list every job query selects, in scanJob's order.
const jobColumns = `id, type, payload, schedule, timezone, state, next_run_at, slot,
	attempt, max_attempts, lease_owner, lease_until, lease_generation,
	idempotency_key, overlap, misfire, timeout_ms, backoff_ms, jitter_ms,
	cancel_requested, missed_slots, last_error, created_at, updated_at,
	pause_reason, pause_until, expect_success_ms, last_success_at, quiet_since,
	triggered, parent_id`

// wakeHorizon is how soon a job must be due for its write to NOTIFY the
// dispatchers; later jobs are found by their next poll of the due time.
const wakeHorizon = 5 * time.Second

func scanJob(row pgx.Row) (db.Job, error) {
	var (
		j                              db.Job
		payload                        []byte
		sched, owner, key, lastErr     *string
		timeoutMS, backoffMS, jitterMS int64
		pauseReason, parent            *string
		expectMS                       int64
	)
	err := row.Scan(&j.ID, &j.Type, &payload, &sched, &j.Timezone, &j.State, &j.NextRunAt, &j.Slot,
		&j.Attempt, &j.MaxAttempts, &owner, &j.LeaseUntil, &j.LeaseGeneration,
		&key, &j.Overlap, &j.Misfire, &timeoutMS, &backoffMS, &jitterMS,
		&j.CancelRequested, &j.MissedSlots, &lastErr, &j.CreatedAt, &j.UpdatedAt,
		&pauseReason, &j.PauseUntil, &expectMS, &j.LastSuccessAt, &j.QuietSince,
		&j.Triggered, &parent)
	if err != nil {
		if err = translate(err); errors.Is(err, db.ErrNotFound) {
			return db.Job{}, err
		}
		return db.Job{}, fmt.Errorf("scan job: %w", err)
	}
	j.Payload = payload
	j.Schedule, j.LeaseOwner, j.IdempotencyKey, j.LastError = deref(sched), deref(owner), deref(key), deref(lastErr)
	j.Timeout = db.Duration(time.Duration(timeoutMS) * time.Millisecond)
	j.Backoff = db.Duration(time.Duration(backoffMS) * time.Millisecond)
	j.Jitter = db.Duration(time.Duration(jitterMS) * time.Millisecond)
	j.PauseReason, j.ParentID = deref(pauseReason), deref(parent)
	j.ExpectSuccessWithin = db.Duration(time.Duration(expectMS) * time.Millisecond)
	if !j.Recurring() {
		j.Overlap, j.Misfire = "", "" // recurring policies; stored defaults mean nothing here
	}
	j.NextRunAt, j.Slot, j.LeaseUntil = utc(j.NextRunAt), utc(j.Slot), utc(j.LeaseUntil)
	j.PauseUntil, j.LastSuccessAt, j.QuietSince = utc(j.PauseUntil), utc(j.LastSuccessAt), utc(j.QuietSince)
	j.CreatedAt, j.UpdatedAt = j.CreatedAt.UTC(), j.UpdatedAt.UTC()
	return j, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// JobCreate inserts a job; see db.Store.
func (s *Store) JobCreate(ctx context.Context, p db.JobCreateParams) (db.Job, bool, error) {
	jobs, created, err := s.createJobs(ctx, []db.JobCreateParams{p}, false)
	if err != nil {
		return db.Job{}, false, err
	}
	return jobs[0], created[0], nil
}

// JobCreateBatch inserts jobs in one transaction; see db.BatchCreator.
func (s *Store) JobCreateBatch(ctx context.Context, ps []db.JobCreateParams) ([]db.Job, error) {
	if err := db.CheckBatch(len(ps)); err != nil {
		return nil, err
	}
	jobs, _, err := s.createJobs(ctx, ps, true)
	return jobs, err
}

// insertJobSQL inserts one job, or nothing when its idempotency key is taken.
const insertJobSQL = `INSERT INTO jobs (id, type, payload, schedule, timezone, state, next_run_at, slot,
		max_attempts, idempotency_key, overlap, misfire, timeout_ms, backoff_ms, jitter_ms,
		expect_success_ms, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, 'ready', $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16)
	ON CONFLICT (idempotency_key) DO NOTHING
	RETURNING ` + jobColumns

// createJobs inserts the jobs of ps in one transaction, all or none. A taken
// idempotency key yields the existing job and created=false. In a batch, a
// validation error names its element (jobs[i].field).
func (s *Store) createJobs(ctx context.Context, ps []db.JobCreateParams, batch bool) ([]db.Job, []bool, error) {
	jobs, created := make([]db.Job, len(ps)), make([]bool, len(ps))
	err := s.withTx(ctx, func(tx pgx.Tx, now time.Time) error {
		wake := db.Job{}
		for i, p := range ps {
			j, ok, err := createJob(ctx, tx, p, now)
			if err != nil {
				var ve *db.ValidationError
				if err = translate(err); batch && errors.As(err, &ve) {
					err = &db.ValidationError{Field: fmt.Sprintf("jobs[%d].%s", i, ve.Field), Msg: ve.Msg}
				}
				return err
			}
			jobs[i], created[i] = j, ok
			if ok && (wake.NextRunAt == nil || j.NextRunAt.Before(*wake.NextRunAt)) {
				wake = j
			}
		}
		return notifyIfDue(ctx, tx, wake, now)
	})
	if err != nil {
		if err = translate(err); errors.Is(err, db.ErrInvalid) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("create jobs: %w", err)
	}
	return jobs, created, nil
}

// createJob inserts the job p describes at now, inside tx. When its
// idempotency key is taken (ON CONFLICT waited for the transaction that took
// it) it returns the first job and created=false.
func createJob(ctx context.Context, tx pgx.Tx, p db.JobCreateParams, now time.Time) (db.Job, bool, error) {
	id := ulid.MustNew(ulid.Timestamp(now), ulid.DefaultEntropy()).String()
	slot, due, err := lifecycle.FirstSlot(p, id, now)
	if err != nil {
		return db.Job{}, false, err
	}
	payload := p.Payload
	if len(payload) == 0 {
		payload = []byte("{}")
	}
	j, err := scanJob(tx.QueryRow(ctx, insertJobSQL,
		id, p.Type, string(payload), nullString(p.Schedule), cmp.Or(p.Timezone, "UTC"),
		due, slot, cmp.Or(p.MaxAttempts, db.DefaultMaxAttempts), nullString(p.IdempotencyKey),
		cmp.Or(p.Overlap, db.OverlapSkip), cmp.Or(p.Misfire, db.MisfireRunOnce),
		cmp.Or(p.Timeout, db.DefaultTimeout).Milliseconds(), cmp.Or(p.Backoff, db.DefaultBackoff).Milliseconds(),
		p.Jitter.Milliseconds(), p.ExpectSuccessWithin.Milliseconds(), now))
	if !errors.Is(err, db.ErrNotFound) {
		return j, err == nil, err
	}
	j, err = scanJob(tx.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE idempotency_key = $1`, p.IdempotencyKey))
	if err != nil {
		return db.Job{}, false, fmt.Errorf("get job by idempotency key: %w", err)
	}
	return j, false, nil
}

// notifyIfDue wakes every node's dispatcher, at commit, when j is ready and
// due within wakeHorizon.
func notifyIfDue(ctx context.Context, tx pgx.Tx, j db.Job, now time.Time) error {
	if j.State != db.StateReady || j.NextRunAt == nil || j.NextRunAt.After(now.Add(wakeHorizon)) {
		return nil
	}
	return notify(ctx, tx)
}

// notify wakes every node's dispatcher when tx commits.
func notify(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, wakeChannel); err != nil {
		return fmt.Errorf("notify %s: %w", wakeChannel, err)
	}
	return nil
}

// JobGet returns a job; see db.Store.
func (s *Store) JobGet(ctx context.Context, id string) (db.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, id))
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return db.Job{}, fmt.Errorf("get job %s: %w", id, err)
	}
	return j, err
}

// JobList returns a page of jobs, newest first; see db.Store.
func (s *Store) JobList(ctx context.Context, p db.JobListParams) ([]db.Job, string, error) {
	var (
		where []string
		args  []any
	)
	arg := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+" $"+strconv.Itoa(len(args)))
	}
	if p.State != "" {
		arg("state =", string(p.State))
	}
	if p.Type != "" {
		arg("type =", p.Type)
	}
	if p.Cursor != "" {
		arg("id <", p.Cursor)
	}
	q := `SELECT ` + jobColumns + ` FROM jobs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := db.PageLimit(p.Limit)
	args = append(args, limit+1)
	q += ` ORDER BY id DESC LIMIT $` + strconv.Itoa(len(args))
	jobs, err := queryJobs(ctx, s.pool, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list jobs: %w", err)
	}
	jobs, next := db.Page(append([]db.Job{}, jobs...), limit, func(j db.Job) string { return j.ID })
	return jobs, next, nil
}

// JobCancel cancels a job no worker holds; see db.Store.
func (s *Store) JobCancel(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "cancel", func(tx pgx.Tx, j db.Job, now time.Time) (db.Job, error) {
		noop, err := lifecycle.Cancel(j, func() (*db.Run, error) { return liveRun(ctx, tx, j) })
		if err != nil || noop {
			return j, err
		}
		return scanJob(tx.QueryRow(ctx, `
			UPDATE jobs SET state = 'cancelled', next_run_at = NULL, updated_at = $1
			WHERE id = $2 AND state = $3 RETURNING `+jobColumns,
			now, j.ID, string(j.State)))
	})
}

// JobPause pauses a ready job; see db.Store.
func (s *Store) JobPause(ctx context.Context, id string) (db.Job, error) {
	return s.JobPauseUntil(ctx, db.JobPauseParams{ID: id})
}

// JobResume resumes a paused job; see db.Store.
func (s *Store) JobResume(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "resume", func(tx pgx.Tx, j db.Job, now time.Time) (db.Job, error) {
		noop, err := lifecycle.Resume(j)
		if err != nil || noop {
			return j, err
		}
		return resume(ctx, tx, j, now)
	})
}

// resume moves paused job j, locked by the caller, back to ready and wakes
// the dispatchers if it is due. A one-off job keeps its due time and its
// attempts; a recurring job resumes at its next slot, and the slots it slept
// through are recorded missed (paused).
func resume(ctx context.Context, tx pgx.Tx, j db.Job, now time.Time) (db.Job, error) {
	slot, missed := *j.Slot, lifecycle.Missed{}
	due := *j.NextRunAt
	if j.Recurring() {
		sched, err := schedule.Parse(j.Schedule, j.Timezone)
		if err != nil {
			return db.Job{}, fmt.Errorf("parse stored schedule of job %s: %w", j.ID, err)
		}
		slot, missed = lifecycle.Resumed(sched, slot, now)
		if err := insertMissed(ctx, tx, j.ID, missed, now); err != nil {
			return db.Job{}, err
		}
		due = lifecycle.DueAt(j.ID, slot, time.Duration(j.Jitter))
	}
	out, err := scanJob(tx.QueryRow(ctx, `
		UPDATE jobs SET state = 'ready', slot = $1, next_run_at = $2,
			attempt = CASE WHEN schedule IS NULL THEN attempt ELSE 0 END,
			missed_slots = missed_slots + $3, pause_reason = NULL, pause_until = NULL, updated_at = $4
		WHERE id = $5 AND state = 'paused' RETURNING `+jobColumns,
		slot, due, missed.Total, now, j.ID))
	if err != nil {
		return db.Job{}, err
	}
	return out, notifyIfDue(ctx, tx, out, now)
}

// JobRetry puts a dead job back to ready; see db.Store.
func (s *Store) JobRetry(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "retry", func(tx pgx.Tx, j db.Job, now time.Time) (db.Job, error) {
		if err := lifecycle.Retry(j); err != nil {
			return db.Job{}, err
		}
		out, err := scanJob(tx.QueryRow(ctx, `
			UPDATE jobs SET state = 'ready', next_run_at = $1, attempt = 0, updated_at = $1
			WHERE id = $2 RETURNING `+jobColumns,
			now, j.ID))
		if err != nil {
			return db.Job{}, err
		}
		return out, notifyIfDue(ctx, tx, out, now)
	})
}

// JobRequestCancelRun marks a running job for cooperative cancellation; see
// db.Store.
func (s *Store) JobRequestCancelRun(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "request cancel", func(tx pgx.Tx, j db.Job, now time.Time) (db.Job, error) {
		if err := lifecycle.CancelRun(j); err != nil {
			return db.Job{}, err
		}
		return scanJob(tx.QueryRow(ctx, `
			UPDATE jobs SET cancel_requested = true, updated_at = $1
			WHERE id = $2 AND lease_generation = $3 RETURNING `+jobColumns,
			now, j.ID, j.LeaseGeneration))
	})
}

// JobNextDue returns when the earliest ready job of types is due; see
// db.Store. It reads the jobs_ready partial index only.
func (s *Store) JobNextDue(ctx context.Context, types []string) (time.Time, bool, error) {
	q, args := `SELECT next_run_at FROM jobs WHERE state = 'ready'`, []any{}
	if len(types) > 0 {
		q, args = q+` AND type = ANY($1)`, append(args, types)
	}
	var next time.Time
	err := s.pool.QueryRow(ctx, q+` ORDER BY next_run_at LIMIT 1`, args...).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next due: %w", err)
	}
	return next.UTC(), true, nil
}

// transition reads job id for update inside a transaction and applies fn,
// which returns the job as it leaves it. The row lock holds off claims,
// finishes and reaps of the job until the transaction ends.
func (s *Store) transition(ctx context.Context, id, what string, fn func(tx pgx.Tx, j db.Job, now time.Time) (db.Job, error)) (db.Job, error) {
	var out db.Job
	err := s.withTx(ctx, func(tx pgx.Tx, now time.Time) error {
		j, err := scanJob(tx.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		out, err = fn(tx, j, now)
		return err
	})
	if err != nil {
		var conflict *db.ConflictError
		if errors.Is(err, db.ErrNotFound) || errors.As(err, &conflict) {
			return db.Job{}, err
		}
		return db.Job{}, fmt.Errorf("%s job %s: %w", what, id, err)
	}
	return out, nil
}

// querier is what queryJobs reads from: the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func queryJobs(ctx context.Context, q querier, sql string, args ...any) ([]db.Job, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []db.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}
