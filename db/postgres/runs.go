package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/lifecycle"
	"github.com/sked-dev/sked/schedule"
)

const runColumns = `id, job_id, slot, attempt, generation, worker_id, started_at,
	finished_at, outcome, error, reason, gave_up, output`

func scanRun(row pgx.Row) (db.Run, error) {
	var (
		r                            db.Run
		worker, errText, reason, out *string
	)
	err := row.Scan(&r.ID, &r.JobID, &r.Slot, &r.Attempt, &r.Generation, &worker, &r.StartedAt,
		&r.FinishedAt, &r.Outcome, &errText, &reason, &r.GaveUp, &out)
	if err != nil {
		if err = translate(err); errors.Is(err, db.ErrNotFound) {
			return db.Run{}, err
		}
		return db.Run{}, fmt.Errorf("scan run: %w", err)
	}
	r.WorkerID, r.Error, r.Reason, r.Output = deref(worker), deref(errText), deref(reason), deref(out)
	r.Slot, r.StartedAt, r.FinishedAt = utc(r.Slot), utc(r.StartedAt), utc(r.FinishedAt)
	return r, nil
}

// RunList returns a page of a job's runs, newest first; see db.Store.
func (s *Store) RunList(ctx context.Context, p db.RunListParams) ([]db.Run, int64, error) {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM jobs WHERE id = $1`, p.JobID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, db.ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("list runs of %s: %w", p.JobID, err)
	}
	limit, cursor := db.PageLimit(p.Limit), db.RunsBefore(p.Cursor)
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM runs
		WHERE job_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, p.JobID, cursor, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("list runs of %s: %w", p.JobID, err)
	}
	defer rows.Close()
	runs := []db.Run{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, 0, err
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list runs of %s: %w", p.JobID, err)
	}
	runs, next := db.Page(runs, limit, func(r db.Run) int64 { return r.ID })
	return runs, next, nil
}

// RunClaim leases due jobs in one UPDATE … RETURNING whose candidates are
// picked FOR UPDATE SKIP LOCKED (rows another node is claiming, cancelling or
// finishing are skipped, not waited for), and writes their runs in the same
// transaction; see db.Store.
func (s *Store) RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error) {
	if p.Max <= 0 {
		return nil, nil
	}
	var claims []db.Claim
	err := s.withTx(ctx, func(tx pgx.Tx, now time.Time) error {
		q := `UPDATE jobs SET state = 'running', lease_owner = $1, lease_until = $2,
				lease_generation = lease_generation + 1, attempt = attempt + 1,
				cancel_requested = false, updated_at = $3
			WHERE id IN (SELECT id FROM jobs WHERE state = 'ready' AND next_run_at <= $5`
		args := []any{p.WorkerID, now.Add(cmp.Or(p.Lease, db.DefaultLease)), now, p.Max, now.Add(max(p.Ahead, 0))}
		if len(p.Types) > 0 {
			q, args = q+` AND type = ANY($6)`, append(args, p.Types)
		}
		q += ` ORDER BY next_run_at LIMIT $4 FOR UPDATE SKIP LOCKED) RETURNING ` + jobColumns
		jobs, err := queryJobs(ctx, tx, q, args...)
		if err != nil {
			return err
		}
		sort.Slice(jobs, func(a, b int) bool { return jobs[a].NextRunAt.Before(*jobs[b].NextRunAt) })
		for _, j := range jobs {
			run, ok, err := s.startFiring(ctx, tx, j, now)
			if err != nil {
				return err
			}
			if ok {
				claims = append(claims, db.Claim{Job: run})
			}
		}
		return insertRuns(ctx, tx, claims, p.WorkerID, now)
	})
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	return claims, nil
}

// insertRuns writes the running run of each claim in one statement and sets
// the claims' RunIDs. An operator's extra run (triggered) is recorded at its
// own time (startFiring set the claim's slot to now), marked manual, so that
// the schedule's pending slot still shows as not run. A job claimed ahead
// of its due time starts when it is due (see db.RunClaimParams.Ahead).
func insertRuns(ctx context.Context, tx pgx.Tx, claims []db.Claim, worker string, now time.Time) error {
	if len(claims) == 0 {
		return nil
	}
	var (
		ids         []string
		slots       []*time.Time
		attempts    []int32
		generations []int64
		reasons     []*string
		starts      []time.Time
	)
	for _, c := range claims {
		ids, slots = append(ids, c.Job.ID), append(slots, c.Job.Slot)
		starts = append(starts, lifecycle.StartsAt(c.Job, now))
		attempts, generations = append(attempts, int32(c.Job.Attempt)), append(generations, c.Job.LeaseGeneration)
		var reason *string
		if c.Job.Triggered {
			reason = nullString(db.ReasonManual)
		}
		reasons = append(reasons, reason)
	}
	rows, err := tx.Query(ctx, `INSERT INTO runs (job_id, slot, attempt, generation, worker_id, started_at, outcome, reason)
		SELECT u.job_id, u.slot, u.attempt, u.generation, $6, u.started_at, 'running', u.reason
		FROM unnest($1::text[], $2::timestamptz[], $3::integer[], $4::bigint[], $5::text[], $7::timestamptz[])
			AS u (job_id, slot, attempt, generation, reason, started_at)
		RETURNING id, job_id`, ids, slots, attempts, generations, reasons, worker, starts)
	if err != nil {
		return fmt.Errorf("insert runs: %w", err)
	}
	defer rows.Close()
	runIDs := make(map[string]int64, len(claims))
	for rows.Next() {
		var id int64
		var jobID string
		if err := rows.Scan(&id, &jobID); err != nil {
			return fmt.Errorf("insert runs: %w", err)
		}
		runIDs[jobID] = id
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert runs: %w", err)
	}
	for i := range claims {
		claims[i].RunID = runIDs[claims[i].Job.ID]
	}
	return nil
}

// startFiring applies the misfire policy to a just-claimed recurring job. It
// returns the job as it will run, or ok=false when the policy runs nothing
// now and the claim was undone.
func (s *Store) startFiring(ctx context.Context, tx pgx.Tx, j db.Job, now time.Time) (db.Job, bool, error) {
	if !j.Recurring() {
		return j, true, nil
	}
	if j.Triggered {
		j.Slot = &now // the handler sees the run's own time; the row keeps the schedule's slot
		return j, true, nil
	}
	sched, err := schedule.Parse(j.Schedule, j.Timezone)
	if err != nil {
		return db.Job{}, false, fmt.Errorf("parse stored schedule of job %s: %w", j.ID, err)
	}
	f := lifecycle.Claimed(sched, j.Misfire, *j.Slot, now, s.MisfireGrace, s.CatchUpWindow)
	if f.Slot.Equal(*j.Slot) && f.Run {
		return j, true, nil
	}
	if err := insertMissed(ctx, tx, j.ID, f.Missed, now); err != nil {
		return db.Job{}, false, err
	}
	if !f.Run {
		_, err := tx.Exec(ctx, `UPDATE jobs SET state = 'ready', lease_owner = NULL, lease_until = NULL,
				attempt = 0, slot = $1, next_run_at = $2, missed_slots = missed_slots + $3
			WHERE id = $4 AND lease_generation = $5`,
			f.Slot, lifecycle.DueAt(j.ID, f.Slot, time.Duration(j.Jitter)), f.Missed.Total, j.ID, j.LeaseGeneration)
		if err != nil {
			return db.Job{}, false, fmt.Errorf("skip misfired job %s: %w", j.ID, err)
		}
		return db.Job{}, false, nil
	}
	j, err = scanJob(tx.QueryRow(ctx, `UPDATE jobs SET slot = $1, attempt = 1, missed_slots = missed_slots + $2
		WHERE id = $3 AND lease_generation = $4 RETURNING `+jobColumns,
		f.Slot, f.Missed.Total, j.ID, j.LeaseGeneration))
	if err != nil {
		return db.Job{}, false, fmt.Errorf("move misfired job %s to slot %s: %w", j.ID, f.Slot, err)
	}
	return j, true, nil
}

// RunHeartbeat extends a live lease in one fenced statement; see db.Store.
func (s *Store) RunHeartbeat(ctx context.Context, p db.RunHeartbeatParams) (db.Heartbeat, error) {
	var hb db.Heartbeat
	err := s.pool.QueryRow(ctx, `UPDATE jobs SET lease_until = coalesce($1::timestamptz, now()) + $2::bigint * interval '1 microsecond'
		WHERE id = $3 AND lease_generation = $4 AND state = 'running' AND lease_until >= coalesce($1::timestamptz, now())
		RETURNING lease_until, cancel_requested`,
		s.nowArg(), cmp.Or(p.Lease, db.DefaultLease).Microseconds(), p.JobID, p.Generation).Scan(&hb.LeaseUntil, &hb.CancelRequested)
	if errors.Is(err, pgx.ErrNoRows) {
		return db.Heartbeat{}, db.ErrStale
	}
	if err != nil {
		return db.Heartbeat{}, fmt.Errorf("heartbeat %s/%d: %w", p.JobID, p.Generation, err)
	}
	hb.LeaseUntil = hb.LeaseUntil.UTC()
	return hb, nil
}

// RunFinish records a run's end under its lease; see db.Store. The job row is
// locked first: a reaper on another node that got there first has moved the
// generation on (ErrStale); one that comes later skips the locked row.
func (s *Store) RunFinish(ctx context.Context, p db.RunFinishParams) (db.Job, error) {
	var out db.Job
	err := s.withTx(ctx, func(tx pgx.Tx, now time.Time) error {
		j, err := scanJob(tx.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs
			WHERE id = $1 AND lease_generation = $2 AND state = 'running' AND lease_until >= $3
			FOR UPDATE`,
			p.JobID, p.Generation, now))
		if errors.Is(err, db.ErrNotFound) {
			return db.ErrStale
		}
		if err != nil {
			return err
		}
		out, err = s.finish(ctx, tx, j, p, now)
		return err
	})
	if errors.Is(err, db.ErrStale) {
		return db.Job{}, err
	}
	if err != nil {
		return db.Job{}, fmt.Errorf("finish run %s/%d: %w", p.JobID, p.Generation, err)
	}
	return out, nil
}

// RunReapExpired returns expired leases; see db.Store. It is safe on every
// node at once: the expired rows are taken FOR UPDATE SKIP LOCKED, so each is
// reaped by one node, and every write is fenced by the generation read.
func (s *Store) RunReapExpired(ctx context.Context) (int, error) {
	n := 0
	err := s.withTx(ctx, func(tx pgx.Tx, now time.Time) error {
		jobs, err := queryJobs(ctx, tx, `SELECT `+jobColumns+` FROM jobs
			WHERE state = 'running' AND lease_until < $1 ORDER BY lease_until LIMIT 500
			FOR UPDATE SKIP LOCKED`, now)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			_, err := s.finish(ctx, tx, j, db.RunFinishParams{
				JobID: j.ID, Generation: j.LeaseGeneration, Outcome: db.OutcomeLeaseExpired, Retryable: true,
				Error: fmt.Sprintf("lease expired at %s: worker %s stopped heartbeating",
					j.LeaseUntil.Format(time.RFC3339Nano), j.LeaseOwner),
			}, now)
			if err != nil {
				return err
			}
		}
		n = len(jobs)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reap expired leases: %w", err)
	}
	return n, nil
}

// finish closes the run of j's current lease and moves j on, inside tx, with
// j's row locked. Both writes are fenced by the lease generation.
func (s *Store) finish(ctx context.Context, tx pgx.Tx, j db.Job, p db.RunFinishParams, now time.Time) (db.Job, error) {
	claimedAt := now
	var started *time.Time
	err := tx.QueryRow(ctx, `SELECT started_at FROM runs WHERE job_id = $1 AND generation = $2 AND outcome = 'running'`,
		j.ID, j.LeaseGeneration).Scan(&started)
	switch {
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return db.Job{}, fmt.Errorf("read run: %w", err)
	case started != nil:
		claimedAt = started.UTC()
	}
	var sched *schedule.Schedule
	if j.Recurring() {
		if sched, err = schedule.Parse(j.Schedule, j.Timezone); err != nil {
			return db.Job{}, fmt.Errorf("parse stored schedule of job %s: %w", j.ID, err)
		}
	}
	r := lifecycle.Finished(&j, sched, p, claimedAt, now, s.RandFunc)
	if err := insertMissed(ctx, tx, j.ID, r.Missed, now); err != nil {
		return db.Job{}, err
	}
	var succeededAt *time.Time
	if p.Outcome == db.OutcomeSucceeded {
		succeededAt = &now
	}
	out, err := scanJob(tx.QueryRow(ctx, `UPDATE jobs SET state = $1, slot = $2, next_run_at = $3, attempt = $4,
			last_error = $5, lease_owner = NULL, lease_until = NULL, cancel_requested = false,
			missed_slots = missed_slots + $6, triggered = $7, last_success_at = coalesce($8, last_success_at),
			updated_at = $9
		WHERE id = $10 AND lease_generation = $11 AND state = 'running' RETURNING `+jobColumns,
		string(r.State), nullTime(r.Slot), nullTime(r.NextRunAt), r.Attempt, nullString(text(r.LastError)),
		r.Missed.Total, r.Triggered, succeededAt, now, j.ID, j.LeaseGeneration))
	if err != nil {
		return db.Job{}, fmt.Errorf("update job: %w", err)
	}
	_, err = tx.Exec(ctx, `UPDATE runs SET outcome = $1, error = $2, output = $3, finished_at = $4, gave_up = $5
		WHERE job_id = $6 AND generation = $7 AND outcome = 'running'`,
		string(p.Outcome), nullString(text(p.Error)), nullString(text(tail(p.Output))), now, r.GaveUp, j.ID, j.LeaseGeneration)
	if err != nil {
		return db.Job{}, fmt.Errorf("close run: %w", err)
	}
	return out, notifyIfDue(ctx, tx, out, now)
}

// liveRun is the run of j's current lease.
func liveRun(ctx context.Context, tx pgx.Tx, j db.Job) (*db.Run, error) {
	r, err := scanRun(tx.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE job_id = $1 AND generation = $2`,
		j.ID, j.LeaseGeneration))
	if err != nil {
		return nil, fmt.Errorf("read live run of %s: %w", j.ID, err)
	}
	return &r, nil
}

// insertMissed writes one missed run per listed slot, in one statement.
func insertMissed(ctx context.Context, tx pgx.Tx, jobID string, m lifecycle.Missed, now time.Time) error {
	if len(m.Slots) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO runs (job_id, slot, attempt, generation, finished_at, outcome, reason)
		SELECT $1, slot, 0, 0, $3, 'missed', $4 FROM unnest($2::timestamptz[]) AS slot`,
		jobID, m.Slots, now, m.Reason)
	if err != nil {
		return fmt.Errorf("insert missed runs of %s: %w", jobID, err)
	}
	return nil
}

// text makes s storable as PostgreSQL text, which refuses NUL bytes and
// invalid UTF-8 (a command's output can hold both, and tail may cut a rune).
func text(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
}

// tail keeps the last db.OutputTailBytes of s.
func tail(s string) string {
	if len(s) > db.OutputTailBytes {
		return s[len(s)-db.OutputTailBytes:]
	}
	return s
}
