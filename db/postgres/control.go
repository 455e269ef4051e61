package postgres

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/lifecycle"
	"github.com/sked-dev/sked/schedule"
)

var _ db.Controller = (*Store)(nil)

// JobPauseUntil pauses a ready job; see db.Controller.
func (s *Store) JobPauseUntil(ctx context.Context, p db.JobPauseParams) (db.Job, error) {
	return s.transition(ctx, p.ID, "pause", func(tx pgx.Tx, j db.Job, now time.Time) (db.Job, error) {
		noop, err := lifecycle.Pause(j, p)
		if err != nil || noop {
			return j, err
		}
		return scanJob(tx.QueryRow(ctx, `
			UPDATE jobs SET state = 'paused', pause_reason = $1, pause_until = $2, triggered = false, updated_at = $3
			WHERE id = $4 AND state IN ('ready', 'paused') RETURNING `+jobColumns,
			nullString(p.Reason), nullTime(p.Until), now, j.ID))
	})
}

// JobTrigger makes a ready job run once now; see db.Controller.
func (s *Store) JobTrigger(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "trigger", func(tx pgx.Tx, j db.Job, now time.Time) (db.Job, error) {
		if err := lifecycle.Trigger(j, now); err != nil {
			return db.Job{}, err
		}
		// A one-off job simply becomes due; a recurring one gets an extra
		// run and keeps its pending slot.
		out, err := scanJob(tx.QueryRow(ctx, `
			UPDATE jobs SET next_run_at = $1, triggered = (schedule IS NOT NULL), updated_at = $1
			WHERE id = $2 AND state = 'ready' RETURNING `+jobColumns,
			now, j.ID))
		if err != nil {
			return db.Job{}, err
		}
		return out, notifyIfDue(ctx, tx, out, now)
	})
}

// JobSkipNext skips the pending slot of a recurring job; see db.Controller.
func (s *Store) JobSkipNext(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "skip", func(tx pgx.Tx, j db.Job, now time.Time) (db.Job, error) {
		if err := lifecycle.SkipNext(j); err != nil {
			return db.Job{}, err
		}
		sched, err := schedule.Parse(j.Schedule, j.Timezone)
		if err != nil {
			return db.Job{}, fmt.Errorf("parse stored schedule of job %s: %w", j.ID, err)
		}
		next := sched.Next(*j.Slot)
		if err := insertMissed(ctx, tx, j.ID, lifecycle.Missed{Slots: []time.Time{*j.Slot}, Total: 1, Reason: db.MissedSkipped}, now); err != nil {
			return db.Job{}, err
		}
		state, due := db.StateReady, nullTime(lifecycle.DueAt(j.ID, next, time.Duration(j.Jitter)))
		if next.IsZero() {
			state, due = db.StateDone, nil
		}
		return scanJob(tx.QueryRow(ctx, `
			UPDATE jobs SET state = $1, slot = $2, next_run_at = $3, attempt = 0, missed_slots = missed_slots + 1, updated_at = $4
			WHERE id = $5 AND state = 'ready' RETURNING `+jobColumns,
			string(state), nullTime(next), due, now, j.ID))
	})
}

// JobBackfill runs the slots of a time range once each; see db.Controller.
// Slots that already have a succeeded run of the schedule are not run again.
// The schedule's row is locked, so backfills of one schedule from several
// nodes take turns, and the idempotency keys make a repeat create nothing.
func (s *Store) JobBackfill(ctx context.Context, p db.JobBackfillParams) (db.Backfill, error) {
	var out db.Backfill
	if err := lifecycle.BackfillRange(p); err != nil {
		return out, err
	}
	_, err := s.transition(ctx, p.ID, "backfill", func(tx pgx.Tx, j db.Job, now time.Time) (db.Job, error) {
		slots, total, err := lifecycle.Backfill(j, p)
		if err != nil {
			return db.Job{}, err
		}
		out.Slots = total
		out.JobIDs, out.Created, err = backfill(ctx, tx, j, slots, now)
		if err != nil {
			return db.Job{}, err
		}
		if out.Created > 0 {
			return j, notify(ctx, tx) // the backfill jobs are due now
		}
		return j, nil
	})
	return out, err
}

// backfill creates, inside tx, one one-off job due now per slot of j that
// has no succeeded run, keyed "backfill:<id>:<slot>". It returns the jobs
// of those slots in slot order, created now or by an earlier backfill, and
// how many it created.
func backfill(ctx context.Context, tx pgx.Tx, j db.Job, slots []time.Time, now time.Time) ([]string, int, error) {
	rows, err := tx.Query(ctx, `SELECT DISTINCT slot FROM runs WHERE job_id = $1 AND outcome = 'succeeded' AND slot = ANY($2)`, j.ID, slots)
	if err != nil {
		return nil, 0, fmt.Errorf("read succeeded slots: %w", err)
	}
	ran, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (time.Time, error) {
		var t time.Time
		err := r.Scan(&t)
		return t.UTC(), err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read succeeded slots: %w", err)
	}
	var ids, keys []string
	var todo []time.Time
	for _, slot := range slots {
		if containsTime(ran, slot) {
			continue
		}
		todo = append(todo, slot)
		ids = append(ids, ulid.MustNew(ulid.Timestamp(now), ulid.DefaultEntropy()).String())
		keys = append(keys, "backfill:"+j.ID+":"+slot.UTC().Format(time.RFC3339))
	}
	if len(todo) == 0 {
		return nil, 0, nil
	}
	tag, err := tx.Exec(ctx, `
		INSERT INTO jobs (id, type, payload, timezone, state, next_run_at, slot, max_attempts,
			idempotency_key, timeout_ms, backoff_ms, parent_id, created_at, updated_at)
		SELECT u.id, j.type, j.payload, j.timezone, 'ready', $4, u.slot, j.max_attempts,
			u.key, j.timeout_ms, j.backoff_ms, j.id, $4, $4
		FROM unnest($1::text[], $2::timestamptz[], $3::text[]) WITH ORDINALITY AS u (id, slot, key, n)
			CROSS JOIN jobs j
		WHERE j.id = $5
		ORDER BY u.n
		ON CONFLICT (idempotency_key) DO NOTHING`,
		ids, todo, keys, now, j.ID)
	if err != nil {
		return nil, 0, fmt.Errorf("insert backfill jobs: %w", err)
	}
	rows, err = tx.Query(ctx, `SELECT j.id FROM unnest($1::text[]) WITH ORDINALITY AS u (key, n)
		JOIN jobs j ON j.idempotency_key = u.key ORDER BY u.n`, keys)
	if err != nil {
		return nil, 0, fmt.Errorf("read backfill jobs: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, 0, fmt.Errorf("read backfill jobs: %w", err)
	}
	return out, int(tag.RowsAffected()), nil
}

func containsTime(ts []time.Time, t time.Time) bool {
	for _, u := range ts {
		if u.Equal(t) {
			return true
		}
	}
	return false
}

// JobResumeDue resumes paused jobs whose pause has run out; see
// db.Controller. The rows are taken FOR UPDATE SKIP LOCKED, so every node
// can run it at once and each job is resumed by one of them.
func (s *Store) JobResumeDue(ctx context.Context) (int, error) {
	n := 0
	err := s.withTx(ctx, func(tx pgx.Tx, now time.Time) error {
		jobs, err := queryJobs(ctx, tx, `SELECT `+jobColumns+` FROM jobs
			WHERE state = 'paused' AND pause_until IS NOT NULL AND pause_until <= $1
			ORDER BY pause_until LIMIT 500 FOR UPDATE SKIP LOCKED`, now)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if _, err := resume(ctx, tx, j, now); err != nil {
				return err
			}
		}
		n = len(jobs)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("resume paused jobs: %w", err)
	}
	return n, nil
}

// JobQuietSweep raises and clears dead-man's switches; see db.Controller.
// The watched rows are taken FOR UPDATE SKIP LOCKED, so sweeps on several
// nodes at once report each change once; a row another transaction holds
// (a run finishing) is looked at by the next sweep.
func (s *Store) JobQuietSweep(ctx context.Context) ([]db.QuietChange, error) {
	var changes []db.QuietChange
	err := s.withTx(ctx, func(tx pgx.Tx, now time.Time) error {
		jobs, err := queryJobs(ctx, tx, `SELECT `+jobColumns+` FROM jobs
			WHERE expect_success_ms > 0 AND schedule IS NOT NULL AND state IN ('ready', 'running')
			FOR UPDATE SKIP LOCKED`)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			quiet, changed := lifecycle.Quiet(j, now)
			if !changed {
				continue
			}
			var mark *time.Time
			if quiet {
				mark = &now
			}
			marked, err := scanJob(tx.QueryRow(ctx, `UPDATE jobs SET quiet_since = $1, updated_at = $2 WHERE id = $3 RETURNING `+jobColumns,
				mark, now, j.ID))
			if err != nil {
				return fmt.Errorf("mark job %s: %w", j.ID, err)
			}
			changes = append(changes, db.QuietChange{Job: marked, Quiet: quiet})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check quiet schedules: %w", err)
	}
	return changes, nil
}

// JobDeadSince lists jobs that went dead at or after since; see
// db.Controller.
func (s *Store) JobDeadSince(ctx context.Context, since time.Time, limit int) ([]db.Job, error) {
	jobs, err := queryJobs(ctx, s.pool, `SELECT `+jobColumns+` FROM jobs
		WHERE state = 'dead' AND updated_at >= $1 ORDER BY updated_at LIMIT $2`, since, cmp.Or(limit, 100))
	if err != nil {
		return nil, fmt.Errorf("list dead jobs: %w", err)
	}
	return jobs, nil
}
