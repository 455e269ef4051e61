package postgres_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
)

// holdCommits makes the COMMIT of every transaction that claims a job
// matching when (a condition on NEW, a row of jobs) wait for advisory lock
// key (one a test: the locks are the server's), which it takes on admin
// until release is called; waiting returns the pid of the first backend
// found waiting so. A cancel of the COMMIT ends the wait and the COMMIT
// goes on, as one that arrives as the server writes the commit does.
func holdCommits(t *testing.T, admin *pgx.Conn, key int, when string) (waiting func() int, release func()) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_advisory_xact_lock(` + strconv.Itoa(key) + `); RETURN NULL;
			EXCEPTION WHEN query_canceled THEN RETURN NULL; END $$`,
		`CREATE CONSTRAINT TRIGGER hold_commit AFTER UPDATE ON jobs DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW WHEN (NEW.state = 'running' AND ` + when + `) EXECUTE FUNCTION hold_commit()`,
		`SELECT pg_advisory_lock(` + strconv.Itoa(key) + `)`,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	waiting = func() int {
		for {
			var pid int
			err := admin.QueryRow(ctx, `SELECT pid FROM pg_locks
				WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`, key).Scan(&pid)
			if err == nil {
				return pid
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	release = func() {
		if _, err := admin.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
			t.Fatal(err)
		}
	}
	return waiting, release
}

// claimsAfterQuick is a claim of a one-off job, which the quick claim
// takes, and a schedule's, left to the ordinary claim after it, by a worker
// recorded already (else the quick claim is not tried).
func claimsAfterQuick(t *testing.T, s *postgres.Store) db.RunClaimParams {
	t.Helper()
	ctx := context.Background()
	p := db.RunClaimParams{WorkerID: "box/1", Types: []string{"q"}, Max: 5, Lease: time.Minute, Ahead: 2 * time.Minute}
	if _, err := s.RunClaim(ctx, p); err != nil { // records the worker
		t.Fatal(err)
	}
	for _, c := range []db.JobCreateParams{{Type: "q"}, {Type: "q", Schedule: "* * * * *"}} {
		if _, _, err := s.JobCreate(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestClaimQuick_RestCommitLost: a claim whose quick part leased a one-off
// job and whose ordinary part, for a schedule, lost its connection while
// its COMMIT was out. Pass: the claim answers db.ErrCommitUnknown, so that
// its caller looks up what its worker holds. It used to answer the quick
// claim's job alone, without an error: had the COMMIT landed, the
// schedule's lease would have been the worker's, unknown to it, until it
// ran out and was charged as a failed attempt.
func TestClaimQuick_RestCommitLost(t *testing.T) {
	t.Parallel()
	s, admin := poolOfTwo(t, "rest_lost")
	p := claimsAfterQuick(t, s)
	waiting, release := holdCommits(t, admin, 4241, `NEW.schedule IS NOT NULL`)
	defer release()
	type answer struct {
		claims []db.Claim
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		claims, err := s.RunClaim(context.Background(), p)
		done <- answer{claims, err}
	}()
	if _, err := admin.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, waiting()); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if !errors.Is(got.err, db.ErrCommitUnknown) {
		t.Errorf("claim whose second COMMIT's connection broke: %d claims, err %v; want db.ErrCommitUnknown", len(got.claims), got.err)
	}
}

// TestClaimQuick_CommitOutWhenTimeRanOut: a quick claim whose context ends
// while its COMMIT, sent with the claim, is on the server, which commits
// it all the same (pgx's cancel of the statement came too late). Pass:
// the claim answers db.ErrCommitUnknown, and the job is leased. It used to
// answer the context's error, as though nothing was claimed: the job was
// leased to a worker that never heard of it.
func TestClaimQuick_CommitOutWhenTimeRanOut(t *testing.T) {
	t.Parallel()
	s, admin := poolOfTwo(t, "quick_timeout")
	p := claimsAfterQuick(t, s)
	waiting, release := holdCommits(t, admin, 4242, `NEW.schedule IS NULL`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.RunClaim(ctx, p)
		done <- err
	}()
	pid := waiting()
	cancel()
	err := <-done
	release()
	if !errors.Is(err, db.ErrCommitUnknown) {
		t.Errorf("claim whose context ended with its COMMIT out: %v; want db.ErrCommitUnknown", err)
	}
	for { // the backend commits once the lock is free
		var n int
		if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	held, err := s.RunsHeld(context.Background(), p.WorkerID)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].Job.Schedule != "" {
		t.Errorf("held after the claim: %+v; want the one-off job, which the COMMIT leased", held)
	}
}

// TestClaimQuick_RowNotDecoded: a quick claim whose leased row the client
// cannot decode (here a created_at of infinity, which no time.Time holds).
// The row's decoding fails after the COMMIT, sent with the claim, went out,
// and the server commits it all the same. Pass: the claim answers
// db.ErrCommitUnknown, so that its caller looks up what its worker holds,
// and the job is leased. It used to answer a plain error, as though
// nothing was claimed: the job was leased to a worker that never heard of it.
func TestClaimQuick_RowNotDecoded(t *testing.T) {
	t.Parallel()
	s, admin := poolOfTwo(t, "quick_undecoded")
	ctx := context.Background()
	p := db.RunClaimParams{WorkerID: "box/1", Types: []string{"q"}, Max: 5, Lease: time.Minute}
	if _, err := s.RunClaim(ctx, p); err != nil { // records the worker, else the quick claim is not tried
		t.Fatal(err)
	}
	job, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `UPDATE jobs SET created_at = 'infinity' WHERE id = $1`, job.ID); err != nil {
		t.Fatal(err)
	}
	claims, err := s.RunClaim(ctx, p)
	if !errors.Is(err, db.ErrCommitUnknown) {
		t.Errorf("claim of a row that does not decode: %d claims, err %v; want db.ErrCommitUnknown", len(claims), err)
	}
	var state, owner string
	if err := admin.QueryRow(ctx, `SELECT state, lease_owner FROM jobs WHERE id = $1`, job.ID).Scan(&state, &owner); err != nil {
		t.Fatal(err)
	}
	if state != "running" || owner != p.WorkerID {
		t.Errorf("job after the claim: state %q, lease owner %q; want running, %q (the COMMIT went out with the claim)", state, owner, p.WorkerID)
	}
}
