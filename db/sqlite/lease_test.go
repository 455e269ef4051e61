package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

// TestStore_HeartbeatOfALeaseOfUnknownLength: a job claimed by a sked that
// did not keep the claim's lease length (lease_ms NULL, as the upgrade
// leaves it) is renewed, by a heartbeat that names no lease, for
// db.DefaultLease, as before the upgrade.
func TestStore_HeartbeatOfALeaseOfUnknownLength(t *testing.T) {
	ctx := context.Background()
	s, raw := sqlitetest.OpenRaw(t)
	clock := dbtest.NewClock(dbtest.Start)
	s.NowFunc = clock.Now
	if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t"}); err != nil {
		t.Fatal(err)
	}
	c, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Max: 1, Lease: 5 * time.Minute})
	if err != nil || len(c) != 1 {
		t.Fatalf("RunClaim = %d claims, %v; want 1", len(c), err)
	}
	if _, err := raw.Exec(`UPDATE jobs SET lease_ms = NULL WHERE id = ?`, c[0].Job.ID); err != nil {
		t.Fatal(err)
	}
	clock.Advance(290 * time.Second) // the 5m lease has 10s left: 30s from now is longer
	hb, err := s.RunHeartbeat(ctx, db.RunHeartbeatParams{JobID: c[0].Job.ID, Generation: c[0].Job.LeaseGeneration, Remote: true})
	if want := clock.Now().Add(db.DefaultLease); err != nil || !hb.LeaseUntil.Equal(want) {
		t.Fatalf("heartbeat without a lease = %+v, %v; want the lease until %v (the default lease from now)", hb, err, want)
	}
}
