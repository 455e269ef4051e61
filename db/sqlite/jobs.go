package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/failpoint"
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

type scanner interface{ Scan(dest ...any) error }

func scanJob(row scanner) (db.Job, error) {
	var (
		j                              db.Job
		payload                        string
		sched, owner, key, lastErr     sql.NullString
		next, slot, until              sql.NullString
		created, updated               string
		timeoutMS, backoffMS, jitterMS int64
		cancelReq, triggered           int
		pauseReason, parent            sql.NullString
		pauseUntil, lastOK, quiet      sql.NullString
		expectMS                       int64
	)
	err := row.Scan(&j.ID, &j.Type, &payload, &sched, &j.Timezone, &j.State, &next, &slot,
		&j.Attempt, &j.MaxAttempts, &owner, &until, &j.LeaseGeneration,
		&key, &j.Overlap, &j.Misfire, &timeoutMS, &backoffMS, &jitterMS,
		&cancelReq, &j.MissedSlots, &lastErr, &created, &updated,
		&pauseReason, &pauseUntil, &expectMS, &lastOK, &quiet,
		&triggered, &parent)
	if errors.Is(err, sql.ErrNoRows) {
		return db.Job{}, db.ErrNotFound
	}
	if err != nil {
		return db.Job{}, fmt.Errorf("scan job: %w", err)
	}
	j.Payload = []byte(payload)
	j.Schedule, j.LeaseOwner, j.IdempotencyKey, j.LastError = sched.String, owner.String, key.String, lastErr.String
	j.Timeout = db.Duration(time.Duration(timeoutMS) * time.Millisecond)
	j.Backoff = db.Duration(time.Duration(backoffMS) * time.Millisecond)
	j.Jitter = db.Duration(time.Duration(jitterMS) * time.Millisecond)
	j.CancelRequested = cancelReq != 0
	j.PauseReason, j.ParentID, j.Triggered = pauseReason.String, parent.String, triggered != 0
	j.ExpectSuccessWithin = db.Duration(time.Duration(expectMS) * time.Millisecond)
	if !j.Recurring() {
		j.Overlap, j.Misfire = "", "" // recurring policies; stored defaults mean nothing here
	}
	for _, f := range []struct {
		dst **time.Time
		src sql.NullString
	}{{&j.NextRunAt, next}, {&j.Slot, slot}, {&j.LeaseUntil, until},
		{&j.PauseUntil, pauseUntil}, {&j.LastSuccessAt, lastOK}, {&j.QuietSince, quiet}} {
		if *f.dst, err = parseTime(f.src); err != nil {
			return db.Job{}, err
		}
	}
	for _, f := range []struct {
		dst *time.Time
		src string
	}{{&j.CreatedAt, created}, {&j.UpdatedAt, updated}} {
		t, err := parseTime(sql.NullString{String: f.src, Valid: true})
		if err != nil {
			return db.Job{}, err
		}
		*f.dst = *t
	}
	return j, nil
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
	VALUES (?, ?, ?, ?, ?, 'ready', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (idempotency_key) DO NOTHING`

// createJobs validates every element of ps, then inserts them all in one
// transaction. A taken idempotency key yields the existing job and
// created=false. In a batch, a validation error names its element.
func (s *Store) createJobs(ctx context.Context, ps []db.JobCreateParams, batch bool) ([]db.Job, []bool, error) {
	now := s.Now()
	jobs, created := make([]db.Job, len(ps)), make([]bool, len(ps))
	for i, p := range ps {
		j, err := newJob(p, now)
		var ve *db.ValidationError
		if batch && errors.As(err, &ve) {
			err = &db.ValidationError{Field: fmt.Sprintf("jobs[%d].%s", i, ve.Field), Msg: ve.Msg}
		}
		if err != nil {
			return nil, nil, err
		}
		jobs[i] = j
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		ins, get := tx.StmtContext(ctx, s.stmts.insertJob), tx.StmtContext(ctx, s.stmts.jobByKey)
		for i := range jobs {
			if i > 0 && i == len(jobs)/2 {
				failpoint.Hit(failpoint.MidBatchInsert)
			}
			res, err := ins.ExecContext(ctx, insertArgs(jobs[i])...)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				created[i] = true
				continue
			}
			// The idempotency key is taken: the first job stands.
			if jobs[i], err = scanJob(get.QueryRowContext(ctx, ps[i].IdempotencyKey)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create jobs: %w", err)
	}
	return jobs, created, nil
}

// newJob checks p's schedule and returns the job it creates at now, as
// the store will hold it (times to the millisecond, defaults filled in), so
// that creating needs no read back.
func newJob(p db.JobCreateParams, now time.Time) (db.Job, error) {
	now = *timePtr(now)
	id := ulid.MustNew(ulid.Timestamp(now), ulid.DefaultEntropy()).String()
	slot, due, err := lifecycle.FirstSlot(p, id, now)
	if err != nil {
		return db.Job{}, err
	}
	ms := func(d time.Duration) db.Duration { return db.Duration(d.Truncate(time.Millisecond)) }
	j := db.Job{
		ID: id, Type: p.Type, Payload: orEmptyObject(p.Payload), Schedule: p.Schedule,
		Timezone: cmpOr(p.Timezone, "UTC"), State: db.StateReady,
		NextRunAt: timePtr(due), Slot: timePtr(slot),
		MaxAttempts: cmpOr(p.MaxAttempts, db.DefaultMaxAttempts), IdempotencyKey: p.IdempotencyKey,
		Timeout: ms(cmpOr(p.Timeout, db.DefaultTimeout)), Backoff: ms(cmpOr(p.Backoff, db.DefaultBackoff)),
		Jitter: ms(p.Jitter), ExpectSuccessWithin: ms(p.ExpectSuccessWithin),
		CreatedAt: now, UpdatedAt: now,
	}
	if j.Recurring() {
		j.Overlap, j.Misfire = cmpOr(p.Overlap, db.OverlapSkip), cmpOr(p.Misfire, db.MisfireRunOnce)
	}
	return j, nil
}

// insertArgs are insertJobSQL's arguments for j.
func insertArgs(j db.Job) []any {
	return []any{j.ID, j.Type, string(j.Payload), nullString(j.Schedule), j.Timezone,
		fmtTime(*j.NextRunAt), fmtTime(*j.Slot), j.MaxAttempts, nullString(j.IdempotencyKey),
		cmpOr(j.Overlap, db.OverlapSkip), cmpOr(j.Misfire, db.MisfireRunOnce),
		time.Duration(j.Timeout).Milliseconds(), time.Duration(j.Backoff).Milliseconds(),
		time.Duration(j.Jitter).Milliseconds(), time.Duration(j.ExpectSuccessWithin).Milliseconds(),
		fmtTime(j.CreatedAt), fmtTime(j.UpdatedAt)}
}

func orEmptyObject(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// JobGet returns a job; see db.Store.
func (s *Store) JobGet(ctx context.Context, id string) (db.Job, error) {
	j, err := scanJob(s.read.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
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
	if p.State != "" {
		where, args = append(where, "state = ?"), append(args, p.State)
	}
	if p.Type != "" {
		where, args = append(where, "type = ?"), append(args, p.Type)
	}
	if p.Cursor != "" {
		where, args = append(where, "id < ?"), append(args, p.Cursor)
	}
	q := `SELECT ` + jobColumns + ` FROM jobs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := db.PageLimit(p.Limit)
	q += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit+1)
	jobs, err := scanJobs(s.read.QueryContext(ctx, q, args...))
	if err != nil {
		return nil, "", fmt.Errorf("list jobs: %w", err)
	}
	jobs, next := db.Page(append([]db.Job{}, jobs...), limit, func(j db.Job) string { return j.ID })
	return jobs, next, nil
}

// JobCancel cancels a job no worker holds; see db.Store.
func (s *Store) JobCancel(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "cancel", func(tx *sql.Tx, j db.Job, now time.Time) (db.Job, error) {
		noop, err := lifecycle.Cancel(j, func() (*db.Run, error) { return liveRun(ctx, tx, j) })
		if err != nil || noop {
			return j, err
		}
		return updateJobState(ctx, tx, j, db.StateCancelled, nil, now)
	})
}

// JobPause pauses a ready job; see db.Store.
func (s *Store) JobPause(ctx context.Context, id string) (db.Job, error) {
	return s.JobPauseUntil(ctx, db.JobPauseParams{ID: id})
}

// JobResume resumes a paused job; see db.Store.
func (s *Store) JobResume(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "resume", func(tx *sql.Tx, j db.Job, now time.Time) (db.Job, error) {
		noop, err := lifecycle.Resume(j)
		if err != nil || noop {
			return j, err
		}
		return resume(ctx, tx, j, now)
	})
}

// resume moves paused job j back to ready. A recurring job resumes at its
// next slot; the slots it slept through are recorded missed (paused).
func resume(ctx context.Context, tx *sql.Tx, j db.Job, now time.Time) (db.Job, error) {
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
	return scanJob(tx.QueryRowContext(ctx, `
		UPDATE jobs SET state = 'ready', slot = ?, next_run_at = ?,
			attempt = CASE WHEN schedule IS NULL THEN attempt ELSE 0 END,
			missed_slots = missed_slots + ?, pause_reason = NULL, pause_until = NULL, updated_at = ?
		WHERE id = ? AND state = 'paused' RETURNING `+jobColumns,
		fmtTime(slot), fmtTime(due), missed.Total, fmtTime(now), j.ID))
}

// JobRetry puts a dead job back to ready; see db.Store.
func (s *Store) JobRetry(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "retry", func(tx *sql.Tx, j db.Job, now time.Time) (db.Job, error) {
		if err := lifecycle.Retry(j); err != nil {
			return db.Job{}, err
		}
		return scanJob(tx.QueryRowContext(ctx, `
			UPDATE jobs SET state = 'ready', next_run_at = ?, attempt = 0, updated_at = ?
			WHERE id = ? RETURNING `+jobColumns,
			fmtTime(now), fmtTime(now), j.ID))
	})
}

// JobRequestCancelRun marks a running job for cooperative cancellation; see
// db.Store.
func (s *Store) JobRequestCancelRun(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "request cancel", func(tx *sql.Tx, j db.Job, now time.Time) (db.Job, error) {
		if err := lifecycle.CancelRun(j); err != nil {
			return db.Job{}, err
		}
		return scanJob(tx.QueryRowContext(ctx, `
			UPDATE jobs SET cancel_requested = 1, updated_at = ?
			WHERE id = ? AND lease_generation = ? RETURNING `+jobColumns,
			fmtTime(now), j.ID, j.LeaseGeneration))
	})
}

// JobNextDue returns when the earliest ready job of types is due; see
// db.Store. It reads the jobs_ready index only.
func (s *Store) JobNextDue(ctx context.Context, types []string) (time.Time, bool, error) {
	q, args := `SELECT next_run_at FROM jobs INDEXED BY jobs_ready WHERE state = 'ready'`, []any{}
	if len(types) > 0 {
		q += ` AND type IN (` + placeholders(len(types)) + `)`
		for _, t := range types {
			args = append(args, t)
		}
	}
	var next sql.NullString
	err := s.read.QueryRowContext(ctx, q+` ORDER BY next_run_at LIMIT 1`, args...).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next due: %w", err)
	}
	t, err := parseTime(next)
	if err != nil || t == nil {
		return time.Time{}, false, err
	}
	return *t, true, nil
}

// transition reads job id inside a write transaction and applies fn, which
// returns the job as it leaves it.
func (s *Store) transition(ctx context.Context, id, what string, fn func(tx *sql.Tx, j db.Job, now time.Time) (db.Job, error)) (db.Job, error) {
	var out db.Job
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		j, err := scanJob(tx.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
		if err != nil {
			return err
		}
		out, err = fn(tx, j, s.Now())
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

// updateJobState moves a job no worker holds to state. The WHERE names the
// state read in the same transaction.
func updateJobState(ctx context.Context, tx *sql.Tx, j db.Job, state db.JobState, next *time.Time, now time.Time) (db.Job, error) {
	var nextArg any
	if next != nil && state != db.StateCancelled {
		nextArg = fmtTime(*next)
	}
	return scanJob(tx.QueryRowContext(ctx, `
		UPDATE jobs SET state = ?, next_run_at = ?, updated_at = ?
		WHERE id = ? AND state = ? RETURNING `+jobColumns,
		state, nextArg, fmtTime(now), j.ID, j.State))
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
