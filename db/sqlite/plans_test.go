package sqlite_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

// TestStore_HotQueryPlans checks the plans of the statements that run for
// every job: the claim and the next-due lookup read each type's stretch of
// the partial index of waiting jobs, and every other statement finds its
// rows by key. None scans a table, and only the claim sorts, the few jobs
// it picked from the index, so a million waiting jobs, of this type or
// another, or a long history cost them nothing.
func TestStore_HotQueryPlans(t *testing.T) {
	s := sqlitetest.Open(t)
	for _, tc := range []struct {
		name, q string
		want    []string // substrings of the plan
	}{
		{"claim", sqlite.ClaimSQL, []string{"INDEX jobs_ready (type=? AND next_run_at<?)", "jobs USING INTEGER PRIMARY KEY (rowid=?)",
			"INDEX jobs_ready (type>?)"}},
		{"next due", sqlite.NextDueSQL, []string{"INDEX jobs_ready (type=?)", "INDEX jobs_ready (type>?)"}},
		{"claim's runs", sqlite.ClaimRunsSQL, []string{"sqlite_autoindex_jobs_1 (id=?)"}},
		{"leased jobs", sqlite.LeasedJobsSQL, []string{"sqlite_autoindex_jobs_1 (id=?)"}},
		{"update job", sqlite.UpdateJobSQL, []string{"sqlite_autoindex_jobs_1 (id=?)"}},
		{"heartbeat", sqlite.HeartbeatSQL, []string{"sqlite_autoindex_jobs_1 (id=?)"}},
		{"end run", sqlite.EndRunSQL, []string{"INDEX runs_live (job_id=? AND generation=?)"}},
		{"live run", sqlite.LiveRunSQL, []string{"INDEX runs_live (job_id=? AND generation=?)"}},
	} {
		// The plan is made for unknown values; every argument is NULL.
		plan, err := s.ExplainQueryPlan(context.Background(), tc.q, make([]any, params(tc.q))...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan lacks %q:\n%s", tc.name, w, plan)
			}
		}
		for _, bad := range []string{"SCAN jobs", "SCAN runs", "TEMP B-TREE"} {
			if strings.Contains(plan, bad) && (tc.name != "claim" || bad != "TEMP B-TREE" || strings.Count(plan, bad) > 1) {
				t.Errorf("%s: plan has %q:\n%s", tc.name, bad, plan)
			}
		}
	}
}

// TestStats_SchedulePlans: the schedules' figures of Stats read the rows
// of the jobs with missed slots (a search of jobs_recurring either side
// of zero), and of the failing and the quiet jobs only, through their
// partial indexes: not every recurring job's row.
func TestStats_SchedulePlans(t *testing.T) {
	s := sqlitetest.Open(t)
	for q, want := range map[string][]string{
		sqlite.MissedSlotsSQL: {"SEARCH jobs USING INDEX jobs_recurring (missed_slots>?)", "SEARCH jobs USING INDEX jobs_recurring (missed_slots<?)"},
		sqlite.FailingSQL:     {"SCAN jobs USING INDEX jobs_failing"},
		sqlite.QuietSQL:       {"SCAN jobs USING INDEX jobs_quiet"},
	} {
		plan, err := s.ExplainQueryPlan(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(plan, w) || strings.Contains(plan, "SCAN jobs\n") {
				t.Errorf("the plan of %s lacks %q:\n%s", q, w, plan)
			}
		}
	}
}

// TestJobsPage_FilterPlans: a page of GET /jobs filtered on a type or on
// the schedules' health reads an index of just those jobs, newest first,
// and never the whole table for a filter few jobs match: a type through
// jobs_type_id (also with a state, but ready: jobs_ready), the failing
// and the quiet schedules through jobs_failing and jobs_quiet. Nor does
// any sort.
func TestJobsPage_FilterPlans(t *testing.T) {
	s := sqlitetest.Open(t)
	for _, tc := range []struct {
		p    db.JobListParams
		want string
	}{
		{db.JobListParams{Type: "x"}, "SEARCH jobs USING INDEX jobs_type_id (type=?)"},
		{db.JobListParams{Type: "x", Cursor: "j"}, "SEARCH jobs USING INDEX jobs_type_id (type=? AND id<?)"},
		{db.JobListParams{Type: "x", State: db.StateDead}, "SEARCH jobs USING INDEX "},
		{db.JobListParams{Health: db.HealthFailing}, "SCAN jobs USING INDEX jobs_failing"},
		{db.JobListParams{Health: db.HealthQuiet}, "SCAN jobs USING INDEX jobs_quiet"},
		{db.JobListParams{Health: db.HealthQuiet, Cursor: "j"}, "jobs_quiet"},
	} {
		q, args := sqlite.JobsPageSQL(tc.p, 50)
		plan, err := s.ExplainQueryPlan(context.Background(), q, args...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, tc.want) || strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "sqlite_autoindex_jobs_1") {
			t.Errorf("%+v: the plan lacks %q, or walks every job or sorts:\n%s", tc.p, tc.want, plan)
		}
	}
}

// params counts the parameters of q as SQLite numbers them: ?N is N, a
// plain ? is one more than the highest before it.
func params(q string) int {
	n := 0
	for _, m := range regexp.MustCompile(`\?(\d*)`).FindAllStringSubmatch(q, -1) {
		if k, err := strconv.Atoi(m[1]); err == nil {
			n = max(n, k)
		} else {
			n++
		}
	}
	return n
}
