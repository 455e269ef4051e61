package postgres

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sked-dev/sked/db"
)

// JobCreateTx creates a job inside ptx, a transaction of the caller's on
// this store's database (and schema): the job exists if and only if ptx
// commits, so that it is enqueued together with the caller's own writes
// (an order and the job that ships it). It is JobCreate otherwise, with the
// transaction's clock; the dispatchers of every node are woken when ptx
// commits. A failed statement leaves ptx aborted, as any does: roll it
// back. A transaction that has ended (committed or rolled back, through
// pgx or as SQL) is refused with pgx.ErrTxClosed: the job's statements
// would commit on their own.
func (s *Store) JobCreateTx(ctx context.Context, ptx pgx.Tx, p db.JobCreateParams) (db.Job, bool, error) {
	if v := reflect.ValueOf(ptx); ptx == nil || v.Kind() == reflect.Pointer && v.IsNil() { // also a typed nil, a *pgxpool.Tx never begun
		return db.Job{}, false, errors.New("create job in transaction: no transaction given; begin one on the store's database")
	}
	t := s.d.newTx(ptx.Conn())
	var at *time.Time
	if s.NowFunc != nil {
		now := s.Now()
		at = &now
	}
	// Through ptx, which refuses to run once it has ended; the rest goes
	// on its connection, batched.
	if err := ptx.QueryRow(ctx, `SELECT coalesce($1::timestamptz, now())`, at).Scan(&t.now); err != nil {
		return db.Job{}, false, fmt.Errorf("create job in transaction: read clock: %w", translate(err))
	}
	if ptx.Conn().PgConn().TxStatus() != 'T' { // ended by a COMMIT or ROLLBACK sent as SQL
		return db.Job{}, false, fmt.Errorf("create job in transaction: the transaction has ended: %w", pgx.ErrTxClosed)
	}
	t.now, t.clocked = t.now.UTC(), true
	jobs, created, err := s.CreateIn(ctx, t, []db.JobCreateParams{p}, false)
	if err == nil {
		err = t.flush(ctx) // the writes still queued; the caller commits
	}
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return db.Job{}, false, fmt.Errorf("create job in transaction: the transaction is not on sked's database and schema; "+
			"begin it on a connection to the database sked uses, with the same search_path: %w", translate(err))
	}
	if err != nil {
		return db.Job{}, false, fmt.Errorf("create job in transaction: %w", translate(err))
	}
	return jobs[0], created[0], nil
}
