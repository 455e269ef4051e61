package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/engine"
)

var _ engine.Tx = (*tx)(nil)

// tx is an engine.Tx: a READ COMMITTED transaction on one connection of the
// pool. Its writes whose answer the engine does not need are queued and
// sent together with the next statement that has an answer, or with the
// COMMIT: a group of completions costs two round trips, not one per
// statement. A queued write that fails makes the server skip everything
// after it, the COMMIT included, so nothing of a failed transaction lands.
// The BEGIN and the reading of the clock are queued too (see InTx).
type tx struct {
	conn    *pgx.Conn
	ctx     context.Context // InTx's, for the reading of the clock that Now sends
	now     time.Time
	clocked bool       // now has been read (or was given)
	failed  error      // the failure of the round trip that Now sent
	queued  *pgx.Batch // writes not yet sent
	channel string     // where Notify sends (dialect.channel)
}

// InTx runs fn in a transaction and commits it; see engine.Dialect. BEGIN
// and the reading of the clock (now, or the database's now(): the start of
// the transaction) are queued, and sent with the transaction's first
// statement that has an answer, or by the first call of Now that needs
// the database's clock: a group of completions, which reads its jobs
// before it needs the time, takes no round trip of its own to begin.
//
// Plans: the lifecycle reaches rows by key or through an index, in
// statements of one fixed text each, and the statistics of a queue table
// are stale as a rule (a batch enqueued and finished between two
// autovacuum runs). So the transaction pins its statements' plans to that
// shape and plans each statement once per connection:
//   - No sequential scans (enable_seqscan off; a table without a usable
//     index is still scanned). Measured with 20,000 jobs enqueued at once:
//     the completions' UPDATE of 500 jobs by primary key was planned as a
//     scan of the whole table, 63 ms instead of about 3.
//   - No hash or merge joins: rows given as arrays are joined by looking
//     each up by key (a nested loop), which costs the same whatever the
//     table's size or its statistics say.
//   - The plan the connection keeps for a statement (plan_cache_mode
//     force_generic_plan), made once, instead of one per execution
//     (measured: a claim of 50 jobs planned in 0.6 ms and ran in 2.5; a
//     group's three statements planned in 1 ms). With the plans pinned as
//     above, the kept plan is the one each execution would get.
//   - No JIT compilation (jit off). A plan that sorts with sorting
//     switched off, as a claim of several types does, carries its
//     disabling cost and would pass the JIT thresholds: measured, 0.15 to
//     0.75 s of compiling for a claim that runs in under 1 ms.
//
// A lock is waited for at most lockTimeout; then the statement fails with
// db.ErrBusy.
func (d *dialect) InTx(ctx context.Context, now func() time.Time, fn func(engine.Tx) error) (err error) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", translate(err))
	}
	// A connection left inside a transaction (a failed ROLLBACK, a
	// cancelled statement) is closed by Release, not reused.
	defer c.Release()
	t := d.begin(ctx, c.Conn(), now)
	if err := cmp.Or(fn(t), t.failed); err != nil {
		t.rollback(ctx)
		return translate(err)
	}
	return t.commit(ctx)
}

// begin is a transaction on conn whose BEGIN and reading of the clock are
// queued (see InTx).
func (d *dialect) begin(ctx context.Context, conn *pgx.Conn, now func() time.Time) *tx {
	var at *time.Time
	if now != nil {
		t := now().UTC()
		at = &t
	}
	t := d.newTx(conn)
	t.ctx = ctx
	if at != nil {
		// As the database keeps it: to the microsecond.
		t.now, t.clocked = at.Truncate(time.Microsecond), true
	}
	t.queued.Queue(`BEGIN`)
	t.queued.Queue(`SELECT coalesce($1::timestamptz, now()), set_config('enable_seqscan', 'off', true),
			set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
			set_config('plan_cache_mode', 'force_generic_plan', true), set_config('lock_timeout', $2, true),
			set_config('jit', 'off', true)`, at, lockTimeout).QueryRow(func(r pgx.Row) error {
		if err := r.Scan(&t.now, nil, nil, nil, nil, nil, nil); err != nil {
			return err
		}
		t.now, t.clocked = t.now.UTC(), true
		return nil
	})
	return t
}

// commit sends the queued statements and the COMMIT, and rolls the
// transaction back if they fail.
func (t *tx) commit(ctx context.Context) error {
	t.queued.Queue(`COMMIT`)
	if err := t.flush(ctx); err != nil {
		t.rollback(ctx)
		if (lost(err) || shutDown(err) || cutOff(err)) && !pgconn.SafeToRetry(err) {
			// The COMMIT may have reached the server, and been done,
			// before the connection broke, the server ended the session,
			// or the caller's time ran out (pgx then cancels the
			// statement and closes the connection, but a cancel that
			// arrives as the commit is written stops nothing): the
			// transaction's fate is not known.
			return fmt.Errorf("commit: no answer from the server: %w: %w", db.ErrCommitUnknown, err)
		}
		return fmt.Errorf("commit: %w", translate(err))
	}
	return nil
}

// cutOff reports whether err is the caller's context ending.
func cutOff(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// lockTimeout bounds how long a statement of a transaction waits for a lock
// (db.ErrBusy after it): well under outboxSettle, so that no transaction
// of sked's commits an event the outbox has already passed.
const lockTimeout = "20s"

// rollback ends the transaction after a failure, if the connection still
// holds one.
func (t *tx) rollback(ctx context.Context) {
	if t.conn.IsClosed() || t.conn.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	t.conn.Exec(ctx, `ROLLBACK`)
}

// newTx is a tx on conn, which the caller has begun (or queues BEGIN on).
func (d *dialect) newTx(conn *pgx.Conn) *tx {
	return &tx{conn: conn, queued: &pgx.Batch{}, channel: d.channel}
}

// Now is the transaction's clock. Until it has been read, it sends the
// queued statements (the BEGIN and the reading among them); should that
// fail, the transaction fails (InTx returns the failure), and Now answers
// this machine's clock meanwhile: a time its callers can compute with
// (the zero time made job ids panic), which nothing writes (no statement
// is sent after the failure: see flush).
func (t *tx) Now() time.Time {
	if !t.clocked && t.failed == nil {
		if t.failed = t.flush(t.ctx); t.failed != nil {
			t.now = time.Now().UTC()
		}
	}
	return t.now
}

// given is the transaction's clock when it is known without asking the
// server (given to InTx, or read already); nil when it is the server's
// now(), which a statement then reads itself, saving Now's round trip.
func (t *tx) given() *time.Time {
	if !t.clocked {
		return nil
	}
	return &t.now
}

// exec queues a write; check, when not nil, judges its command tag once it
// has run.
func (t *tx) exec(check func(pgconn.CommandTag) error, sql string, args ...any) {
	q := t.queued.Queue(sql, args...)
	if check != nil {
		q.Exec(check)
	}
}

// query sends the queued writes and sql in one round trip and hands sql's
// rows to scan.
func (t *tx) query(ctx context.Context, scan func(pgx.Rows) error, sql string, args ...any) error {
	t.queued.Queue(sql, args...).Query(scan)
	return t.flush(ctx)
}

// queryRow is query for one row; pgx.ErrNoRows when there is none.
func (t *tx) queryRow(ctx context.Context, scan func(pgx.Row) error, sql string, args ...any) error {
	t.queued.Queue(sql, args...).QueryRow(scan)
	return t.flush(ctx)
}

// flush sends the queued statements and runs their checks. After Now's
// round trip failed it sends nothing and answers that failure: the server
// may not have run the BEGIN sent with it (a statement that did not
// prepare fails the round trip before any runs), and the statements sent
// after it would each commit on their own.
func (t *tx) flush(ctx context.Context) error {
	if t.failed != nil {
		return t.failed
	}
	b := t.queued
	t.queued = &pgx.Batch{}
	return t.conn.SendBatch(ctx, b).Close()
}

// expectRows wraps write, an UPDATE or DELETE, so that it fails unless it
// changes as many rows as its argument number n says, naming what it did.
// A queued write whose fence does not hold changes no row, which is no
// error to the server: it would go on to the COMMIT sent behind it. An
// error raised in the statement itself (expect_rows, migration 00007)
// makes the server skip everything after it, the COMMIT included.
func expectRows(n int, what, write string) string {
	return `WITH written AS (` + write + ` RETURNING 1)
	SELECT expect_rows(count(*), $` + strconv.Itoa(n) + `, '` + what + `') FROM written`
}
