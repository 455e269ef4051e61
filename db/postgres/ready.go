package postgres

import (
	"context"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/sked-dev/sked/db/schema"
)

// Ready checks that the schema is current and that the database takes
// writes; see db.ReadyChecker. The write is an UPDATE that matches no row,
// in a transaction that is rolled back: it changes nothing and locks no
// row, yet a read-only server (a standby, default_transaction_read_only)
// refuses it.
func (d *dialect) Ready(ctx context.Context) error {
	if err := d.withProvider(func(p *goose.Provider) error { return schema.Check(ctx, p) }); err != nil {
		return err
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
