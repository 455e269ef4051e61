package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/failpoint"
	"github.com/sked-dev/sked/lifecycle"
	"github.com/sked-dev/sked/schedule"
)

const runColumns = `id, job_id, slot, attempt, generation, worker_id, started_at,
	finished_at, outcome, error, reason, gave_up, output`

func scanRun(row scanner) (db.Run, error) {
	var (
		r                               db.Run
		slot, worker, started, finished sql.NullString
		errText, reason, output         sql.NullString
		gaveUp                          int
	)
	err := row.Scan(&r.ID, &r.JobID, &slot, &r.Attempt, &r.Generation, &worker, &started,
		&finished, &r.Outcome, &errText, &reason, &gaveUp, &output)
	if errors.Is(err, sql.ErrNoRows) {
		return db.Run{}, db.ErrNotFound
	}
	if err != nil {
		return db.Run{}, fmt.Errorf("scan run: %w", err)
	}
	r.WorkerID, r.Error, r.Reason, r.Output, r.GaveUp = worker.String, errText.String, reason.String, output.String, gaveUp != 0
	for _, f := range []struct {
		dst **time.Time
		src sql.NullString
	}{{&r.Slot, slot}, {&r.StartedAt, started}, {&r.FinishedAt, finished}} {
		if *f.dst, err = parseTime(f.src); err != nil {
			return db.Run{}, err
		}
	}
	return r, nil
}

// RunList returns a page of a job's runs, newest first; see db.Store.
func (s *Store) RunList(ctx context.Context, p db.RunListParams) ([]db.Run, int64, error) {
	var one int
	err := s.read.QueryRowContext(ctx, `SELECT 1 FROM jobs WHERE id = ?`, p.JobID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, db.ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("list runs of %s: %w", p.JobID, err)
	}
	limit, cursor := db.PageLimit(p.Limit), db.RunsBefore(p.Cursor)
	rows, err := s.read.QueryContext(ctx, `SELECT `+runColumns+` FROM runs
		WHERE job_id = ? AND id < ? ORDER BY id DESC LIMIT ?`, p.JobID, cursor, limit+1)
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

// RunClaim leases due jobs in one UPDATE … RETURNING and writes their runs in
// the same transaction; see db.Store.
func (s *Store) RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error) {
	if p.Max <= 0 {
		return nil, nil
	}
	if s.ClockGuard != nil {
		if hold, _ := s.ClockGuard.Holding(); hold {
			return nil, nil // the clock went back: no slot fires twice
		}
	}
	claim, err := s.stmts.claimStmt(ctx, s.write, len(p.Types))
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	s.claiming.Add(1)
	var claims []db.Claim
	defer func() {
		if p.More && len(claims) == p.Max {
			s.moreUntil.Store(time.Now().Add(claimGap).UnixNano())
		}
		s.claiming.Add(-1)
		signal(s.claimsDone)
	}()
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		now := s.Now()
		until := now.Add(cmpOr(p.Lease, db.DefaultLease))
		args := []any{p.WorkerID, fmtTime(until), fmtTime(now), fmtTime(now.Add(max(p.Ahead, 0)))}
		for _, t := range p.Types {
			args = append(args, t)
		}
		args = append(args, p.Max)
		jobs, err := scanJobs(tx.StmtContext(ctx, claim).QueryContext(ctx, args...))
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
				claims = append(claims, db.Claim{Job: run, RunID: 0})
			}
		}
		return s.insertRuns(ctx, tx, claims, now)
	})
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	failpoint.Hit(failpoint.AfterClaimCommit)
	return claims, nil
}

// claimSQL is RunClaim's UPDATE for n types (any type when n is 0). Its
// arguments: worker, lease until, now, due by, the types, the limit. The
// candidates are named by rowid, which the partial index holds, so that
// each is found without a search of the id index.
func claimSQL(n int) string {
	q := `UPDATE jobs SET state = 'running', lease_owner = ?, lease_until = ?,
			lease_generation = lease_generation + 1, attempt = attempt + 1,
			cancel_requested = 0, updated_at = ?
		WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY jobs_ready WHERE state = 'ready' AND next_run_at <= ?`
	if n > 0 {
		q += ` AND type IN (` + placeholders(n) + `)`
	}
	return q + ` ORDER BY next_run_at LIMIT ?) RETURNING ` + jobColumns
}

// insertRunsSQL writes the run rows of the just-claimed jobs named in a
// JSON array, in one statement, from the jobs' rows as the claim left them.
// An operator's extra run (triggered) is recorded at its own time, marked
// manual, so that the schedule's pending slot still shows as not run. A job
// claimed ahead of its due time starts when it is due (see
// db.RunClaimParams.Ahead). Arguments: now, the job ids.
const insertRunsSQL = `INSERT INTO runs (job_id, slot, attempt, generation, worker_id, started_at, outcome, reason)
	SELECT id, CASE WHEN triggered = 1 THEN ?1 ELSE slot END, attempt, lease_generation, lease_owner, max(?1, next_run_at), 'running',
		CASE WHEN triggered = 1 THEN 'manual' END
	FROM jobs WHERE id IN (SELECT value FROM json_each(?2))
	RETURNING id, job_id`

// insertRuns writes the run rows of claims and fills in their RunID.
func (s *Store) insertRuns(ctx context.Context, tx *sql.Tx, claims []db.Claim, now time.Time) error {
	if len(claims) == 0 {
		return nil
	}
	ids := make([]string, len(claims))
	byID := make(map[string]*db.Claim, len(claims))
	for i := range claims {
		ids[i] = claims[i].Job.ID
		byID[ids[i]] = &claims[i]
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("encode claimed ids: %w", err)
	}
	rows, err := tx.StmtContext(ctx, s.stmts.insertRuns).QueryContext(ctx, fmtTime(now), string(idsJSON))
	if err != nil {
		return fmt.Errorf("insert runs: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			runID int64
			jobID string
		)
		if err := rows.Scan(&runID, &jobID); err != nil {
			return fmt.Errorf("insert runs: %w", err)
		}
		if c := byID[jobID]; c != nil {
			c.RunID = runID
			n++
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert runs: %w", err)
	}
	if n != len(claims) {
		return fmt.Errorf("insert runs: %d run rows written for %d claims", n, len(claims))
	}
	return nil
}

// startFiring applies the misfire policy to a just-claimed recurring job. It
// returns the job as it will run, or ok=false when the policy runs nothing
// now and the claim was undone.
func (s *Store) startFiring(ctx context.Context, tx *sql.Tx, j db.Job, now time.Time) (db.Job, bool, error) {
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
	for _, m := range s.splitStepped(f.Missed) {
		if err := insertMissed(ctx, tx, j.ID, m, now); err != nil {
			return db.Job{}, false, err
		}
	}
	if !f.Run {
		_, err := tx.ExecContext(ctx, `UPDATE jobs SET state = 'ready', lease_owner = NULL, lease_until = NULL,
				attempt = 0, slot = ?, next_run_at = ?, missed_slots = missed_slots + ?
			WHERE id = ? AND lease_generation = ?`,
			fmtTime(f.Slot), fmtTime(lifecycle.DueAt(j.ID, f.Slot, time.Duration(j.Jitter))), f.Missed.Total, j.ID, j.LeaseGeneration)
		if err != nil {
			return db.Job{}, false, fmt.Errorf("skip misfired job %s: %w", j.ID, err)
		}
		return db.Job{}, false, nil
	}
	j, err = scanJob(tx.QueryRowContext(ctx, `UPDATE jobs SET slot = ?, attempt = 1, missed_slots = missed_slots + ?
		WHERE id = ? AND lease_generation = ? RETURNING `+jobColumns,
		fmtTime(f.Slot), f.Missed.Total, j.ID, j.LeaseGeneration))
	if err != nil {
		return db.Job{}, false, fmt.Errorf("move misfired job %s to slot %s: %w", j.ID, f.Slot, err)
	}
	return j, true, nil
}

// RunHeartbeat extends a live lease; see db.Store.
func (s *Store) RunHeartbeat(ctx context.Context, p db.RunHeartbeatParams) (db.Heartbeat, error) {
	now := s.Now()
	until := now.Add(cmpOr(p.Lease, db.DefaultLease))
	var cancel int
	err := s.stmts.heartbeat.QueryRowContext(ctx, fmtTime(until), p.JobID, p.Generation, fmtTime(now)).Scan(&cancel)
	if errors.Is(err, sql.ErrNoRows) {
		return db.Heartbeat{}, db.ErrStale
	}
	if err != nil {
		return db.Heartbeat{}, fmt.Errorf("heartbeat %s/%d: %w", p.JobID, p.Generation, translate(err))
	}
	return db.Heartbeat{LeaseUntil: until, CancelRequested: cancel != 0}, nil
}

// heartbeatSQL extends a live lease and says whether cancellation was
// requested. Arguments: lease until, job id, generation, now.
const heartbeatSQL = `UPDATE jobs SET lease_until = ?
	WHERE id = ? AND lease_generation = ? AND state = 'running' AND lease_until >= ?
	RETURNING cancel_requested`

// leasedJobSQL reads a job under a live lease. Arguments: job id,
// generation, now.
const leasedJobSQL = `SELECT ` + jobColumns + ` FROM jobs
	WHERE id = ? AND lease_generation = ? AND state = 'running' AND lease_until >= ?`

// RunReapExpired returns expired leases; see db.Store.
func (s *Store) RunReapExpired(ctx context.Context) (int, error) {
	n := 0
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		now := s.Now()
		jobs, err := scanJobs(tx.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs INDEXED BY jobs_running
			WHERE state = 'running' AND lease_until < ? ORDER BY lease_until LIMIT 500`, fmtTime(now)))
		if err != nil {
			return err
		}
		for _, j := range jobs {
			_, err := s.finish(ctx, tx, j, db.RunFinishParams{
				JobID: j.ID, Generation: j.LeaseGeneration, Outcome: db.OutcomeLeaseExpired, Retryable: true,
				Error: fmt.Sprintf("lease expired at %s: worker %s stopped heartbeating", fmtTime(*j.LeaseUntil), j.LeaseOwner),
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

// finish closes the run of j's current lease and moves j on, inside tx. Both
// writes are fenced by the lease generation read in the same transaction.
func (s *Store) finish(ctx context.Context, tx *sql.Tx, j db.Job, p db.RunFinishParams, now time.Time) (db.Job, error) {
	var sched *schedule.Schedule
	claimedAt := now // only a schedule's next firing looks at it
	if j.Recurring() {
		var err error
		if sched, err = schedule.Parse(j.Schedule, j.Timezone); err != nil {
			return db.Job{}, fmt.Errorf("parse stored schedule of job %s: %w", j.ID, err)
		}
		var startedAt sql.NullString
		err = tx.StmtContext(ctx, s.stmts.runStartedAt).QueryRowContext(ctx, j.ID, j.LeaseGeneration).Scan(&startedAt)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return db.Job{}, fmt.Errorf("read run: %w", err)
		}
		if t, _ := parseTime(startedAt); t != nil {
			claimedAt = *t
		}
	}
	r := lifecycle.Finished(&j, sched, p, claimedAt, now, s.RandFunc)
	if err := insertMissed(ctx, tx, j.ID, r.Missed, now); err != nil {
		return db.Job{}, err
	}
	var succeededAt any
	if p.Outcome == db.OutcomeSucceeded {
		succeededAt = fmtTime(now)
	}
	res, err := tx.StmtContext(ctx, s.stmts.finishJob).ExecContext(ctx, r.State, nullTime(r.Slot), nullTime(r.NextRunAt), r.Attempt, nullString(r.LastError),
		r.Missed.Total, r.Triggered, succeededAt, fmtTime(now), j.ID, j.LeaseGeneration)
	if err != nil {
		return db.Job{}, fmt.Errorf("update job: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return db.Job{}, fmt.Errorf("update job: %d rows fenced by generation %d (%v)", n, j.LeaseGeneration, err)
	}
	_, err = tx.StmtContext(ctx, s.stmts.finishRun).ExecContext(ctx, p.Outcome, nullString(p.Error), nullString(tail(p.Output)), fmtTime(now), r.GaveUp, j.ID, j.LeaseGeneration)
	if err != nil {
		return db.Job{}, fmt.Errorf("close run: %w", err)
	}
	return finished(j, r, p.Outcome, now), nil
}

// finished is j as finishJobSQL leaves it, built here rather than read back
// with RETURNING: on the completion path, scanning the row again cost more
// than the update itself.
func finished(j db.Job, r lifecycle.Result, outcome db.Outcome, now time.Time) db.Job {
	j.State, j.Attempt, j.LastError, j.Triggered = r.State, r.Attempt, r.LastError, r.Triggered
	j.Slot, j.NextRunAt = timePtr(r.Slot), timePtr(r.NextRunAt)
	j.LeaseOwner, j.LeaseUntil, j.CancelRequested = "", nil, false
	j.MissedSlots += r.Missed.Total
	if outcome == db.OutcomeSucceeded {
		j.LastSuccessAt = timePtr(now)
	}
	j.UpdatedAt = *timePtr(now)
	return j
}

// timePtr is t as stored: nil for the zero time, else t in UTC to the
// millisecond, as parseTime reads it back.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC().Truncate(time.Millisecond)
	return &t
}

// splitStepped relabels the missed slots that a forward clock step jumped
// over as clock_step; the rest keep their reason.
func (s *Store) splitStepped(m lifecycle.Missed) []lifecycle.Missed {
	if s.ClockGuard == nil || len(m.Slots) == 0 {
		return []lifecycle.Missed{m}
	}
	stepped := lifecycle.Missed{Reason: db.MissedClockStep}
	rest := lifecycle.Missed{Reason: m.Reason, Total: m.Total}
	for _, slot := range m.Slots {
		if s.ClockGuard.JumpedOver(slot) {
			stepped.Slots = append(stepped.Slots, slot)
		} else {
			rest.Slots = append(rest.Slots, slot)
		}
	}
	return []lifecycle.Missed{stepped, rest}
}

// finishJobSQL moves a finished job on, fenced by its generation.
const finishJobSQL = `UPDATE jobs SET state = ?, slot = ?, next_run_at = ?, attempt = ?,
		last_error = ?, lease_owner = NULL, lease_until = NULL, cancel_requested = 0,
		missed_slots = missed_slots + ?, triggered = ?, last_success_at = coalesce(?, last_success_at),
		updated_at = ?
	WHERE id = ? AND lease_generation = ? AND state = 'running'`

// finishRunSQL closes the run of a lease generation.
const finishRunSQL = `UPDATE runs SET outcome = ?, error = ?, output = ?, finished_at = ?, gave_up = ?
	WHERE job_id = ? AND generation = ? AND outcome = 'running'`

// liveRun is the run of j's current lease.
func liveRun(ctx context.Context, tx *sql.Tx, j db.Job) (*db.Run, error) {
	r, err := scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE job_id = ? AND generation = ?`,
		j.ID, j.LeaseGeneration))
	if err != nil {
		return nil, fmt.Errorf("read live run of %s: %w", j.ID, err)
	}
	return &r, nil
}

// insertMissed writes one missed run per listed slot.
func insertMissed(ctx context.Context, tx *sql.Tx, jobID string, m lifecycle.Missed, now time.Time) error {
	if len(m.Slots) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO runs (job_id, slot, attempt, generation, finished_at, outcome, reason)
		VALUES (?, ?, 0, 0, ?, 'missed', ?)`)
	if err != nil {
		return fmt.Errorf("prepare missed runs: %w", err)
	}
	defer stmt.Close()
	for _, slot := range m.Slots {
		if _, err := stmt.ExecContext(ctx, jobID, fmtTime(slot), fmtTime(now), m.Reason); err != nil {
			return fmt.Errorf("insert missed run of %s: %w", jobID, err)
		}
	}
	return nil
}

// scanJobs reads the jobs of a query's answer.
func scanJobs(rows *sql.Rows, err error) ([]db.Job, error) {
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

// tail keeps the last db.OutputTailBytes of s.
func tail(s string) string {
	if len(s) > db.OutputTailBytes {
		return s[len(s)-db.OutputTailBytes:]
	}
	return s
}

// RunExpireOwnedBy ends now the leases of running jobs whose owner starts
// with prefix, except those of owner keep, so that the reaper returns them at
// once instead of when they run out. sked serve calls it at start for the
// in-process pool of the serve it replaces: it holds the database's
// single-instance lock, so that pool is dead and its leases cannot be live.
// It returns how many leases it ended.
func (s *Store) RunExpireOwnedBy(ctx context.Context, prefix, keep string) (int, error) {
	var n int64
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		now := s.Now()
		res, err := tx.ExecContext(ctx, `UPDATE jobs INDEXED BY jobs_running SET lease_until = ?
			WHERE state = 'running' AND lease_until >= ? AND substr(lease_owner, 1, ?) = ? AND lease_owner <> ?`,
			fmtTime(now.Add(-time.Millisecond)), fmtTime(now), len(prefix), prefix, keep)
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
