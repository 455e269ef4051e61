package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
)

// eventColumns is the column list every event query selects, in
// scanEvent's order.
const eventColumns = `id, job_id, at, kind, coalesce(actor, '') AS actor, detail`

func scanEvent(row pgx.Row) (db.Event, error) {
	var e db.Event
	err := row.Scan(&e.ID, &e.JobID, &e.At, &e.Kind, &e.Actor, (*[]byte)(&e.Detail))
	if err != nil {
		if err = translate(err); errors.Is(err, db.ErrNotFound) {
			return db.Event{}, err
		}
		return db.Event{}, fmt.Errorf("scan event: %w", err)
	}
	e.At = e.At.UTC()
	return e, nil
}

// EventsInsert inserts events in one statement; see engine.Tx.
func (t *tx) EventsInsert(ctx context.Context, events []db.Event) error {
	jobs, kinds, details := make([]string, len(events)), make([]string, len(events)), make([]string, len(events))
	ats, actors := make([]time.Time, len(events)), make([]*string, len(events))
	for i, e := range events {
		jobs[i], kinds[i], ats[i], actors[i], details[i] = e.JobID, e.Kind, e.At, nullString(e.Actor), "{}"
		if len(e.Detail) > 0 {
			details[i] = string(e.Detail)
		}
	}
	t.exec(nil, `INSERT INTO job_events (job_id, at, kind, actor, detail)
		SELECT job_id, at, kind, actor, detail::json
		FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[])
			WITH ORDINALITY AS u (job_id, at, kind, actor, detail, n)
		ORDER BY n`, jobs, ats, kinds, actors, details)
	return nil
}

// EventsPage reads a page of a job's events; see engine.Reader.
func (d *dialect) EventsPage(ctx context.Context, job string, before int64, limit int) ([]db.Event, error) {
	return query(ctx, d.pool, scanEvent, `SELECT `+eventColumns+` FROM job_events
		WHERE job_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, job, before, limit)
}

// EventsAfter reads the events after the event of id after; see
// engine.Reader. It reads in the order of the events' transactions (then
// ids), and only the events of transactions older than every transaction
// still running on the server (pg_snapshot_xmin): no event can come before
// those any more, so a reader that moves past them misses none (migration
// 00008). So that a transaction left open elsewhere on the server holds
// nothing back for long, an event older than outboxSettle is read all the
// same. An event after whose row was pruned stands for the newest event
// before it.
func (d *dialect) EventsAfter(ctx context.Context, after int64, kinds []string, limit int) ([]db.Event, error) {
	return query(ctx, d.pool, scanEvent, `SELECT `+eventColumns+` FROM job_events
		WHERE (xid, id) > (coalesce((SELECT xid FROM job_events WHERE id <= $1 ORDER BY id DESC LIMIT 1), '0'::xid8), $1)
			AND (xid < pg_snapshot_xmin(pg_current_snapshot()) OR at < now() - $4::interval)
			AND (cardinality($2::text[]) = 0 OR kind = ANY($2))
		ORDER BY xid, id LIMIT $3`,
		after, append([]string{}, kinds...), limit, outboxSettle)
}

// outboxSettle is how long EventsAfter waits at most for the transactions
// older than an event's to end. sked's own last milliseconds, and no lock
// wait of theirs lasts longer than lockTimeout.
const outboxSettle = time.Minute
