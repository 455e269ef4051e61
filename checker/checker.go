// Package checker judges the evidence a sked run leaves behind: the test
// client's log of acknowledged enqueues and cancels, the no-op jobs' log of
// executions, optionally the server's JSON log of completions and refusals,
// and the final SQLite database. It answers with the list of violations of
// sked's guarantees (docs/semantics.md), each naming the job and the evidence lines
// that show it. Fault tests (kill -9, power loss, disk full) run sked, break
// it, and call Check afterwards; `sked check` is the same from a shell.
//
// The rules, each with its precise definition, are documented on the Rule
// constants. They are written to give no false alarm on a correct run: where
// the evidence is coarser than the truth (the database stores times to the
// millisecond), a rule gives the store the benefit of the doubt.
//
// Absence of evidence is not evidence of a correct run. With
// Input.Finished, the caller says a run took place and ended: then an empty
// database or an empty named log is a violation (RuleEmpty), every
// acknowledged job must have executed unless it was cancelled
// (RuleNeverRan), and every slot a schedule owed between the job's creation
// and the end of the run must be accounted for (RuleSlotMissing). The
// database keeps no clock, so the end of a run is the latest time its
// evidence records unless Input.End says otherwise; a run whose schedules
// fell silent after its last write needs Input.End to be judged to its
// end. History deleted by retention cannot be judged: check a run whose
// retention is longer than the run.
//
// Log formats, one JSON object per line, append-only. A last line cut short
// by a kill is ignored; any other malformed line in the client or jobs log is
// an error (the evidence itself is broken).
//
//   - Client log (ClientRecord): {"op":"enqueue","jobId":…,"idempotencyKey":…,
//     "type":…,"recurring":false} after a 201/200; {"op":"enqueue_unacked",
//     "idempotencyKey":…} when a create was sent but no answer came (the job
//     may exist); {"op":"cancel","jobId":…,"status":204|409}.
//   - Jobs log (ExecRecord): {"jobId":…,"generation":…,"start":<unix ns>} when
//     a no-op job starts, {"jobId":…,"generation":…,"end":<unix ns>} when it
//     ends (or one line with both), and {"jobId":…,"generation":…,"mark":
//     <unix ns>} as often as it likes in between, to say it still runs. A start without an end is a process that
//     died; it counts as running until the lease of its generation ended.
//     An exec job writes them from $SKED_JOB_ID, $SKED_GENERATION and
//     `date +%s%N`.
//   - Server log: `sked serve --log-format json`; the lines with msg "run
//     finished" and "run outcome refused: lease no longer held" and keys
//     job_id, generation, outcome are read, the rest skipped.
package checker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Rule names one guarantee a violation breaks.
type Rule string

// The rules Check applies.
const (
	// RuleIntegrity: PRAGMA integrity_check does not answer "ok", or
	// PRAGMA foreign_key_check finds a run without its job.
	RuleIntegrity Rule = "integrity"
	// RuleLost: an acknowledged enqueue whose job is not in the database;
	// or, when Input.Finished says the run is over and drained, an
	// acknowledged one-off job that is not done, dead or cancelled.
	RuleLost Rule = "lost"
	// RuleNeverRan: when Input.Finished, an acknowledged job that was not
	// cancelled and never executed: a one-off job done or dead, or a
	// recurring job claimed for a slot, without one execution. Executed
	// means an execution in the jobs log when one is given; without it, a
	// run that a worker ended (succeeded, failed, timed_out, cancelled):
	// lease_expired and released runs do not show that the job ran. Every
	// job in the database counts as acknowledged when no client log is
	// given.
	RuleNeverRan Rule = "never_ran"
	// RuleEmpty: when Input.Finished says a run happened, its evidence
	// shows none: the database holds no job, or a log that was named holds
	// no record of its kind (no acknowledged enqueue in the client log, no
	// execution in the jobs log, no completion in the server log). A run
	// that did nothing cannot show that nothing was lost.
	RuleEmpty Rule = "empty"
	// RuleDuplicate: one idempotency key acknowledged with two job ids.
	RuleDuplicate Rule = "duplicate"
	// RuleCancel: a cancel answered 204 whose job is not cancelled in the
	// database, or answered 409 although no run of the job ever started
	// (409 means a worker held it or it was done: either needs a run).
	RuleCancel Rule = "cancel"
	// RuleUnasked: a job in the database, the jobs log or the server log
	// that no enqueue asked for: its id was not acknowledged, its
	// idempotency key was not sent, and its type is not in
	// Input.AllowTypes.
	RuleUnasked Rule = "unasked"
	// RuleOverlap: two executions in the jobs log of one job whose live
	// windows intersect. An execution is live from its start to its end;
	// one without an end (its process died) is live until its lease ended:
	// the finished_at of its generation's run row (the reaper closes it as
	// lease_expired), or the job's lease_until while that generation still
	// holds the job; or until its last mark, if that is later.
	// ReadExecutions, which has no database, holds one without an end live
	// until its last line.
	RuleOverlap Rule = "overlap"
	// RuleGeneration: a lease generation issued twice (two run rows, or two
	// executions, of one job with one generation), a generation executed
	// that the database never issued (no run row: the claim was lost), or a
	// job whose lease_generation is below one of its runs' (the counter went
	// back, so a generation will be issued again).
	RuleGeneration Rule = "generation"
	// RuleEarlyClaim: a run started while an earlier lease of the same job
	// was live. Runs of a job ordered by generation: run g+1's started_at
	// must not precede run g's finished_at, and run g must be closed at all.
	// Run g ended by the reaper (lease_expired) is closed at or after its
	// lease end, so this is "claimed before the lease expired and was
	// reaped".
	RuleEarlyClaim Rule = "claim_while_leased"
	// RuleStaleWrite: a write accepted from a generation that no longer held
	// the job. In the database: run g closed with a worker's outcome
	// (succeeded, failed, timed_out, cancelled, released) after run g+1 had
	// started, when g+1 held the job; or a one-off job with a succeeded run
	// that is not its last run (a done job never runs again, so a later run
	// means the success was written by a lease that had already been
	// replaced, or a done job was claimed). In the server log: a completion
	// the store accepted ("run finished") whose run row does not carry that
	// outcome, or one it refused whose run row carries it.
	RuleStaleWrite Rule = "stale_write"
	// RuleSlotTwice: two final records for one slot of a recurring job: two
	// succeeded runs, or a run and a missed row, or two missed rows. Final
	// are succeeded, cancelled, missed, and runs that gave up the firing.
	RuleSlotTwice Rule = "slot_twice"
	// RuleSlotMissing: a due slot of a recurring job's schedule with no
	// row at all (a run, or a missed row with its reason), or a missed row
	// without a reason. The slots are walked from the job's creation (its
	// first slot is the schedule's first after created_at) to the end of
	// the run (Input.End; a cancelled job's until it was cancelled), a slot
	// being due at its time plus the job's jitter offset. An operator's
	// extra run (reason manual) accounts for no slot. A missed row that
	// stands for a span of slots (slot_count, past the store's
	// lifecycle.MaxMissedRows rows of one event) accounts for the slots
	// from its slot to its last_slot, and must count exactly those.
	//
	// Slots before the job's pending slot (its slot column) are settled
	// when the firing moves on, so they must have rows. The pending slot and
	// those after it may still be open at the end: the store records them
	// when the firing ends, the job resumes or the server comes back. They
	// are allowed while the run may still be going (Input.Finished false);
	// when it finished, only if the job is paused or running, the pending
	// slot has a run (held, retrying, handed back), or it fell due less
	// than DuePending before the end. Otherwise the schedule stopped
	// firing, silently.
	RuleSlotMissing Rule = "slot_missing"
	// RuleEarlyStart: an execution in the jobs log that started before its
	// run's slot, the time it was due (a one-off's runAt, a schedule's
	// slot, an operator's extra run's own time): a worker that claims jobs
	// ahead of their due time must still wait for it. Slots are stored to
	// the millisecond, rounded down, so a start up to a millisecond early is
	// let pass.
	RuleEarlyStart Rule = "early_start"
)

// DuePending is how long, at the end of a finished run, a recurring job's
// pending slot may have been due without a claim: a dispatcher that is
// working claims a due job within seconds.
const DuePending = time.Minute

// Input names the evidence of one run. DB is required; a log left empty is
// not read, and the rules that need it are skipped.
type Input struct {
	DB        string // SQLite database file, opened read-only
	ClientLog string // the test client's log of enqueues and cancels
	JobsLog   string // the no-op jobs' log of executions
	ServerLog string // sked serve --log-format json output
	// AllowTypes are job types that need no enqueue in the client log
	// (notifications, internal jobs).
	AllowTypes []string
	// Finished says the run is over and every due job had time to run:
	// acknowledged one-off jobs must then be final and have executed, the
	// evidence must not be empty, and recurring jobs must not have stopped
	// firing.
	Finished bool
	// End is when the run ended; zero means the latest time the evidence
	// records (a job created or changed, a run started or finished, an
	// execution started or ended). Set it when the run went on after its
	// last write: a schedule that never fired writes nothing.
	End time.Time
}

// Violation is one broken guarantee.
type Violation struct {
	Rule     Rule
	JobID    string
	Detail   string   // what is wrong, for a person
	Evidence []string // the log lines and database rows that show it
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: job %s: %s", v.Rule, v.JobID, v.Detail)
	for _, e := range v.Evidence {
		b.WriteString("\n    " + e)
	}
	return b.String()
}

// Report is what Check found and how much evidence it read.
type Report struct {
	Violations []Violation
	Jobs       int // rows of jobs
	Runs       int // rows of runs
	Enqueues   int // acknowledged enqueues in the client log
	Cancels    int // answered cancels in the client log
	Executions int // distinct (job, generation) executions in the jobs log
	Completion int // completions and refusals in the server log
	Slots      int // due slots of recurring jobs accounted for
}

// Summary is one line saying how much was checked and how it went.
func (r *Report) Summary() string {
	verdict := "ok"
	if len(r.Violations) > 0 {
		verdict = fmt.Sprintf("%d violations", len(r.Violations))
	}
	return fmt.Sprintf("%s: %d jobs, %d runs, %d acknowledged enqueues, %d cancels, %d executions, %d server completions, %d recurring slots checked",
		verdict, r.Jobs, r.Runs, r.Enqueues, r.Cancels, r.Executions, r.Completion, r.Slots)
}

// Check reads the evidence and applies every rule. It returns an error only
// when the evidence cannot be read; broken guarantees are Violations.
func Check(ctx context.Context, in Input) (*Report, error) {
	e, err := load(ctx, in)
	if err != nil {
		return nil, err
	}
	r := &Report{Jobs: len(e.jobs)}
	for _, n := range e.runs {
		r.Runs += len(n)
	}
	for _, c := range e.client {
		switch c.rec.Op {
		case OpEnqueue:
			r.Enqueues++
		case OpCancel:
			r.Cancels++
		}
	}
	r.Executions, r.Completion = len(e.execs), len(e.server)
	for _, rule := range []func(*evidence) []Violation{
		checkIntegrity, checkEmpty, checkLost, checkNeverRan, checkCancels, checkUnasked, checkOverlap,
		checkEarlyStarts, checkRuns, checkServerLog,
	} {
		r.Violations = append(r.Violations, rule(e)...)
	}
	var slots []Violation
	r.Slots, slots = checkSlots(e)
	r.Violations = append(r.Violations, slots...)
	slices.SortStableFunc(r.Violations, func(a, b Violation) int { return strings.Compare(a.JobID, b.JobID) })
	return r, nil
}

// Execution is one (job, generation) of a jobs log.
type Execution struct {
	JobID      string
	Generation int64
	Start, End int64 // Unix ns; End 0 when it has none: its process was killed
	Last       int64 // its latest line: the last time it was seen running
}

// ReadExecutions judges a jobs log alone, without a database: it returns
// its executions, ordered by job and then start, and the violations the log
// shows by itself: a generation started twice (RuleGeneration), and two
// executions of one job that overlap (RuleOverlap), an execution being live
// from its start to its last line. Fault tests whose jobs mark that they
// still run, often, judge with it what the processes were seen doing.
func ReadExecutions(path string) ([]Execution, []Violation, error) {
	lines, err := readLog[ExecRecord](path, true)
	if err != nil {
		return nil, nil, err
	}
	execs, dups := mergeExecs(lines)
	out := make([]Execution, len(execs))
	for i, x := range execs {
		out[i] = Execution{JobID: x.jobID, Generation: x.generation, Start: x.start, End: x.end, Last: x.last}
	}
	seen := func(x *execution) (int64, string, bool) { return x.last, "", true }
	return out, overlaps(execs, dups, seen), nil
}
