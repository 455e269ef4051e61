package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/lifecycle"
	"github.com/sked-dev/sked/schedule"
)

var _ db.Controller = (*Store)(nil)

// JobPauseUntil pauses a ready job; see db.Controller.
func (s *Store) JobPauseUntil(ctx context.Context, p db.JobPauseParams) (db.Job, error) {
	return s.transition(ctx, p.ID, "pause", func(tx *sql.Tx, j db.Job, now time.Time) (db.Job, error) {
		noop, err := lifecycle.Pause(j, p)
		if err != nil || noop {
			return j, err
		}
		return scanJob(tx.QueryRowContext(ctx, `
			UPDATE jobs SET state = 'paused', pause_reason = ?, pause_until = ?, triggered = 0, updated_at = ?
			WHERE id = ? AND state IN ('ready', 'paused') RETURNING `+jobColumns,
			nullString(p.Reason), nullTime(p.Until), fmtTime(now), j.ID))
	})
}

// JobTrigger makes a ready job run once now; see db.Controller.
func (s *Store) JobTrigger(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "trigger", func(tx *sql.Tx, j db.Job, now time.Time) (db.Job, error) {
		if err := lifecycle.Trigger(j, now); err != nil {
			return db.Job{}, err
		}
		// A one-off job simply becomes due; a recurring one gets an extra
		// run and keeps its pending slot.
		return scanJob(tx.QueryRowContext(ctx, `
			UPDATE jobs SET next_run_at = ?, triggered = (schedule IS NOT NULL), updated_at = ?
			WHERE id = ? AND state = 'ready' RETURNING `+jobColumns,
			fmtTime(now), fmtTime(now), j.ID))
	})
}

// JobSkipNext skips the pending slot of a recurring job; see db.Controller.
func (s *Store) JobSkipNext(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "skip", func(tx *sql.Tx, j db.Job, now time.Time) (db.Job, error) {
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
		state, due := db.StateReady, any(fmtTime(lifecycle.DueAt(j.ID, next, time.Duration(j.Jitter))))
		if next.IsZero() {
			state, due = db.StateDone, nil
		}
		return scanJob(tx.QueryRowContext(ctx, `
			UPDATE jobs SET state = ?, slot = ?, next_run_at = ?, attempt = 0, missed_slots = missed_slots + 1, updated_at = ?
			WHERE id = ? AND state = 'ready' RETURNING `+jobColumns,
			state, nullTime(next), due, fmtTime(now), j.ID))
	})
}

// JobBackfill runs the slots of a time range once each; see db.Controller.
// Slots that already have a succeeded run of the schedule are not run again.
func (s *Store) JobBackfill(ctx context.Context, p db.JobBackfillParams) (db.Backfill, error) {
	var out db.Backfill
	if err := lifecycle.BackfillRange(p); err != nil {
		return out, err
	}
	_, err := s.transition(ctx, p.ID, "backfill", func(tx *sql.Tx, j db.Job, now time.Time) (db.Job, error) {
		slots, total, err := lifecycle.Backfill(j, p)
		if err != nil {
			return db.Job{}, err
		}
		out.Slots = total
		for _, slot := range slots {
			var ran int
			err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE job_id = ? AND slot = ? AND outcome = 'succeeded'`,
				j.ID, fmtTime(slot)).Scan(&ran)
			if err != nil {
				return db.Job{}, fmt.Errorf("read runs of slot %s: %w", slot, err)
			}
			if ran > 0 {
				continue
			}
			key := "backfill:" + j.ID + ":" + slot.UTC().Format(time.RFC3339)
			id := ulid.MustNew(ulid.Timestamp(now), ulid.DefaultEntropy()).String()
			res, err := tx.ExecContext(ctx, `
				INSERT INTO jobs (id, type, payload, timezone, state, next_run_at, slot, max_attempts,
					idempotency_key, timeout_ms, backoff_ms, parent_id, created_at, updated_at)
				SELECT ?, type, payload, timezone, 'ready', ?, ?, max_attempts, ?, timeout_ms, backoff_ms, id, ?, ?
				FROM jobs WHERE id = ?
				ON CONFLICT (idempotency_key) DO NOTHING`,
				id, fmtTime(now), fmtTime(slot), key, fmtTime(now), fmtTime(now), j.ID)
			if err != nil {
				return db.Job{}, fmt.Errorf("insert backfill job for %s: %w", slot, err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				out.Created++
			} else if err := tx.QueryRowContext(ctx, `SELECT id FROM jobs WHERE idempotency_key = ?`, key).Scan(&id); err != nil {
				return db.Job{}, fmt.Errorf("read backfill job for %s: %w", slot, err)
			}
			out.JobIDs = append(out.JobIDs, id)
		}
		return j, nil
	})
	return out, err
}

// JobResumeDue resumes paused jobs whose pause has run out; see
// db.Controller.
func (s *Store) JobResumeDue(ctx context.Context) (int, error) {
	n := 0
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		now := s.Now()
		jobs, err := scanJobs(tx.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs INDEXED BY jobs_pause_until
			WHERE state = 'paused' AND pause_until IS NOT NULL AND pause_until <= ? ORDER BY pause_until LIMIT 500`, fmtTime(now)))
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
func (s *Store) JobQuietSweep(ctx context.Context) ([]db.QuietChange, error) {
	var changes []db.QuietChange
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		now := s.Now()
		jobs, err := scanJobs(tx.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs INDEXED BY jobs_watched
			WHERE expect_success_ms > 0 AND schedule IS NOT NULL AND state IN ('ready', 'running')`))
		if err != nil {
			return err
		}
		for _, j := range jobs {
			quiet, changed := lifecycle.Quiet(j, now)
			if !changed {
				continue
			}
			var mark any
			if quiet {
				mark = fmtTime(now)
			}
			marked, err := scanJob(tx.QueryRowContext(ctx, `UPDATE jobs SET quiet_since = ?, updated_at = ? WHERE id = ? RETURNING `+jobColumns,
				mark, fmtTime(now), j.ID))
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
	jobs, err := scanJobs(s.read.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs INDEXED BY jobs_state_id
		WHERE state = 'dead' AND updated_at >= ? ORDER BY updated_at LIMIT ?`, fmtTime(since), cmpOr(limit, 100)))
	if err != nil {
		return nil, fmt.Errorf("list dead jobs: %w", err)
	}
	return jobs, nil
}
