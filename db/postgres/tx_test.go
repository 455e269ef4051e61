package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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
