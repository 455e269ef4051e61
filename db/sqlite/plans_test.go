package sqlite_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

// TestStore_HotQueryPlans checks the plans of the statements that run for
// every job: the claim reads the partial index of waiting jobs, and every
// other statement finds its rows by key. None scans a table or sorts, so a
// million waiting jobs or a long history cost them nothing.
func TestStore_HotQueryPlans(t *testing.T) {
	s := sqlitetest.Open(t)
	for _, tc := range []struct {
		name, q string
		want    []string // substrings of the plan
	}{
		{"claim any type", sqlite.ClaimSQL(0), []string{"INDEX jobs_ready (next_run_at<?)", "jobs USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"claim two types", sqlite.ClaimSQL(2), []string{"INDEX jobs_ready (next_run_at<?)", "jobs USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"insert runs", sqlite.InsertRunsSQL, []string{"sqlite_autoindex_jobs_1 (id=?)"}},
		{"leased job", sqlite.LeasedJobSQL, []string{"sqlite_autoindex_jobs_1 (id=?)"}},
		{"finish job", sqlite.FinishJobSQL, []string{"sqlite_autoindex_jobs_1 (id=?)"}},
		{"finish run", sqlite.FinishRunSQL, []string{"INDEX runs_job (job_id=?)"}},
	} {
		// The plan is made for unknown values; every argument is NULL.
		plan, err := s.ExplainQueryPlan(context.Background(), tc.q, make([]any, strings.Count(tc.q, "?"))...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan lacks %q:\n%s", tc.name, w, plan)
			}
		}
		for _, bad := range []string{"SCAN jobs", "SCAN runs", "TEMP B-TREE"} {
			if strings.Contains(plan, bad) {
				t.Errorf("%s: plan has %q:\n%s", tc.name, bad, plan)
			}
		}
	}
}
