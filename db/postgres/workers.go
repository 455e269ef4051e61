package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
)

// WorkerSeen records a worker's claim, sent after the claim with the
// commit; see engine.Tx. The only row the transaction waits for is its
// worker's, and it waits before it holds any other: the claim before it
// waits for none (SKIP LOCKED), and the forgetting, after it, skips
// locked rows. Of two claims of the worker on two nodes, one waits for the
// other's commit, never both for each other; and two workers forgotten
// both (seen again after an outage longer than db.WorkerForgetAfter) do
// not each lock the other's row to delete it, then wait for their own.
func (t *tx) WorkerSeen(_ context.Context, w db.Worker, forget time.Time) error {
	t.exec(nil, `INSERT INTO workers (id, types, first_seen_at, last_seen_at) VALUES ($1, $2, $3, $3)
		ON CONFLICT (id) DO UPDATE SET types = excluded.types, last_seen_at = greatest(workers.last_seen_at, excluded.last_seen_at),
			stopped_at = NULL`,
		w.ID, append([]string{}, w.Types...), t.Now())
	t.exec(nil, `DELETE FROM workers WHERE id IN (
		SELECT id FROM workers WHERE last_seen_at < $1 AND id <> $2 FOR UPDATE SKIP LOCKED)`, forget, w.ID)
	return nil
}

// WorkerStopped records that a worker shut down, sent with the commit; see
// engine.Tx.
func (t *tx) WorkerStopped(_ context.Context, id string) error {
	t.exec(nil, `UPDATE workers SET stopped_at = $1 WHERE id = $2`, t.Now(), id)
	return nil
}

// Workers lists the workers seen since since; see db.Store.
func (d *dialect) Workers(ctx context.Context, since time.Time) ([]db.Worker, error) {
	rows, err := d.pool.Query(ctx, `SELECT id, types, first_seen_at, last_seen_at, stopped_at FROM workers
		WHERE last_seen_at >= $1 ORDER BY last_seen_at DESC, id`, since)
	if err != nil {
		return nil, translate(err)
	}
	ws := []db.Worker{}
	var w db.Worker
	_, err = pgx.ForEachRow(rows, []any{&w.ID, &w.Types, &w.FirstSeen, &w.LastSeen, &w.StoppedAt}, func() error {
		v := db.Worker{ID: w.ID, Types: slices.Clone(w.Types), FirstSeen: w.FirstSeen.UTC(), LastSeen: w.LastSeen.UTC()}
		if w.StoppedAt != nil {
			t := w.StoppedAt.UTC()
			v.StoppedAt = &t
		}
		ws = append(ws, v)
		return nil
	})
	return ws, translate(err)
}
