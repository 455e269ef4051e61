package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sked-dev/sked/db"
)

// WorkerSeen records a worker's claim; see engine.Tx.
func (t *tx) WorkerSeen(ctx context.Context, w db.Worker, forget time.Time) error {
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM workers WHERE last_seen_at < ? AND id <> ?`, fmtTime(forget), w.ID); err != nil {
		return fmt.Errorf("forget: %w", err)
	}
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO workers (id, types, first_seen_at, last_seen_at) VALUES (?1, ?2, ?3, ?3)
		ON CONFLICT (id) DO UPDATE SET types = excluded.types, last_seen_at = max(last_seen_at, excluded.last_seen_at), stopped_at = NULL`,
		w.ID, jsonArray(w.Types), fmtTime(t.now)); err != nil {
		return fmt.Errorf("upsert: %w", err)
	}
	return nil
}

// WorkerStopped records that a worker shut down; see engine.Tx.
func (t *tx) WorkerStopped(ctx context.Context, id string) error {
	_, err := t.tx.ExecContext(ctx, `UPDATE workers SET stopped_at = ? WHERE id = ?`, fmtTime(t.now), id)
	return err
}

// Workers lists the workers seen since since; see db.Store.
func (d *dialect) Workers(ctx context.Context, since time.Time) ([]db.Worker, error) {
	rows, err := d.read.QueryContext(ctx, `SELECT id, types, first_seen_at, last_seen_at, stopped_at FROM workers
		WHERE last_seen_at >= ? ORDER BY last_seen_at DESC, id`, fmtTime(since))
	return collect(rows, err, scanWorker)
}

// scanWorker reads a worker's row.
func scanWorker(row scanner) (db.Worker, error) {
	var (
		w     db.Worker
		types string
	)
	if err := row.Scan(&w.ID, &types, moment{&w.FirstSeen}, moment{&w.LastSeen}, at{&w.StoppedAt}); err != nil {
		return w, err
	}
	if err := json.Unmarshal([]byte(types), &w.Types); err != nil {
		return w, fmt.Errorf("worker %s: types %q: %w", w.ID, types, err)
	}
	return w, nil
}
