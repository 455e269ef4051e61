package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestTx_Plans: the plans a transaction keeps for its busiest statements
// reach rows through an index or by key, whatever the tables' statistics
// say: here none has been gathered since 2,000 jobs were enqueued at once
// and half of them claimed. No statement scans a whole table or joins by
// hash or merge; the claim walks each type's stretch of jobs_ready in due
// order and sorts only what it picked there (a sort of jobs would read
// every due job).
func TestTx_Plans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := postgrestest.Open(t)
	enqueue(t, s, 2)
	claims, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Max: db.MaxBatch, Lease: time.Minute})
	if err != nil || len(claims) != db.MaxBatch {
		t.Fatalf("claimed %d jobs, %v", len(claims), err)
	}
	n := len(claims)
	ids, gens, states, outcomes := make([]string, n), make([]int64, n), make([]string, n), make([]string, n)
	for i, c := range claims {
		ids[i], gens[i], states[i], outcomes[i] = c.Job.ID, c.Job.LeaseGeneration, string(db.StateRunning), string(db.OutcomeSucceeded)
	}
	texts, times, flags := make([]*string, n), make([]*time.Time, n), make([]bool, n)
	now := s.Now()
	for _, c := range []struct {
		name, sql, uses string
		setup           []string
		args            []any
	}{
		{"claim", postgres.ClaimSQL, "Index Cond: ((type = (unnest($5))) AND (next_run_at <= (COALESCE($3, now()) + ", []string{postgres.ClaimSettings},
			[]any{"w", time.Minute.Microseconds(), now, int64(0), []string{}, 100}},
		{"leased jobs", postgres.LeasedJobsSQL, "jobs_pkey", nil, []any{ids, gens}},
		{"end runs", postgres.EndRunsSQL, "runs_lease", nil, []any{now, ids, gens, outcomes, texts, texts, flags}},
		{"update jobs", postgres.UpdateJobsSQL, "Index Scan", nil, []any{ids, states, gens, states, times, times,
			make([]int32, n), texts, times, flags, gens, texts, texts, times, times, times, flags, times, times, times, flags, times, n}},
	} {
		plan, err := postgres.Explain(ctx, s, c.setup, c.sql, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, bad := range []string{"Seq Scan", "Hash Join", "Merge Join", "Sort Key: jobs", "Sort Key: j."} {
			if strings.Contains(plan, bad) {
				t.Errorf("%s: the plan has a %s:\n%s", c.name, bad, plan)
			}
		}
		if c.name == "claim" && strings.Count(plan, "Sort Key:") != strings.Count(plan, "Sort Key: picked.next_run_at") {
			t.Errorf("claim: the plan sorts more than the picked jobs:\n%s", plan)
		}
		if !strings.Contains(plan, c.uses) {
			t.Errorf("%s: the plan does not use %s:\n%s", c.name, c.uses, plan)
		}
	}
}

// TestJobsPage_PlanByState: a page of the jobs of one state reads an
// index that holds that state, also in a plan made for any arguments (as
// the store's transactions force): running jobs, which jobs_state_id
// leaves out, through jobs_running; the others through jobs_state_id. A
// statement with the state as an argument could use neither, and walked
// every job newer than the page's.
func TestJobsPage_PlanByState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := postgrestest.Open(t)
	enqueue(t, s, 2)
	for state, index := range map[db.JobState]string{db.StateRunning: "jobs_running", db.StateReady: "jobs_state_id", db.StateDead: "jobs_state_id"} {
		sql, args := postgres.JobsPageSQL(db.JobListParams{State: state}, 50)
		plan, err := postgres.Explain(ctx, s, nil, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", state, err)
		}
		if !strings.Contains(plan, index) || strings.Contains(plan, "Seq Scan") {
			t.Errorf("a page of %s jobs does not read %s:\n%s", state, index, plan)
		}
	}
}

// TestStats_SchedulePlan: the schedules' figures of Stats read the jobs
// with missed slots (jobs_recurring either side of zero), and the failing
// and the quiet jobs through their partial indexes, not every recurring
// or watched job: here 1,000 watched schedules, none in trouble, beside
// 1,000 one-off jobs, analyzed.
func TestStats_SchedulePlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := watchedAmongJobs(t)
	plan, err := postgres.Explain(ctx, s, nil, postgres.SchedulesStatsSQL)
	if err != nil {
		t.Fatal(err)
	}
	for _, index := range []string{"jobs_recurring", "jobs_failing", "jobs_quiet"} {
		if !strings.Contains(plan, index) || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "jobs_watched") {
			t.Errorf("the plan does not read %s alone:\n%s", index, plan)
		}
	}
}

// TestJobsPage_PlanByHealth: a page of the failing or the quiet schedules
// reads their partial index, newest first, not every job: here among
// 1,000 watched schedules and 1,000 one-off jobs, analyzed. (A page of a
// type walks jobs_pkey, newest first, on PostgreSQL: an index of types
// would take an entry at each claim and finish, see docs/postgresql.md.)
func TestJobsPage_PlanByHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := watchedAmongJobs(t)
	for health, index := range map[string]string{db.HealthFailing: "jobs_failing", db.HealthQuiet: "jobs_quiet"} {
		sql, args := postgres.JobsPageSQL(db.JobListParams{Health: health}, 50)
		plan, err := postgres.Explain(ctx, s, nil, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", health, err)
		}
		if !strings.Contains(plan, index) || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Sort") {
			t.Errorf("a page of %s schedules does not read %s alone:\n%s", health, index, plan)
		}
	}
}

// TestTx_PrunePlan: the prune's read of finished jobs walks the (state,
// id) index from the oldest of those jobs up to the ceiling of the ids it
// may delete, whatever else is old: by id alone (jobs_pkey) it would walk
// every older job of any state each pass, such as a dead-letter list kept
// for good (measured: 500,000 dead jobs, 0.28 s a pass that deletes
// nothing).
func TestTx_PrunePlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, url := openEnqueued(t, 2)
	// Half the jobs went dead long ago, half finished just now.
	postgrestest.Exec(t, url, `UPDATE jobs SET state = CASE WHEN id < (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY id) FROM jobs)
		THEN 'dead' ELSE 'done' END, next_run_at = NULL`, `ANALYZE jobs`)
	now := s.Now()
	plan, err := postgres.Explain(ctx, s, nil, postgres.PruneJobsSQL, now.Add(-time.Hour), 100, db.IDCeiling(now))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Index Cond: ((state = ANY ('{done,cancelled}'::text[])) AND (id < $3))"; !strings.Contains(plan, want) {
		t.Errorf("the prune's plan does not read %s:\n%s", want, plan)
	}
}

// openEnqueued opens a store in a schema of its own, at url, with batches
// of enqueue's jobs.
func openEnqueued(t *testing.T, batches int) (s *postgres.Store, url string) {
	url = postgrestest.URL(t)
	s = postgrestest.OpenURL(t, url)
	enqueue(t, s, batches)
	return s, url
}

// watchedAmongJobs opens a store with db.MaxBatch one-off jobs and as
// many schedules, every minute and watched for an hour, none in trouble,
// analyzed.
func watchedAmongJobs(t *testing.T) *postgres.Store {
	t.Helper()
	s, url := openEnqueued(t, 1)
	ps := make([]db.JobCreateParams, db.MaxBatch)
	for i := range ps {
		ps[i] = db.JobCreateParams{Type: "plan", Schedule: "* * * * *", ExpectSuccessWithin: time.Hour}
	}
	if _, err := s.JobCreateBatch(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	postgrestest.Exec(t, url, `ANALYZE jobs`)
	return s
}

// enqueue creates batches of db.MaxBatch jobs of type plan in s, due now.
func enqueue(t *testing.T, s *postgres.Store, batches int) {
	t.Helper()
	for range batches {
		ps := make([]db.JobCreateParams, db.MaxBatch)
		for i := range ps {
			ps[i] = db.JobCreateParams{Type: "plan"}
		}
		if _, err := s.JobCreateBatch(context.Background(), ps); err != nil {
			t.Fatal(err)
		}
	}
}
