package checker_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/checker"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/dbtest"
	"github.com/sked-dev/sked/db/sqlite"
)

// fixture is a real SQLite store on a test clock plus the three logs a run
// leaves, written as the test client, the no-op jobs and the server would.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	in    checker.Input
	store *sqlite.Store
	clock *dbtest.Clock
	slog  *slog.Logger
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, ctx: context.Background(), clock: dbtest.NewClock(dbtest.Start), in: checker.Input{
		DB:        filepath.Join(dir, "sked.db"),
		ClientLog: filepath.Join(dir, "client.log"),
		JobsLog:   filepath.Join(dir, "jobs.log"),
		ServerLog: filepath.Join(dir, "server.log"),
		Finished:  true,
	}}
	s, err := sqlite.Open(f.ctx, f.in.DB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.NowFunc, s.RandFunc = f.clock.Now, func() float64 { return 0.5 }
	f.store = s
	w, err := os.OpenFile(f.in.ServerLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	f.slog = slog.New(slog.NewJSONHandler(w, nil))
	return f
}

// appendJSON writes v as one line of the log at path.
func (f *fixture) appendJSON(path string, v any) {
	f.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		f.t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		f.t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(append(b, '\n')); err != nil {
		f.t.Fatal(err)
	}
}

// enqueue creates a job and logs its acknowledgement.
func (f *fixture) enqueue(p db.JobCreateParams) db.Job {
	f.t.Helper()
	j, _, err := f.store.JobCreate(f.ctx, p)
	if err != nil {
		f.t.Fatal(err)
	}
	f.appendJSON(f.in.ClientLog, checker.ClientRecord{Op: checker.OpEnqueue, JobID: j.ID,
		IdempotencyKey: j.IdempotencyKey, Type: j.Type, Recurring: j.Recurring()})
	return j
}

// claim leases the due job of type typ and logs the start of its execution.
func (f *fixture) claim(typ string) db.Job {
	f.t.Helper()
	claims, err := f.store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w1", Types: []string{typ}, Max: 1, Lease: 30 * time.Second})
	if err != nil || len(claims) != 1 {
		f.t.Fatalf("claim %s: %d claims, %v", typ, len(claims), err)
	}
	j := claims[0].Job
	f.appendJSON(f.in.JobsLog, checker.ExecRecord{JobID: j.ID, Generation: j.LeaseGeneration, Start: f.clock.Now().Add(time.Millisecond).UnixNano()})
	return j
}

// succeed ends j's execution, records success and logs it as the pool does.
func (f *fixture) succeed(j db.Job) {
	f.t.Helper()
	f.clock.Advance(time.Second)
	f.appendJSON(f.in.JobsLog, checker.ExecRecord{JobID: j.ID, Generation: j.LeaseGeneration, End: f.clock.Now().Add(-time.Millisecond).UnixNano()})
	if _, err := f.store.RunFinish(f.ctx, db.RunFinishParams{JobID: j.ID, Generation: j.LeaseGeneration, Outcome: db.OutcomeSucceeded}); err != nil {
		f.t.Fatal(err)
	}
	f.slog.Info("run finished", "job_id", j.ID, "attempt", j.Attempt, "generation", j.LeaseGeneration, "outcome", db.OutcomeSucceeded)
}

func (f *fixture) cancel(id string, want int) {
	f.t.Helper()
	_, err := f.store.JobCancel(f.ctx, id)
	status := 204
	if errors.Is(err, db.ErrConflict) {
		status = 409
	} else if err != nil {
		f.t.Fatal(err)
	}
	if status != want {
		f.t.Fatalf("cancel %s: got %d, want %d", id, status, want)
	}
	f.appendJSON(f.in.ClientLog, checker.ClientRecord{Op: checker.OpCancel, JobID: id, Status: status})
}

// sql changes the database behind the store's back, to fake a violation.
func (f *fixture) sql(q string, args ...any) {
	f.t.Helper()
	conn, err := sql.Open("sqlite", "file:"+f.in.DB+"?_pragma=busy_timeout(5000)")
	if err != nil {
		f.t.Fatal(err)
	}
	defer conn.Close()
	res, err := conn.ExecContext(f.ctx, q, args...)
	if err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
	if n, _ := res.RowsAffected(); n == 0 && !slices.Contains([]string{"PRAGMA"}, q[:6]) {
		f.t.Fatalf("%s: no row changed", q)
	}
}

// check runs the checker and returns the rules it reported, per job.
func (f *fixture) check() map[string][]checker.Rule {
	f.t.Helper()
	r, err := checker.Check(f.ctx, f.in)
	if err != nil {
		f.t.Fatal(err)
	}
	got := map[string][]checker.Rule{}
	for _, v := range r.Violations {
		f.t.Log(v)
		got[v.JobID] = append(got[v.JobID], v.Rule)
	}
	return got
}

// run is a small correct history: every job kind and every path a rule
// looks at, each job with its own type so that claims pick it alone.
type run struct {
	*fixture
	oneOff, reaped, recurring, cancelled, busy db.Job
	reapedGen1                                 db.Job
}

func newRun(t *testing.T) *run {
	f := newFixture(t)
	r := &run{fixture: f}
	// A one-off job that runs and succeeds.
	r.oneOff = f.enqueue(db.JobCreateParams{Type: "a", IdempotencyKey: "key-a"})
	f.succeed(f.claim("a"))
	// A one-off job whose first process dies: reaped, then run again.
	r.reaped = f.enqueue(db.JobCreateParams{Type: "b"})
	r.reapedGen1 = f.claim("b")
	f.clock.Advance(31 * time.Second)
	if n, err := f.store.RunReapExpired(f.ctx); err != nil || n != 1 {
		t.Fatalf("reap: %d, %v", n, err)
	}
	f.clock.Advance(time.Minute)
	f.succeed(f.claim("b"))
	// A recurring job: a slot runs, three pass while "down", one catches up.
	r.recurring = f.enqueue(db.JobCreateParams{Type: "r", Schedule: "@every 10s"})
	f.clock.Set(*r.recurring.NextRunAt)
	f.succeed(f.claim("r"))
	f.clock.Advance(35 * time.Second)
	f.succeed(f.claim("r"))
	// A cancel that wins (204) and one that loses to a worker (409).
	r.cancelled = f.enqueue(db.JobCreateParams{Type: "c", RunAt: f.clock.Now().Add(time.Hour)})
	f.cancel(r.cancelled.ID, 204)
	r.busy = f.enqueue(db.JobCreateParams{Type: "d"})
	busy := f.claim("d")
	f.cancel(r.busy.ID, 409)
	f.succeed(busy)
	return r
}

// wantNone fails unless got holds no violation; what says of which run.
func wantNone(t *testing.T, got map[string][]checker.Rule, what string) {
	t.Helper()
	if len(got) != 0 {
		t.Fatalf("%s: violations %v, want none", what, got)
	}
}

func wantRules(t *testing.T, got map[string][]checker.Rule, jobID string, want ...checker.Rule) {
	t.Helper()
	if len(got) != 1 || !slices.Equal(got[jobID], want) {
		t.Fatalf("violations: got %v, want only %v for job %s", got, want, jobID)
	}
}

// wantRule fails unless rule is among the violations reported for jobID.
func wantRule(t *testing.T, got map[string][]checker.Rule, jobID string, rule checker.Rule) {
	t.Helper()
	if !slices.Contains(got[jobID], rule) {
		t.Fatalf("violations: got %v, want %s for job %s", got, rule, jobID)
	}
}

func TestCheck_CorrectRunPasses(t *testing.T) {
	t.Parallel()
	r := newRun(t)
	wantNone(t, r.check(), "a correct run has violations")
	rep, err := checker.Check(r.ctx, r.in)
	if err != nil {
		t.Fatal(err)
	}
	// 5 jobs; runs: 1 + 2 + 2 succeeded and 2 missed + 1 = 8; enqueues 5;
	// cancels 2; executions 1 + 2 + 2 + 1 = 6; completions 5; slots of the
	// recurring job due by the end: 2 run and 2 missed.
	want := checker.Report{Jobs: 5, Runs: 8, Enqueues: 5, Cancels: 2, Executions: 6, Completion: 5, Slots: 4}
	rep.Violations = nil
	if !reflect.DeepEqual(*rep, want) {
		t.Errorf("report: got %+v, want %+v", *rep, want)
	}
}

func TestCheck_Integrity(t *testing.T) {
	t.Parallel()
	t.Run("ForeignKey", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`INSERT INTO runs (job_id, attempt, generation, outcome) VALUES ('ghost', 1, 1, 'running')`)
		wantRules(t, r.check(), "-", checker.RuleIntegrity)
	})
	t.Run("IndexCorrupt", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		// Redefine an index behind SQLite's back: its entries no longer
		// match their rows, which integrity_check reports.
		r.sql(`PRAGMA writable_schema = ON; UPDATE sqlite_schema SET sql = 'CREATE INDEX runs_job ON runs (job_id, attempt)' WHERE name = 'runs_job'`)
		wantRules(t, r.check(), "-", checker.RuleIntegrity)
	})
}

func TestCheck_Lost(t *testing.T) {
	t.Parallel()
	t.Run("NotInDatabase", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`DELETE FROM runs WHERE job_id = ?`, r.oneOff.ID)
		r.sql(`DELETE FROM jobs WHERE id = ?`, r.oneOff.ID)
		wantRules(t, r.check(), r.oneOff.ID, checker.RuleLost)
	})
	t.Run("NeverRan", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		late := r.enqueue(db.JobCreateParams{Type: "e"})
		wantRules(t, r.check(), late.ID, checker.RuleLost)
		r.in.Finished = false // still running: ready is fine
		wantNone(t, r.check(), "unfinished run")
	})
	t.Run("DuplicateKey", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.appendJSON(r.in.ClientLog, checker.ClientRecord{Op: checker.OpEnqueue, JobID: r.reaped.ID, IdempotencyKey: "key-a"})
		wantRules(t, r.check(), r.reaped.ID, checker.RuleDuplicate)
	})
	t.Run("KeyOfCancelledJobReused", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		first := r.enqueue(db.JobCreateParams{Type: "k", IdempotencyKey: "key-k", RunAt: r.clock.Now().Add(time.Hour)})
		r.cancel(first.ID, 204)
		second := r.enqueue(db.JobCreateParams{Type: "k", IdempotencyKey: "key-k", RunAt: r.clock.Now().Add(time.Hour)})
		if second.ID == first.ID {
			t.Fatalf("the key of cancelled job %s was not free", first.ID)
		}
		r.cancel(second.ID, 204)
		wantNone(t, r.check(), "a cancelled job's key taken by a new job")
	})
	t.Run("KeyReusedBeforeCancel", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		first := r.enqueue(db.JobCreateParams{Type: "k", IdempotencyKey: "key-k", RunAt: r.clock.Now().Add(time.Hour)})
		// A store that hands the key to a second job while the first holds
		// it; the first is cancelled only afterwards.
		r.appendJSON(r.in.ClientLog, checker.ClientRecord{Op: checker.OpEnqueue, JobID: r.reaped.ID, IdempotencyKey: "key-k"})
		r.cancel(first.ID, 204)
		wantRules(t, r.check(), r.reaped.ID, checker.RuleDuplicate)
	})
}

func TestCheck_Cancel(t *testing.T) {
	t.Parallel()
	t.Run("204NotCancelled", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`UPDATE jobs SET state = 'ready' WHERE id = ?`, r.cancelled.ID)
		wantRules(t, r.check(), r.cancelled.ID, checker.RuleLost, checker.RuleCancel)
	})
	t.Run("409NeverRan", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.appendJSON(r.in.ClientLog, checker.ClientRecord{Op: checker.OpCancel, JobID: r.cancelled.ID, Status: 409})
		wantRules(t, r.check(), r.cancelled.ID, checker.RuleCancel)
	})
}

func TestCheck_Unasked(t *testing.T) {
	t.Parallel()
	r := newRun(t)
	j, _, err := r.store.JobCreate(r.ctx, db.JobCreateParams{Type: "notify", IdempotencyKey: "k-unacked"})
	if err != nil {
		t.Fatal(err)
	}
	r.in.Finished = false
	wantRules(t, r.check(), j.ID, checker.RuleUnasked)
	t.Run("AllowedType", func(t *testing.T) {
		in := r.in
		r.in.AllowTypes = []string{"notify"}
		defer func() { r.in = in }()
		wantNone(t, r.check(), "allowed type")
	})
	t.Run("SentNotAcknowledged", func(t *testing.T) {
		r.appendJSON(r.in.ClientLog, checker.ClientRecord{Op: checker.OpEnqueueUnacked, IdempotencyKey: "k-unacked"})
		wantNone(t, r.check(), "sent, answer lost")
	})
	t.Run("OnlyInLogs", func(t *testing.T) {
		r.appendJSON(r.in.JobsLog, checker.ExecRecord{JobID: "ghost", Generation: 1, Start: 1, End: 2})
		wantRule(t, r.check(), "ghost", checker.RuleUnasked)
	})
}

func TestCheck_Overlap(t *testing.T) {
	t.Parallel()
	t.Run("DeadProcessStillLeased", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		// Generation 1 died and was live until the reaper closed it; a
		// third execution claims to have started before that.
		runs, _, err := r.store.RunList(r.ctx, db.RunListParams{JobID: r.reaped.ID})
		if err != nil {
			t.Fatal(err)
		}
		gen1 := runs[len(runs)-1]
		r.appendJSON(r.in.JobsLog, checker.ExecRecord{JobID: r.reaped.ID, Generation: 2, Start: gen1.FinishedAt.Add(-time.Second).UnixNano()})
		wantRule(t, r.check(), r.reaped.ID, checker.RuleOverlap)
	})
	t.Run("BothEnded", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		// Generation 1 did not die after all: it ended after generation 2
		// had started.
		end := r.clock.Now().UnixNano()
		r.appendJSON(r.in.JobsLog, checker.ExecRecord{JobID: r.reaped.ID, Generation: 1, End: end})
		wantRule(t, r.check(), r.reaped.ID, checker.RuleOverlap)
	})
	t.Run("KilledProcessMarkedLate", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		// Generation 1 has no end, but was seen running after generation
		// 2 had started: it was killed late.
		r.appendJSON(r.in.JobsLog, checker.ExecRecord{JobID: r.reaped.ID, Generation: 1, Mark: r.clock.Now().UnixNano()})
		wantRule(t, r.check(), r.reaped.ID, checker.RuleOverlap)
	})
}

// TestReadExecutions judges a jobs log without a database: a killed
// execution counts as live until its last mark.
func TestReadExecutions(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.log")
	var lines []byte
	for _, rec := range []checker.ExecRecord{
		{JobID: "A", Generation: 1, Start: 100}, {JobID: "A", Generation: 1, Mark: 200}, {JobID: "A", Generation: 1, Mark: 300},
		{JobID: "A", Generation: 2, Start: 250}, {JobID: "A", Generation: 2, End: 400}, // starts before 1's last mark
		{JobID: "B", Generation: 1, Start: 100}, {JobID: "B", Generation: 1, Mark: 200},
		{JobID: "B", Generation: 2, Start: 250}, {JobID: "B", Generation: 2, End: 400}, // after 1's last mark
		{JobID: "C", Generation: 1, Start: 100}, {JobID: "C", Generation: 1, Start: 150}, // one generation started twice
	} {
		b, _ := json.Marshal(rec)
		lines = append(append(lines, b...), '\n')
	}
	if err := os.WriteFile(path, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	execs, vs, err := checker.ReadExecutions(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(execs) != 5 || execs[0] != (checker.Execution{JobID: "A", Generation: 1, Start: 100, Last: 300}) ||
		execs[3] != (checker.Execution{JobID: "B", Generation: 2, Start: 250, End: 400, Last: 400}) {
		t.Errorf("executions = %+v", execs)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.JobID+" "+string(v.Rule))
	}
	if want := []string{"C generation", "A overlap"}; !slices.Equal(got, want) {
		t.Errorf("violations = %q, want %q", got, want)
	}
}

func TestCheck_EarlyStart(t *testing.T) {
	t.Parallel()
	r := newRun(t)
	// A job due in 10 s, claimed ahead, whose execution starts at once.
	j := r.enqueue(db.JobCreateParams{Type: "e", RunAt: r.clock.Now().Add(10 * time.Second)})
	claims, err := r.store.RunClaim(r.ctx, db.RunClaimParams{WorkerID: "w1", Types: []string{"e"}, Max: 1, Ahead: 20 * time.Second})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim ahead: %d claims, %v", len(claims), err)
	}
	r.appendJSON(r.in.JobsLog, checker.ExecRecord{JobID: j.ID, Generation: 1, Start: r.clock.Now().UnixNano()})
	r.clock.Advance(10 * time.Second)
	r.succeed(claims[0].Job)
	wantRules(t, r.check(), j.ID, checker.RuleEarlyStart)
}

func TestCheck_Generation(t *testing.T) {
	t.Parallel()
	t.Run("ExecutedTwice", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.appendJSON(r.in.JobsLog, checker.ExecRecord{JobID: r.oneOff.ID, Generation: 1, Start: 1})
		wantRule(t, r.check(), r.oneOff.ID, checker.RuleGeneration)
	})
	t.Run("NeverIssued", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.appendJSON(r.in.JobsLog, checker.ExecRecord{JobID: r.oneOff.ID, Generation: 7, Start: r.clock.Now().Add(time.Hour).UnixNano()})
		r.in.End = r.clock.Now() // the forged time lies past the end of the run
		wantRules(t, r.check(), r.oneOff.ID, checker.RuleGeneration)
	})
	t.Run("IssuedTwice", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`UPDATE runs SET generation = 1 WHERE job_id = ? AND generation = 2`, r.reaped.ID)
		r.in.JobsLog, r.in.ServerLog = "", "" // the logs would show it too
		wantRules(t, r.check(), r.reaped.ID, checker.RuleGeneration)
	})
	t.Run("CounterBehind", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`UPDATE jobs SET lease_generation = 1 WHERE id = ?`, r.reaped.ID)
		wantRules(t, r.check(), r.reaped.ID, checker.RuleGeneration)
	})
}

func TestCheck_EarlyClaim(t *testing.T) {
	t.Parallel()
	t.Run("BeforeReap", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`UPDATE runs SET finished_at = '2030-01-01T00:00:00.000Z' WHERE job_id = ? AND generation = 1`, r.reaped.ID)
		r.in.End = r.clock.Now() // the forged time lies past the end of the run
		wantRule(t, r.check(), r.reaped.ID, checker.RuleEarlyClaim)
	})
	t.Run("NeverClosed", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`UPDATE runs SET finished_at = NULL, outcome = 'running' WHERE job_id = ? AND generation = 1`, r.reaped.ID)
		wantRule(t, r.check(), r.reaped.ID, checker.RuleEarlyClaim)
	})
}

func TestCheck_StaleWrite(t *testing.T) {
	t.Parallel()
	t.Run("AfterNextClaim", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`UPDATE runs SET outcome = 'failed', finished_at = '2030-01-01T00:00:00.000Z' WHERE job_id = ? AND generation = 1`, r.reaped.ID)
		r.in.End = r.clock.Now() // the forged time lies past the end of the run
		r.in.JobsLog = ""
		wantRules(t, r.check(), r.reaped.ID, checker.RuleStaleWrite)
	})
	t.Run("OneOffSucceededTwice", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`UPDATE runs SET outcome = 'succeeded' WHERE job_id = ? AND generation = 1`, r.reaped.ID)
		wantRules(t, r.check(), r.reaped.ID, checker.RuleStaleWrite)
	})
	t.Run("AcceptedNotRecorded", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.slog.Info("run finished", "job_id", r.reaped.ID, "attempt", 1, "generation", 1, "outcome", db.OutcomeSucceeded)
		wantRules(t, r.check(), r.reaped.ID, checker.RuleStaleWrite)
	})
	t.Run("RefusedButRecorded", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.slog.Warn("run outcome refused: lease no longer held", "job_id", r.oneOff.ID, "attempt", 1, "generation", 1, "outcome", db.OutcomeSucceeded)
		wantRules(t, r.check(), r.oneOff.ID, checker.RuleStaleWrite)
		// A refusal whose run was reaped is the fence working.
		r.slog.Warn("run outcome refused: lease no longer held", "job_id", r.reaped.ID, "attempt", 1, "generation", 1, "outcome", db.OutcomeSucceeded)
		wantRules(t, r.check(), r.oneOff.ID, checker.RuleStaleWrite)
	})
}

func TestCheck_Slots(t *testing.T) {
	t.Parallel()
	t.Run("RunTwice", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`INSERT INTO runs (job_id, slot, attempt, generation, finished_at, outcome, reason)
			SELECT job_id, slot, 0, 0, finished_at, 'missed', 'overlap' FROM runs WHERE job_id = ? AND generation = 1`, r.recurring.ID)
		wantRules(t, r.check(), r.recurring.ID, checker.RuleSlotTwice)
	})
	t.Run("MissingButCounted", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`DELETE FROM runs WHERE id = (SELECT min(id) FROM runs WHERE job_id = ? AND outcome = 'missed')`, r.recurring.ID)
		wantRules(t, r.check(), r.recurring.ID, checker.RuleSlotMissing) // the counter alone accounts for nothing
	})
	t.Run("InASpan", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		// Two missed slots become one row standing for both.
		r.sql(`UPDATE runs SET slot_count = 2, last_slot = (SELECT slot FROM runs WHERE job_id = ?1 AND outcome = 'missed' ORDER BY slot LIMIT 1 OFFSET 1)
			WHERE id = (SELECT id FROM runs WHERE job_id = ?1 AND outcome = 'missed' ORDER BY slot LIMIT 1)`, r.recurring.ID)
		r.sql(`DELETE FROM runs WHERE id = (SELECT id FROM runs WHERE job_id = ? AND outcome = 'missed' ORDER BY slot LIMIT 1 OFFSET 1)`, r.recurring.ID)
		wantNone(t, r.check(), "two slots in a span row")
	})
	t.Run("SpanMiscounted", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`UPDATE runs SET slot_count = 3, last_slot = slot
			WHERE id = (SELECT id FROM runs WHERE job_id = ? AND outcome = 'missed' ORDER BY slot LIMIT 1)`, r.recurring.ID)
		wantRules(t, r.check(), r.recurring.ID, checker.RuleSlotMissing)
	})
	t.Run("SilentlyMissing", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`DELETE FROM runs WHERE id = (SELECT min(id) FROM runs WHERE job_id = ? AND outcome = 'missed')`, r.recurring.ID)
		r.sql(`UPDATE jobs SET missed_slots = missed_slots - 1 WHERE id = ?`, r.recurring.ID)
		wantRules(t, r.check(), r.recurring.ID, checker.RuleSlotMissing)
	})
}

func TestCheck_TruncatedLastLine(t *testing.T) {
	t.Parallel()
	r := newRun(t)
	w, err := os.OpenFile(r.in.JobsLog, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString(`{"jobId":"x","gener`) // killed mid-write
	w.Close()
	wantNone(t, r.check(), "a cut last line")
	r.appendJSON(r.in.JobsLog, checker.ExecRecord{}) // now it is in the middle
	if _, err := checker.Check(r.ctx, r.in); err == nil {
		t.Fatal("a malformed line in the middle of the jobs log: no error")
	}
}

// failToStart records that j's command could not start (a missing
// interpreter is a permanent error): the run fails and the jobs log shows
// no execution.
func (f *fixture) failToStart(j db.Job) {
	f.t.Helper()
	f.clock.Advance(time.Second)
	p := db.RunFinishParams{JobID: j.ID, Generation: j.LeaseGeneration, Outcome: db.OutcomeFailed,
		Error: `exec: "sh": executable file not found in $PATH`}
	if _, err := f.store.RunFinish(f.ctx, p); err != nil {
		f.t.Fatal(err)
	}
	f.slog.Warn("run finished", "job_id", j.ID, "attempt", j.Attempt, "generation", j.LeaseGeneration, "outcome", db.OutcomeFailed)
}

// lease claims the due job of type typ without logging an execution.
func (f *fixture) lease(typ string) db.Job {
	f.t.Helper()
	claims, err := f.store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: "w1", Types: []string{typ}, Max: 1, Lease: 30 * time.Second})
	if err != nil || len(claims) != 1 {
		f.t.Fatalf("claim %s: %d claims, %v", typ, len(claims), err)
	}
	return claims[0].Job
}

// touchLogs creates the three logs empty, as a run that wrote nothing
// leaves them.
func (f *fixture) touchLogs() {
	f.t.Helper()
	for _, p := range []string{f.in.ClientLog, f.in.JobsLog, f.in.ServerLog} {
		w, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			f.t.Fatal(err)
		}
		w.Close()
	}
}

// Empty evidence: a run said to have finished must show work. Without
// Finished, the checker judges what there is and an empty run passes.
func TestCheck_Empty(t *testing.T) {
	t.Parallel()
	t.Run("NothingAtAll", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.touchLogs()
		wantRules(t, f.check(), "-", checker.RuleEmpty)
		f.in.Finished = false
		wantNone(t, f.check(), "an unfinished empty run")
	})
	t.Run("DatabaseOnly", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.in.ClientLog, f.in.JobsLog, f.in.ServerLog = "", "", ""
		wantRules(t, f.check(), "-", checker.RuleEmpty)
	})
	t.Run("AcknowledgedNeverExecuted", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		var ids []string
		for _, typ := range []string{"a", "b", "c"} {
			ids = append(ids, f.enqueue(db.JobCreateParams{Type: typ}).ID)
		}
		f.touchLogs()
		got := f.check()
		wantRule(t, got, "-", checker.RuleEmpty)
		for _, id := range ids {
			wantRule(t, got, id, checker.RuleLost)
		}
		rep, err := checker.Check(f.ctx, f.in)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"the jobs log " + f.in.JobsLog + " holds no execution", "the server log " + f.in.ServerLog + " holds no completion"}
		if v := rep.Violations[0]; v.Rule != checker.RuleEmpty || !slices.Equal(v.Evidence, want) {
			t.Errorf("first violation %v, want empty with evidence %q", v, want)
		}
	})
}

// An acknowledged job that went final without one execution.
func TestCheck_NeverRan(t *testing.T) {
	t.Parallel()
	t.Run("DeadWithoutExecution", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		var ids []string
		for _, typ := range []string{"x", "y", "z"} {
			j := r.enqueue(db.JobCreateParams{Type: typ})
			r.failToStart(r.lease(typ))
			ids = append(ids, j.ID)
		}
		got := r.check()
		if len(got) != len(ids) {
			t.Fatalf("violations: got %v, want never_ran for each of %v", got, ids)
		}
		for _, id := range ids {
			if !slices.Equal(got[id], []checker.Rule{checker.RuleNeverRan}) {
				t.Errorf("job %s: got %v, want [never_ran]", id, got[id])
			}
		}
		r.in.Finished = false
		wantNone(t, r.check(), "unfinished run")
	})
	t.Run("DatabaseOnlyLeasesExpired", func(t *testing.T) {
		t.Parallel()
		// Without logs every job in the database counts as acknowledged,
		// and only a run a worker ended shows an execution: a job whose
		// one attempt ended in lease_expired never ran.
		r := newRun(t)
		dead := r.enqueue(db.JobCreateParams{Type: "x", MaxAttempts: 1})
		r.in.ClientLog, r.in.JobsLog, r.in.ServerLog = "", "", ""
		r.lease("x")
		r.clock.Advance(31 * time.Second)
		if n, err := r.store.RunReapExpired(r.ctx); err != nil || n != 1 {
			t.Fatalf("reap: %d, %v", n, err)
		}
		if j, err := r.store.JobGet(r.ctx, dead.ID); err != nil || j.State != db.StateDead {
			t.Fatalf("job after its only lease expired: %+v, %v; want dead", j, err)
		}
		wantRules(t, r.check(), dead.ID, checker.RuleNeverRan)
	})
	t.Run("RecurringClaimedNeverExecuted", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		j := r.enqueue(db.JobCreateParams{Type: "x", Schedule: "@every 1m", MaxAttempts: 1})
		r.clock.Set(*j.NextRunAt)
		r.failToStart(r.lease("x"))
		wantRules(t, r.check(), j.ID, checker.RuleNeverRan)
	})
	t.Run("CancelledNeverRanIsFine", func(t *testing.T) {
		t.Parallel()
		r := newRun(t) // r.cancelled never ran
		j := r.enqueue(db.JobCreateParams{Type: "x", Schedule: "@every 1m", MaxAttempts: 1})
		r.clock.Set(*j.NextRunAt)
		r.failToStart(r.lease("x"))
		r.cancel(j.ID, 204)
		wantNone(t, r.check(), "violations")
	})
}

// newOneOffRun is a correct run of one one-off job, the only work done
// before a test adds a schedule and lets time pass (newRun's schedule would
// fall behind too).
func newOneOffRun(t *testing.T) *fixture {
	f := newFixture(t)
	f.enqueue(db.JobCreateParams{Type: "a"})
	f.succeed(f.claim("a"))
	return f
}

// TestCheck_SlotsFromCreation holds every recurring job to each slot due
// from its creation to the end of the run.
func TestCheck_SlotsFromCreation(t *testing.T) {
	t.Parallel()
	// neverFired adds an "@every 1s" job that nothing claims for an hour.
	neverFired := func(t *testing.T) (*fixture, db.Job) {
		r := newOneOffRun(t)
		j := r.enqueue(db.JobCreateParams{Type: "s", Schedule: "@every 1s"})
		r.clock.Advance(time.Hour)
		return r, j
	}
	violation := func(t *testing.T, r *fixture, jobID string) checker.Violation {
		t.Helper()
		rep, err := checker.Check(r.ctx, r.in)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Violations) != 1 || rep.Violations[0].JobID != jobID || rep.Violations[0].Rule != checker.RuleSlotMissing {
			t.Fatalf("violations: %v; want one slot_missing for job %s", rep.Violations, jobID)
		}
		t.Log(rep.Violations[0])
		return rep.Violations[0]
	}
	t.Run("NeverFiredUntilALaterRun", func(t *testing.T) {
		t.Parallel()
		r, j := neverFired(t)
		// The end of the run is the last thing it wrote: a job run an hour
		// after the schedule was created.
		r.enqueue(db.JobCreateParams{Type: "late"})
		r.succeed(r.claim("late"))
		v := violation(t, r, j.ID)
		// Due: the slots from creation+1s to the end, creation+3601s.
		if want := "3601 due slots from " + j.NextRunAt.Format("2006-01-02T15:04:05.000Z"); !strings.HasPrefix(v.Detail, want) {
			t.Errorf("detail %q, want it to start %q", v.Detail, want)
		}
		if !strings.Contains(v.Detail, "the schedule stopped firing") || len(v.Evidence) != 7 {
			t.Errorf("want the stop named and the job, five slots and the rest in evidence: %v", v)
		}
	})
	t.Run("NeverFiredEndGiven", func(t *testing.T) {
		t.Parallel()
		r, j := neverFired(t)
		// Nothing was written after the create: the evidence ends there
		// and only the end given says an hour passed.
		wantNone(t, r.check(), "without an end")
		r.in.End = r.clock.Now()
		violation(t, r, j.ID)
		r.in.Finished = false // the server may be down: the pending slot is open
		wantNone(t, r.check(), "unfinished run")
	})
	t.Run("PendingDueJustBeforeTheEnd", func(t *testing.T) {
		t.Parallel()
		r := newOneOffRun(t)
		j := r.enqueue(db.JobCreateParams{Type: "s", Schedule: "@every 1h"})
		r.in.End = j.NextRunAt.Add(checker.DuePending - time.Millisecond)
		wantNone(t, r.check(), "a slot due just under DuePending before the end")
		r.in.End = j.NextRunAt.Add(checker.DuePending)
		violation(t, r, j.ID)
	})
	t.Run("Paused", func(t *testing.T) {
		t.Parallel()
		r := newOneOffRun(t)
		j := r.enqueue(db.JobCreateParams{Type: "s", Schedule: "@every 1s"})
		if _, err := r.store.JobPause(r.ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		r.in.End = r.clock.Now().Add(time.Hour)
		wantNone(t, r.check(), "a paused schedule records its slots when resumed")
	})
	t.Run("CancelledBeforeDue", func(t *testing.T) {
		t.Parallel()
		r := newOneOffRun(t)
		j := r.enqueue(db.JobCreateParams{Type: "s", Schedule: "@every 1m"})
		r.cancel(j.ID, 204)
		r.in.End = r.clock.Now().Add(time.Hour)
		wantNone(t, r.check(), "no slot is due after a cancel")
	})
	t.Run("CancelledLongAfterDue", func(t *testing.T) {
		t.Parallel()
		r := newOneOffRun(t)
		j := r.enqueue(db.JobCreateParams{Type: "s", Schedule: "@every 1m"})
		r.clock.Advance(time.Hour)
		r.cancel(j.ID, 204)
		violation(t, r, j.ID)
	})
	t.Run("BeforeTheFirstRow", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`DELETE FROM runs WHERE job_id = ? AND generation = 1`, r.recurring.ID)
		r.in.JobsLog, r.in.ServerLog = "", "" // they would show the lost run
		r.in.Finished = false                 // settled slots are judged in any run
		wantRules(t, r.check(), r.recurring.ID, checker.RuleSlotMissing)
	})
	t.Run("MissedWithoutReason", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`UPDATE runs SET reason = NULL WHERE id = (SELECT min(id) FROM runs WHERE job_id = ? AND outcome = 'missed')`, r.recurring.ID)
		wantRules(t, r.check(), r.recurring.ID, checker.RuleSlotMissing)
	})
	t.Run("ManualRunIsNoSlot", func(t *testing.T) {
		t.Parallel()
		r := newRun(t)
		r.sql(`UPDATE runs SET reason = 'manual' WHERE job_id = ? AND generation = 1`, r.recurring.ID)
		wantRules(t, r.check(), r.recurring.ID, checker.RuleSlotMissing)
	})
}
