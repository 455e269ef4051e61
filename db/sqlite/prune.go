package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sked-dev/sked/db"
)

var _ db.Pruner = (*Store)(nil)

// Prune deletes a batch of old history in one transaction; see db.Pruner.
// A job's runs go with it through the foreign key's ON DELETE CASCADE. The
// runs statement walks runs by id, oldest first, so a batch ends as soon as
// it has found its Limit; runs has no index on finished_at.
func (s *Store) Prune(ctx context.Context, p db.PruneParams) (db.Pruned, error) {
	var out db.Pruned
	before, limit := fmtTime(p.Before), cmpOr(p.Limit, 500)
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE id IN (
				SELECT id FROM jobs WHERE state IN ('done', 'cancelled') AND schedule IS NULL AND updated_at < ?
				LIMIT ?)`, before, limit)
		if err != nil {
			return fmt.Errorf("delete jobs: %w", err)
		}
		n, _ := res.RowsAffected()
		out.Jobs = int(n)
		res, err = tx.ExecContext(ctx, `DELETE FROM runs WHERE id IN (
				SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job_id
				WHERE j.schedule IS NOT NULL AND r.outcome <> 'running' AND r.finished_at < ?
				ORDER BY r.id LIMIT ?)`, before, limit)
		if err != nil {
			return fmt.Errorf("delete runs: %w", err)
		}
		n, _ = res.RowsAffected()
		out.Runs = int(n)
		return nil
	})
	if err != nil {
		return db.Pruned{}, fmt.Errorf("prune: %w", err)
	}
	return out, nil
}
