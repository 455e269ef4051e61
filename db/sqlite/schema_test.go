package sqlite_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

var update = flag.Bool("update", false, "rewrite schema.sql from the migrations")

// TestSchema keeps ../../schema.sql equal to what the migrations produce.
// Run with -update after adding a migration.
func TestSchema(t *testing.T) {
	s := sqlitetest.Open(t)
	got, err := s.Schema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const path = "../../schema.sql"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("schema.sql is out of date; run go test ./db/sqlite -run TestSchema -update\ngot:\n%s", got)
	}
}

// TestStore_QueryPlans checks that the reaper reads the partial index of
// running jobs, not the table.
func TestStore_QueryPlans(t *testing.T) {
	s := sqlitetest.Open(t)
	plan, err := s.ExplainQueryPlan(context.Background(), `SELECT id FROM jobs INDEXED BY jobs_running
		WHERE state = 'running' AND lease_until < '2026' ORDER BY lease_until LIMIT 500`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "INDEX jobs_running") || strings.Contains(plan, "SCAN jobs\n") || strings.Contains(plan, "TEMP B-TREE") {
		t.Fatalf("the reaper's plan does not use the partial index:\n%s", plan)
	}
}
