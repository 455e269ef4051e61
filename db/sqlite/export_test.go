package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/sked-dev/sked/db"
)

// The hot statements, for the plan checks of plans_test.go.
var ClaimSQL, NextDueSQL = claimSQL, nextDueSQL

// The other hot statements, for the same checks.
const (
	ClaimRunsSQL  = claimRunsSQL
	LeasedJobsSQL = leasedJobsSQL
	UpdateJobSQL  = updateJobSQL
	EndRunSQL     = endRunSQL
	LiveRunSQL    = liveRunSQL
	HeartbeatSQL  = heartbeatSQL
)

// The schedules' figures of Stats, for their plan checks.
const (
	MissedSlotsSQL = missedSlotsSQL
	FailingSQL     = failingSQL
	QuietSQL       = quietSQL
)

// JobsPageSQL is the statement that reads a page of jobs, and its
// arguments.
func JobsPageSQL(p db.JobListParams, limit int) (string, []any) { return jobsPageSQL(p, limit) }

// ParseFixed exposes parseFixed to FuzzParseFixed.
var ParseFixed = parseFixed

// Schema returns the CREATE statements of sked's tables and indexes, as
// schema.sql holds them.
func (s *Store) Schema(ctx context.Context) (string, error) {
	rows, err := s.d.read.QueryContext(ctx, `SELECT sql FROM sqlite_schema
		WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'goose_%'
		ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, name`)
	if err != nil {
		return "", fmt.Errorf("read schema: %w", err)
	}
	defer rows.Close()
	var b strings.Builder
	b.WriteString("-- The SQLite schema as the migrations in db/sqlite/migrations leave it.\n-- Generated: go test ./db/sqlite -run TestSchema -update\n")
	for rows.Next() {
		var stmt string
		if err := rows.Scan(&stmt); err != nil {
			return "", fmt.Errorf("read schema: %w", err)
		}
		b.WriteString("\n" + stmt + ";\n")
	}
	return b.String(), rows.Err()
}

// ExplainQueryPlan returns SQLite's plan for q with args, one step a line.
func (s *Store) ExplainQueryPlan(ctx context.Context, q string, args ...any) (string, error) {
	rows, err := s.d.read.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return "", fmt.Errorf("explain: %w", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", fmt.Errorf("explain: %w", err)
		}
		b.WriteString(detail + "\n")
	}
	return b.String(), rows.Err()
}
