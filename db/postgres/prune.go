package postgres

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
)

var _ db.Pruner = (*Store)(nil)

// Prune deletes a batch of old history in one transaction; see db.Pruner.
// A job's runs go with it through the foreign key's ON DELETE CASCADE. The
// runs statement walks runs by id, oldest first, so a batch ends as soon as
// it has found its Limit; runs has no index on finished_at. Both take their
// rows FOR UPDATE SKIP LOCKED, so pruners on several nodes share the work
// instead of waiting for each other.
func (s *Store) Prune(ctx context.Context, p db.PruneParams) (db.Pruned, error) {
	var out db.Pruned
	limit := cmp.Or(p.Limit, 500)
	err := s.withTx(ctx, func(tx pgx.Tx, _ time.Time) error {
		tag, err := tx.Exec(ctx, `DELETE FROM jobs WHERE id IN (
				SELECT id FROM jobs WHERE state IN ('done', 'cancelled') AND schedule IS NULL AND updated_at < $1
				LIMIT $2 FOR UPDATE SKIP LOCKED)`, p.Before, limit)
		if err != nil {
			return fmt.Errorf("delete jobs: %w", err)
		}
		out.Jobs = int(tag.RowsAffected())
		tag, err = tx.Exec(ctx, `DELETE FROM runs WHERE id IN (
				SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job_id
				WHERE j.schedule IS NOT NULL AND r.outcome <> 'running' AND r.finished_at < $1
				ORDER BY r.id LIMIT $2 FOR UPDATE OF r SKIP LOCKED)`, p.Before, limit)
		if err != nil {
			return fmt.Errorf("delete runs: %w", err)
		}
		out.Runs = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return db.Pruned{}, fmt.Errorf("prune: %w", err)
	}
	return out, nil
}
