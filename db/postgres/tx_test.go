package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/engine"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestTx_FenceFailsTheCommit writes, in one transaction, a job update whose
// fence does not hold (another generation) and then closes the job's run.
// The writes are sent together with the COMMIT, so the fence's failure must
// be the server's own error, or the run's close would land without the job.
func TestTx_FenceFailsTheCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := postgrestest.Open(t)
	j, c := createClaimed(t, s)
	lease := engine.Lease{JobID: j.ID, Generation: c.Job.LeaseGeneration}
	for _, tc := range []struct {
		name  string
		write func(engine.Tx) error
	}{
		{"update", func(tx engine.Tx) error {
			stale := c.Job
			stale.State, stale.LeaseGeneration = db.StateDone, stale.LeaseGeneration+1
			return tx.JobsUpdate(ctx, []engine.JobUpdate{{Job: stale, From: db.StateRunning}})
		}},
		{"redefine", func(tx engine.Tx) error {
			stale := c.Job
			stale.LeaseGeneration++
			return tx.JobRedefine(ctx, engine.JobUpdate{Job: stale, From: db.StateRunning})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := postgres.InTx(ctx, s, func(tx engine.Tx) error {
				if err := tc.write(tx); err != nil {
					return err
				}
				return tx.RunsEnd(ctx, []engine.RunEnd{{Lease: lease, Outcome: db.OutcomeSucceeded}})
			})
			if err == nil {
				t.Fatal("a transaction whose fence did not hold committed")
			}
			runs, _, err := s.RunList(ctx, db.RunListParams{JobID: j.ID})
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != 1 || runs[0].Outcome != db.OutcomeRunning {
				t.Fatalf("runs after the failed transaction: %+v; want the one run still running", runs)
			}
		})
	}
}

// TestTx_BeginsWithItsFirstStatement checks that a transaction sends its
// BEGIN and its reading of the clock with its first statement, not in a
// round trip of their own: until then the server holds no transaction of
// the store's, and once the statement ran, Now is the transaction's start
// as the server has it (now()). A group of completions, which reads its
// jobs before it needs the time, then takes two round trips, not three.
func TestTx_BeginsWithItsFirstStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := poolOfTwo(t, "tx_first_statement")
	err := postgres.InTx(ctx, s, func(tx engine.Tx) error {
		var open int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'tx_first_statement' AND state LIKE 'idle in transaction%'`).Scan(&open); err != nil {
			return err
		}
		if open != 0 {
			t.Errorf("%d transactions open on the server before the first statement; want none", open)
		}
		jobs, err := tx.JobsLeased(ctx, []engine.Lease{{JobID: "none", Generation: 1}})
		if err != nil || len(jobs) != 0 {
			return fmt.Errorf("read leased jobs: %v, %w", jobs, err)
		}
		var start time.Time
		if err := c.QueryRow(ctx, `SELECT xact_start FROM pg_stat_activity
			WHERE application_name = 'tx_first_statement' AND state LIKE 'idle in transaction%'`).Scan(&start); err != nil {
			return fmt.Errorf("the transaction's start: %w", err)
		}
		if got := tx.Now(); !got.Equal(start) {
			t.Errorf("Now = %s, want the transaction's start %s", got, start.UTC())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTx_RunsFinishBesideTheirRows claims a batch of jobs, whose runs are
// written together onto fresh pages of runs, and ends every run in one
// transaction, as a group of completions does. Ending a run changes no
// indexed column, so it is written beside the row it replaces (a HOT
// update, no new index entries) wherever its page has room: runs keeps
// half of each page free for that (fillfactor 50; at 70, about half the
// runs moved to other pages, each with three new index entries). Pass:
// at least 3 in 4 runs are still on the page they were claimed on.
func TestTx_RunsFinishBesideTheirRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := poolOfTwo(t, "runs_beside")
	const n = 200
	ps := make([]db.JobCreateParams, n)
	for i := range ps {
		ps[i] = db.JobCreateParams{Type: "beside"}
	}
	if _, err := s.JobCreateBatch(ctx, ps); err != nil {
		t.Fatal(err)
	}
	claims, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"beside"}, Max: n, Lease: time.Hour})
	if err != nil || len(claims) != n {
		t.Fatalf("claimed %d of %d: %v", len(claims), n, err)
	}
	ids := make([]int64, n)
	ends := make([]engine.RunEnd, n)
	for i, cl := range claims {
		ids[i] = cl.RunID
		ends[i] = engine.RunEnd{Lease: engine.Lease{JobID: cl.Job.ID, Generation: cl.Job.LeaseGeneration}, Outcome: db.OutcomeSucceeded}
	}
	pages := func() map[int64]string {
		rows, err := c.Query(ctx, `SELECT id, split_part(trim('()' FROM ctid::text), ',', 1) FROM runs WHERE id = ANY($1)`, ids)
		if err != nil {
			t.Fatal(err)
		}
		var (
			id   int64
			page string
		)
		out := map[int64]string{}
		if _, err := pgx.ForEachRow(rows, []any{&id, &page}, func() error { out[id] = page; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := pages()
	if err := postgres.InTx(ctx, s, func(tx engine.Tx) error { return tx.RunsEnd(ctx, ends) }); err != nil {
		t.Fatal(err)
	}
	stayed := 0
	for id, page := range pages() {
		if before[id] == page {
			stayed++
		}
	}
	if stayed < n*3/4 {
		t.Errorf("%d of %d ended runs stayed on their page; want at least %d", stayed, n, n*3/4)
	}
}

// TestTx_ClaimReadsTheClock claims a job as a transaction's first
// statement: the claim reads the transaction's clock itself (now()), so
// that no round trip reads it first, and leases the job from it. Pass: no
// transaction is open before the claim, and the lease ends a lease's
// length after the transaction's start, which Now answers.
func TestTx_ClaimReadsTheClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := poolOfTwo(t, "claim_clock")
	if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "clock"}); err != nil {
		t.Fatal(err)
	}
	openTxs := func() (n int) {
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'claim_clock' AND state LIKE 'idle in transaction%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	err := postgres.InTx(ctx, s, func(tx engine.Tx) error {
		if n := openTxs(); n != 0 {
			t.Errorf("%d transactions open before the claim; want none", n)
		}
		claims, err := tx.JobsClaim(ctx, engine.ClaimArgs{Worker: "w", Types: []string{"clock"}, Max: 1, Lease: time.Minute})
		if err != nil || len(claims) != 1 {
			return fmt.Errorf("claimed %d: %w", len(claims), err)
		}
		if n := openTxs(); n != 1 {
			t.Errorf("%d transactions open after the claim; want 1", n)
		}
		if got, want := *claims[0].Job.LeaseUntil, tx.Now().Add(time.Minute); !got.Equal(want) {
			t.Errorf("lease until %s, want the transaction's start and a minute, %s", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTx_QuietSweepReadsTheClock sweeps for quiet schedules on a store
// with no clock given, the database's own, as in production: the sweep's
// first statement selects the schedules whose window ran out by the
// transaction's clock, which that statement is the first to read. Pass: a
// schedule watched for an hour whose window began three hours ago goes
// quiet (with the clock's field read before the statement, none did).
func TestTx_QuietSweepReadsTheClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := poolOfTwo(t, "quiet_clock")
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "nightly", Schedule: "0 3 * * *", ExpectSuccessWithin: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `UPDATE jobs SET created_at = now() - interval '3 hours', watch_from = NULL WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	quiet, err := s.JobQuietSweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(quiet) != 1 || quiet[0].ID != j.ID {
		t.Errorf("quiet sweep found %d schedules quiet (%v); want %s", len(quiet), quiet, j.ID)
	}
}

// TestTx_NowWhenTheServerIsGone reads the clock of a transaction whose
// connection the server ended before its BEGIN was sent: the reading
// fails, and so does the transaction. Pass: InTx fails, and Now answered a
// time callers can compute with, this machine's (it was the zero time, on
// which a job's new id panicked).
func TestTx_NowWhenTheServerIsGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := poolOfTwo(t, "now_gone")
	var now time.Time
	err := postgres.InTx(ctx, s, func(tx engine.Tx) error {
		if _, err := c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'now_gone'`); err != nil {
			t.Fatal(err)
		}
		now = tx.Now()
		return nil
	})
	if err == nil {
		t.Error("InTx succeeded on a connection the server ended")
	}
	if d := time.Since(now); d < -time.Minute || d > time.Minute {
		t.Errorf("Now = %s when the reading failed; want about this machine's time", now)
	}
}

// TestTx_NothingSentAfterTheClockFailed reads the clock of a transaction
// whose queued statements the server refused before running any (a
// statement that does not prepare): its BEGIN was not run either. The
// transaction goes on, as callers of Now do, and writes the last sweep's
// time with its next statement. Pass: InTx fails with the first failure
// (the missing table), and the write did not land (it was sent without a
// transaction around it, and committed on its own).
func TestTx_NothingSentAfterTheClockFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := poolOfTwo(t, "now_refused")
	err := postgres.InTx(ctx, s, func(tx engine.Tx) error {
		postgres.Queue(tx, `UPDATE no_such_table SET x = 1`)
		now := tx.Now()
		if err := tx.SetSweptAt(ctx, now); err != nil {
			return err
		}
		_, err := tx.SweptAt(ctx)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "no_such_table") {
		t.Errorf("InTx = %v; want the failure of the statement that did not prepare", err)
	}
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM watch`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d sweeps recorded by a transaction that failed; want none", n)
	}
}

// TestTx_StaleWorkersSeenAtOnce records, at once in two transactions, two
// workers that were last seen longer ago than db.WorkerForgetAfter (as
// after a long outage): each transaction also forgets the workers not seen
// since then but its own. Before, each forgot first, locking the other's
// row, and then waited for its own row, which the other held: PostgreSQL
// found the deadlock and failed one (in the first rounds, as a rule). Pass:
// a hundred rounds in which both transactions commit.
func TestTx_StaleWorkersSeenAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := poolOfTwo(t, "stale_workers")
	old := time.Now().Add(-30 * 24 * time.Hour)
	for round := range 100 {
		if _, err := c.Exec(ctx, `DELETE FROM workers`); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, `INSERT INTO workers (id, types, first_seen_at, last_seen_at)
			VALUES ('a', '{}', $1, $1), ('b', '{}', $1, $1)`, old); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, id := range []string{"a", "b"} {
			wg.Go(func() {
				errs[i] = postgres.InTx(ctx, s, func(tx engine.Tx) error {
					if err := tx.WorkerSeen(ctx, db.Worker{ID: id}, time.Now().Add(-db.WorkerForgetAfter)); err != nil {
						return err
					}
					_, err := tx.SweptAt(ctx)
					return err
				})
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
