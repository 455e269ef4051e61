package sqlite

import (
	"context"
	"fmt"

	"github.com/sked-dev/sked/db/schema"
)

// Ready checks that the schema is current and that the writer can take the
// write lock and write; see db.ReadyChecker. The write rewrites
// user_version with its own value inside a transaction that is rolled back,
// so nothing reaches the file: a read-only file or directory fails it, a
// held lock makes it wait up to busy_timeout.
func (d *dialect) Ready(ctx context.Context) error {
	p, err := Migrations(d.write)
	if err != nil {
		return err
	}
	if err := schema.Check(ctx, p); err != nil {
		return err
	}
	return d.writeProbe(ctx)
}

// writeProbe takes the write lock and writes, in a transaction it rolls
// back: it rewrites user_version with its own value. A read-only file
// (permissions, an immutable attribute, a read-only mount) fails it with a
// message that says so; a lock held by another process past busy_timeout
// fails it with db.ErrBusy.
func (d *dialect) writeProbe(ctx context.Context) error {
	tx, end, err := d.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	var v int64
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("read user_version: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, v)); err != nil {
		if isReadOnly(err) {
			return readOnly(err)
		}
		return fmt.Errorf("write user_version: %w", translate(err))
	}
	return nil
}
