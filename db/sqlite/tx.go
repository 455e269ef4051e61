package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/sked-dev/sked/db"

	"github.com/sked-dev/sked/db/engine"
)

var _ engine.Tx = (*tx)(nil)

// tx is an engine.Tx: an IMMEDIATE transaction on the writer connection,
// which holds the whole database until it ends.
type tx struct {
	tx    *sql.Tx
	stmts *statements
	now   time.Time
}

// InTx runs fn in an IMMEDIATE transaction on the writer connection and
// commits it; see engine.Dialect. now is read once the transaction holds the
// writer. A full disk comes back as db.ErrStorageFull, a write that could
// not begin within writeWait as db.ErrBusy (see begin).
func (d *dialect) InTx(ctx context.Context, now func() time.Time, fn func(engine.Tx) error) error {
	t, end, err := d.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	if now == nil {
		now = time.Now
	}
	if err := fn(&tx{tx: t, stmts: &d.stmts, now: now().UTC()}); err != nil {
		return translate(err)
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("commit: %w", translate(err))
	}
	return nil
}

// writeWait bounds how long a write waits to begin: for the writer
// connection, which this process's other writes may hold, and then for the
// file's write lock, which another process may hold (SQLite's busy
// timeout gets what is left). Past it the write fails with db.ErrBusy having
// written nothing, so that a caller is answered within it and a write it was
// told failed never commits later.
const writeWait = busyTimeout

// begin begins an IMMEDIATE transaction on the writer within writeWait; end
// rolls it back unless it was committed, and returns the connection.
func (d *dialect) begin(ctx context.Context) (t *sql.Tx, end func(), err error) {
	deadline := time.Now().Add(writeWait)
	txCtx, cancel := context.WithCancel(ctx) // ends the transaction, at end or when the wait runs out
	waiting := time.AfterFunc(writeWait, cancel)
	c, err := d.write.Conn(txCtx)
	if err == nil {
		_, err = c.ExecContext(txCtx, fmt.Sprintf("PRAGMA busy_timeout = %d", max(time.Until(deadline).Milliseconds(), 1)))
	}
	if err == nil {
		t, err = c.BeginTx(txCtx, nil)
	}
	end = func() {
		if t != nil {
			t.Rollback()
		}
		if c != nil {
			c.Close()
		}
		cancel()
	}
	switch {
	case !waiting.Stop() && ctx.Err() == nil:
		// The wait ran out: txCtx is done, so even a transaction that
		// began just now is rolled back.
		end()
		return nil, nil, fmt.Errorf("begin: %w: no write could begin within %s", db.ErrBusy, writeWait)
	case err != nil:
		end()
		return nil, nil, fmt.Errorf("begin: %w", translate(err))
	}
	return t, end, nil
}

func (t *tx) Now() time.Time { return t.now }

// stmt is s bound to the transaction; it reuses s's preparation, since the
// writer has exactly one connection.
func (t *tx) stmt(ctx context.Context, s *sql.Stmt) *sql.Stmt { return t.tx.StmtContext(ctx, s) }

// statements are the statements every job runs, prepared once on the writer
// connection so that SQLite parses and plans them once.
type statements struct {
	insertJob  *sql.Stmt // insertJobSQL
	jobByKey   *sql.Stmt // a job by idempotency key
	leasedJobs *sql.Stmt // leasedJobsSQL
	claim      *sql.Stmt // claimSQL
	insertRuns *sql.Stmt // claimRunsSQL
	updateJob  *sql.Stmt // updateJobSQL
	insertRun  *sql.Stmt // insertRunSQL
	endRun     *sql.Stmt // endRunSQL
	liveRun    *sql.Stmt // liveRunSQL
	heartbeat  *sql.Stmt // heartbeatSQL
}

// prepare prepares the statements on w. It must run before any transaction
// holds w's one connection.
func (st *statements) prepare(ctx context.Context, w *sql.DB) error {
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&st.insertJob, insertJobSQL},
		{&st.jobByKey, `SELECT ` + jobColumns + ` FROM jobs WHERE idempotency_key = ? AND state <> 'cancelled'`},
		{&st.leasedJobs, leasedJobsSQL},
		{&st.claim, claimSQL},
		{&st.insertRuns, claimRunsSQL},
		{&st.updateJob, updateJobSQL},
		{&st.insertRun, insertRunSQL},
		{&st.endRun, endRunSQL},
		{&st.liveRun, liveRunSQL},
		{&st.heartbeat, heartbeatSQL},
	} {
		s, err := w.PrepareContext(ctx, p.q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", strings.Fields(p.q)[:3], err)
		}
		*p.dst = s
	}
	return nil
}
