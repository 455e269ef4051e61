package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/stdlib"
)

// errPending is returned by Ready when the database's schema is behind the
// migrations of this binary.
var errPending = errors.New("database schema is behind this binary's migrations; run sked migrate")

// Ready checks that the schema is current and that the database takes
// writes; see db.ReadyChecker. The write is an UPDATE that matches no row,
// in a transaction that is rolled back: it changes nothing and locks no
// row, yet a read-only server (a standby, default_transaction_read_only)
// refuses it.
func (d *dialect) Ready(ctx context.Context) error {
	conn := stdlib.OpenDBFromPool(d.pool)
	defer conn.Close()
	p, err := provider(conn)
	if err != nil {
		return err
	}
	pending, err := p.HasPending(ctx) // does not take the migration lock
	if err != nil {
		return fmt.Errorf("check migrations: %w", err)
	}
	if pending {
		return errPending
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin write: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE jobs SET updated_at = updated_at WHERE false`); err != nil {
		return fmt.Errorf("write jobs: %w", err)
	}
	return nil
}
