package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sked-dev/sked/db"
)

const eventColumns = `id, job_id, at, kind, actor, detail`

func scanEvent(row scanner) (db.Event, error) {
	var e db.Event
	err := row.Scan(&e.ID, &e.JobID, moment{&e.At}, &e.Kind, text{&e.Actor}, (*[]byte)(&e.Detail))
	if errors.Is(err, sql.ErrNoRows) {
		return db.Event{}, db.ErrNotFound
	}
	if err != nil {
		return db.Event{}, fmt.Errorf("scan event: %w", err)
	}
	return e, nil
}

// EventsInsert inserts events; see engine.Tx.
func (t *tx) EventsInsert(ctx context.Context, events []db.Event) error {
	for _, e := range events {
		detail := json.RawMessage("{}")
		if len(e.Detail) > 0 {
			detail = e.Detail
		}
		if _, err := t.tx.ExecContext(ctx, `INSERT INTO job_events (job_id, at, kind, actor, detail) VALUES (?, ?, ?, ?, ?)`,
			e.JobID, fmtTime(e.At), e.Kind, nullString(e.Actor), string(detail)); err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
	}
	return nil
}

// EventsPage reads a page of a job's events; see engine.Reader.
func (d *dialect) EventsPage(ctx context.Context, job string, before int64, limit int) ([]db.Event, error) {
	rows, err := d.read.QueryContext(ctx, `SELECT `+eventColumns+` FROM job_events
		WHERE job_id = ? AND id < ? ORDER BY id DESC LIMIT ?`, job, before, limit)
	return collect(rows, err, scanEvent)
}

// EventsAfter reads the events after an id; see engine.Reader.
func (d *dialect) EventsAfter(ctx context.Context, after int64, kinds []string, limit int) ([]db.Event, error) {
	rows, err := d.read.QueryContext(ctx, `SELECT `+eventColumns+` FROM job_events
		WHERE id > ?1 AND (?2 = '[]' OR kind IN (SELECT value FROM json_each(?2))) ORDER BY id LIMIT ?3`,
		after, jsonArray(kinds), limit)
	return collect(rows, err, scanEvent)
}
