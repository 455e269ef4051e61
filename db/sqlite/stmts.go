package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
)

// statements are the hot queries, prepared once on the writer connection so
// that SQLite parses and plans them once. Inside a transaction they are used
// through tx.StmtContext, which reuses the preparation because the writer has
// exactly one connection.
type statements struct {
	insertJob    *sql.Stmt // insertJobSQL
	jobByKey     *sql.Stmt // a job by idempotency key
	leasedJob    *sql.Stmt // a job by id under a live lease generation
	runStartedAt *sql.Stmt // when the run of a lease generation started
	insertRuns   *sql.Stmt // the run rows of a claim
	finishJob    *sql.Stmt // a finished job moved on, fenced
	finishRun    *sql.Stmt // a run closed, fenced
	heartbeat    *sql.Stmt // a lease extended, fenced

	claimMu sync.Mutex
	claim   map[int]*sql.Stmt // RunClaim's UPDATE by number of types; guarded by claimMu
}

// prepare prepares the fixed statements on w. It must run before any
// transaction holds w's one connection.
func (st *statements) prepare(ctx context.Context, w *sql.DB) error {
	st.claim = map[int]*sql.Stmt{}
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&st.insertJob, insertJobSQL},
		{&st.jobByKey, `SELECT ` + jobColumns + ` FROM jobs WHERE idempotency_key = ?`},
		{&st.leasedJob, leasedJobSQL},
		{&st.runStartedAt, `SELECT started_at FROM runs WHERE job_id = ? AND generation = ? AND outcome = 'running'`},
		{&st.insertRuns, insertRunsSQL},
		{&st.finishJob, finishJobSQL},
		{&st.finishRun, finishRunSQL},
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

// claimStmt returns RunClaim's UPDATE for n types, preparing it on w the
// first time. It must not be called inside a transaction on w.
func (st *statements) claimStmt(ctx context.Context, w *sql.DB, n int) (*sql.Stmt, error) {
	st.claimMu.Lock()
	defer st.claimMu.Unlock()
	if s, ok := st.claim[n]; ok {
		return s, nil
	}
	s, err := w.PrepareContext(ctx, claimSQL(n))
	if err != nil {
		return nil, fmt.Errorf("prepare claim: %w", err)
	}
	st.claim[n] = s
	return s, nil
}
