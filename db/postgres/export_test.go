package postgres

import (
	"context"

	"github.com/sked-dev/sked/db/engine"
)

// InTx runs fn in a transaction of s's dialect, for tests of its statements.
func InTx(ctx context.Context, s *Store, fn func(engine.Tx) error) error {
	return s.d.InTx(ctx, nil, fn)
}
