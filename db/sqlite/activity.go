package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/lifecycle"
)

var _ db.ActivityReader = (*Store)(nil)

// RunActivity summarises the runs of p's window on the read pool; see
// db.ActivityReader. Both queries walk only the newest p.Scan runs by
// primary key, so their cost does not grow with the history: runs has no
// index on its times.
func (s *Store) RunActivity(ctx context.Context, p db.RunActivityParams) (db.RunActivity, error) {
	scan := cmpOr(p.Scan, db.DefaultActivityScan)
	from, to := fmtTime(p.From), fmtTime(p.To)
	var a db.RunActivity
	err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM
			(SELECT finished_at, outcome FROM runs ORDER BY id DESC LIMIT ?)
		WHERE outcome <> 'missed' AND finished_at > ? AND finished_at <= ?`,
		scan, from, to).Scan(&a.Finished)
	if err != nil {
		return db.RunActivity{}, fmt.Errorf("count finished runs: %w", err)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT r.job_id, r.slot, r.started_at, j.jitter_ms FROM
			(SELECT id, job_id, slot, attempt, started_at, outcome FROM runs ORDER BY id DESC LIMIT ?) r
			JOIN jobs j ON j.id = r.job_id
		WHERE r.attempt = 1 AND r.outcome <> 'missed' AND r.slot IS NOT NULL
			AND r.started_at > ? AND r.started_at <= ?
		ORDER BY r.id DESC LIMIT ?`,
		scan, from, to, cmpOr(p.MaxLateness, db.DefaultActivitySamples))
	if err != nil {
		return db.RunActivity{}, fmt.Errorf("read start lateness: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			jobID         string
			slot, started sql.NullString
			jitterMS      int64
		)
		if err := rows.Scan(&jobID, &slot, &started, &jitterMS); err != nil {
			return db.RunActivity{}, fmt.Errorf("read start lateness: %w", err)
		}
		st, err := parseTime(slot)
		if err != nil {
			return db.RunActivity{}, err
		}
		at, err := parseTime(started)
		if err != nil {
			return db.RunActivity{}, err
		}
		due := lifecycle.DueAt(jobID, *st, time.Duration(jitterMS)*time.Millisecond)
		a.Lateness = append(a.Lateness, at.Sub(due))
	}
	if err := rows.Err(); err != nil {
		return db.RunActivity{}, fmt.Errorf("read start lateness: %w", err)
	}
	return a, nil
}
