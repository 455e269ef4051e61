package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
)

// TestMigrate_RunIDsNeverReused migrates a file of the schema before run
// ids were never given again (15): its runs keep their ids and columns,
// the table its indexes, and the next run's id is above every id a run
// left, or an event of a run deleted before the migration, names.
func TestMigrate_RunIDsNeverReused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sked.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	claimFinish := func(s *sqlite.Store, p db.JobCreateParams) db.Claim {
		t.Helper()
		if _, _, err := s.JobCreate(ctx, p); err != nil {
			t.Fatal(err)
		}
		c, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Max: 1, Lease: time.Minute})
		if err != nil || len(c) != 1 {
			t.Fatalf("claim: %v, %v", c, err)
		}
		if _, err := s.RunFinish(ctx, db.RunFinishParams{JobID: c[0].Job.ID, Generation: c[0].Job.LeaseGeneration,
			Outcome: db.OutcomeSucceeded}); err != nil {
			t.Fatal(err)
		}
		return c[0]
	}
	kept := claimFinish(s, db.JobCreateParams{Type: "t"})
	// Its events name its run: started, succeeded.
	named := claimFinish(s, db.JobCreateParams{Type: "t", Notify: &db.Notify{Ping: "https://hc.example/x"}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	raw, err := sql.Open("sqlite", sqlite.FileURI(path, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	p, err := sqlite.Migrations(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 15); err != nil {
		t.Fatalf("migrate down to 15: %v", err)
	}
	// The newest run deleted, as schema 15 let a prune delete it, while
	// events still name it.
	if _, err := raw.ExecContext(ctx, `DELETE FROM runs WHERE id = ?`, named.RunID); err != nil {
		t.Fatal(err)
	}

	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("open, migrating from 15: %v", err)
	}
	defer s.Close()
	runs, _, err := s.RunList(ctx, db.RunListParams{JobID: kept.Job.ID, Limit: 10})
	if err != nil || len(runs) != 1 || runs[0].ID != kept.RunID || runs[0].Outcome != db.OutcomeSucceeded ||
		runs[0].WorkerID != "w" || runs[0].FinishedAt == nil {
		t.Fatalf("runs of the job after the migration = %+v, %v; want its run %d, succeeded", runs, err, kept.RunID)
	}
	got, err := s.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want, err := os.ReadFile("../../schema.sql"); err != nil || got != string(want) {
		t.Fatalf("schema after migrating from 15:\n%s\nwant schema.sql (%v)", got, err)
	}
	if next := claimFinish(s, db.JobCreateParams{Type: "t"}); next.RunID <= named.RunID {
		t.Fatalf("run id after the migration = %d; want above %d, which events name", next.RunID, named.RunID)
	}
}
