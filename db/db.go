// Package db is sked's storage contract: the job and run types, their states,
// the Store interface, the parameters of its methods and the errors callers
// branch on. It imports only the standard library; db/engine implements it
// over the dialects in db/sqlite and db/postgres, and handlers and worker use
// it without knowing which database they hold.
package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Errors returned by every Store. Backends translate driver errors into these
// at their edge; nothing above db/ sees sql.ErrNoRows or a driver code.
var (
	// ErrNotFound is returned when the named job does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict is returned when the job's state forbids the change: a
	// cancel or pause of a job a worker holds, a retry of a job that is not
	// dead. The returned error is a *ConflictError naming the state (and the
	// run, when a worker holds the job).
	ErrConflict = errors.New("conflict")
	// ErrStale is returned by heartbeat and finish when the caller's lease
	// generation no longer holds the job: the lease expired and was reaped,
	// or another worker claimed it since. Nothing was changed.
	ErrStale = errors.New("stale lease generation")
	// ErrInvalid is returned, wrapped in a *ValidationError, for bad input.
	ErrInvalid = errors.New("invalid input")
	// ErrStorageFull is returned by any write when the disk (or the file
	// size limit) holding the database is exhausted. The write was rolled
	// back whole; it can succeed once space is freed.
	ErrStorageFull = errors.New("database storage is full")
	// ErrBusy is returned by any write that could not take the locks it
	// needs within the store's bound: on SQLite, the database's write lock
	// within 5 s (another process held it, or this process's own writes
	// queued ahead for that long); on PostgreSQL, a row's lock within
	// lock_timeout, or a deadlock or serialization failure that aborted
	// the transaction. Nothing was written, and nothing of it will be;
	// retrying later can succeed.
	ErrBusy = errors.New("database is locked")
	// ErrCommitUnknown is returned by a write whose COMMIT was sent and
	// whose answer was lost (the connection to PostgreSQL broke, or the
	// caller's context ended while it was out): it may have been made, or
	// not. A claim that fails so may have leased jobs to its worker:
	// RunsHeld names them.
	ErrCommitUnknown = errors.New("whether the write was committed is not known")
	// ErrCorrupt is returned by any call that found the database's file
	// damaged (SQLite's SQLITE_CORRUPT, PostgreSQL's data_corrupted). The
	// store is not ready from then on.
	ErrCorrupt = errors.New("database is corrupt")
	// ErrUnreachable is returned by any call that could not reach the
	// database server (PostgreSQL down, restarting or refusing
	// connections) before it sent anything: nothing was written, and
	// retrying later can succeed.
	ErrUnreachable = errors.New("database server is unreachable")
)

// ConflictError says why a change was refused. It unwraps to ErrConflict.
type ConflictError struct {
	State JobState // the job's state when the change was refused
	Run   *Run     // the live run, when a worker holds the job
	Msg   string   // what was refused, for a person
}

func (e *ConflictError) Error() string { return e.Msg }
func (e *ConflictError) Unwrap() error { return ErrConflict }

// ValidationError is bad input in one field. It unwraps to ErrInvalid.
type ValidationError struct {
	Field string // wire name of the field, e.g. "schedule"
	Msg   string // what is wrong and how to fix it
}

// Error is Msg, prefixed with the field, if any, unless Msg begins by
// naming it ("type is required"), as most messages of the API do.
func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	if rest, ok := strings.CutPrefix(e.Msg, e.Field); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, ":")) {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// JobState is where a job is in its lifecycle.
type JobState string

// Job states. ready jobs wait for next_run_at; running jobs are leased to a
// worker; done, dead and cancelled are final for one-off jobs (a recurring job
// goes back to ready after each firing and only ends when cancelled).
const (
	StateReady     JobState = "ready"
	StateRunning   JobState = "running"
	StateDone      JobState = "done"
	StateDead      JobState = "dead"
	StateCancelled JobState = "cancelled"
	StatePaused    JobState = "paused"
)

// Final reports whether a job in state s has ended: done, dead or
// cancelled. A recurring job ends only when cancelled.
func (s JobState) Final() bool {
	return s == StateDone || s == StateDead || s == StateCancelled
}

// Outcome is how a run ended.
type Outcome string

// Run outcomes. OutcomeReleased means the run was handed back unfinished
// (at a graceful shutdown, or before it started) and does not count as an
// attempt.
const (
	OutcomeRunning      Outcome = "running"
	OutcomeSucceeded    Outcome = "succeeded"
	OutcomeFailed       Outcome = "failed"
	OutcomeTimedOut     Outcome = "timed_out"
	OutcomeLeaseExpired Outcome = "lease_expired"
	OutcomeCancelled    Outcome = "cancelled"
	OutcomeMissed       Outcome = "missed"
	OutcomeReleased     Outcome = "released"
)

// Overlap policies of a recurring job: what happens to slots that pass while
// a firing is still running.
const (
	OverlapSkip     = "skip"      // passed slots are recorded missed (default)
	OverlapQueueOne = "queue_one" // one run right after the current one ends
)

// Misfire policies of a recurring job: what happens to slots that passed
// while nothing could run them (the server was down).
const (
	MisfireRunOnce = "run_once" // one catch-up run, the rest missed (default)
	MisfireSkip    = "skip"     // all passed slots missed; resume at the next
	MisfireRunAll  = "run_all"  // every slot inside the catch-up window runs
)

// Reasons recorded on missed runs.
const (
	MissedOverlap   = "overlap"
	MissedDowntime  = "downtime"
	MissedPaused    = "paused"
	MissedClockStep = "clock_step"
)

// Job is one row of the jobs table: a one-off job or a recurring schedule.
type Job struct {
	ID string `json:"jobId"`
	// Name, when set, names the job for people: unique among the jobs that
	// are not cancelled, and accepted wherever a job id is.
	Name            string          `json:"name,omitempty"`
	Type            string          `json:"type"`
	Payload         json.RawMessage `json:"payload"`
	Schedule        string          `json:"schedule,omitempty"` // empty for one-off jobs
	Timezone        string          `json:"timezone,omitempty"`
	State           JobState        `json:"state"`
	NextRunAt       *time.Time      `json:"nextRunAt,omitempty"` // nil when not waiting
	Slot            *time.Time      `json:"slot,omitempty"`      // nominal slot of the current firing
	Attempt         int             `json:"attempt"`
	MaxAttempts     int             `json:"maxAttempts"`
	LeaseOwner      string          `json:"leaseOwner,omitempty"`
	LeaseUntil      *time.Time      `json:"leaseUntil,omitempty"`
	LeaseGeneration int64           `json:"leaseGeneration"`
	// LeaseFor is how long the claim that holds the lease leased the job
	// for (0: not known, claimed before sked kept it): a heartbeat that
	// names no lease renews it by as much.
	LeaseFor        Duration `json:"-"`
	IdempotencyKey  string   `json:"idempotencyKey,omitempty"`
	Overlap         string   `json:"overlap,omitempty"`
	Misfire         string   `json:"misfire,omitempty"`
	Timeout         Duration `json:"timeout"`
	Backoff         Duration `json:"backoff"`
	Jitter          Duration `json:"jitter,omitempty"`
	CancelRequested bool     `json:"cancelRequested,omitempty"`
	MissedSlots     int64    `json:"missedSlots"`
	LastError       string   `json:"lastError,omitempty"`
	// PauseReason and PauseUntil say why a job is paused and when it
	// resumes by itself (nil: when resumed by hand).
	PauseReason string     `json:"pauseReason,omitempty"`
	PauseUntil  *time.Time `json:"pauseUntil,omitempty"`
	// PauseRequested is set while a running recurring job is to pause
	// when its run ends (a pause asked for during the run): PauseReason
	// and PauseUntil are that pause's.
	PauseRequested bool `json:"pauseRequested,omitempty"`
	// ExpectSuccessWithin is the dead-man's switch of a recurring job: when
	// no run succeeded for that long, counted from WatchedFrom, the job is
	// marked quiet (QuietSince) and a notification goes out; a success
	// clears the mark.
	ExpectSuccessWithin Duration   `json:"expectSuccessWithin,omitempty"`
	LastSuccessAt       *time.Time `json:"lastSuccessAt,omitempty"`
	QuietSince          *time.Time `json:"quietSince,omitempty"`
	// WatchFrom is when the window of a job's switch began (nil: the job
	// has none), read-only in the API: the store keeps it to WatchedFrom
	// (KeepWatchFrom) on each job it reads and writes. The window starts
	// again at a success, and other than by one at a resume, a change of
	// the schedule or of the switch, sked's return from downtime
	// (JobWatchStart), which set it to their time. The API leaves it out
	// of a paused job (see MarshalJSON).
	WatchFrom *time.Time `json:"watchFrom,omitempty"`
	// Triggered is set while an operator's extra run (JobTrigger) is due or
	// running; that run does not move the schedule.
	Triggered bool `json:"triggered,omitempty"`
	// ParentID names the recurring job a backfill job runs a slot of.
	ParentID string `json:"parentId,omitempty"`
	// Notify is the job's own notification settings; nil: the server's.
	Notify *Notify `json:"notify,omitempty"`
	// FailingSince is set when a firing of the schedule gave up, until one
	// succeeds again (lifecycle.Failing): an operator's extra run
	// (JobTrigger) neither sets nor clears it.
	FailingSince *time.Time `json:"failingSince,omitempty"`
	// RescheduledAt is when the schedule of a recurring job changed while
	// its current firing (Slot) was running: the firing ends, or retries,
	// as it began, and the new schedule's slots count from this moment.
	// Nil once the job moves on to its next firing.
	RescheduledAt *time.Time `json:"rescheduledAt,omitempty"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	// RequestHash is the fingerprint of the create request that made the
	// job (JobCreateParams.Fingerprint), kept to tell a retry of that
	// request from another request with the same idempotency key. Empty
	// for a job created without a key.
	RequestHash string `json:"-"`
}

// Notify is a job's own notification settings.
type Notify struct {
	// On lists the events told: gave_up, failing, recovered, quiet, or
	// none alone; empty: the server's default events.
	On []string `json:"on,omitempty"`
	// Sinks lists where they go, in sked serve --notify's form; empty: the
	// server's sinks.
	Sinks []string `json:"sinks,omitempty"`
	// Ping is a URL pinged healthchecks.io-style as the job's runs start,
	// succeed (URL) and fail (URL/fail).
	Ping string `json:"ping,omitempty"`
}

// Deref is *t, or the zero time when t is nil.
func Deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// WatchedFrom is when the window of j's dead-man's switch began: the
// latest of its creation, its last success and WatchFrom.
func (j *Job) WatchedFrom() time.Time {
	from := j.CreatedAt
	for _, t := range []*time.Time{j.LastSuccessAt, j.WatchFrom} {
		if t != nil && t.After(from) {
			from = *t
		}
	}
	return from
}

// KeepWatchFrom sets WatchFrom to WatchedFrom for a job with a dead-man's
// switch, and to nil for one without: the store calls it on each job it
// reads and writes, so that WatchFrom says, to the API too, when the
// switch's window began (the switch goes off ExpectSuccessWithin later).
// Rows written before it was kept hold only the last start other than by
// a success, or nothing.
func (j *Job) KeepWatchFrom() {
	if j.ExpectSuccessWithin <= 0 {
		j.WatchFrom = nil
		return
	}
	from := j.WatchedFrom()
	j.WatchFrom = &from
}

// MarshalJSON writes j as the API shows it, but for WatchFrom, which it
// leaves out of a paused job: a paused schedule is not watched, so no
// window runs, and a whole one starts at its resume. The store keeps it
// meanwhile, for the resume (lifecycle.WatchAgain keeps a window a
// skipped slot starts later). &, < and > are written as they are, as the
// API's encoder writes the rest.
func (j Job) MarshalJSON() ([]byte, error) {
	type fields Job // Job without this method
	f := fields(j)
	if f.State == StatePaused {
		f.WatchFrom = nil
	}
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return []byte(buf.String()), nil
}

// Recurring reports whether the job has a schedule.
func (j *Job) Recurring() bool { return j.Schedule != "" }

// Run is one row of the runs table: one execution of a job, or one recurring
// slot that did not run (Outcome missed, with Reason).
type Run struct {
	ID         int64      `json:"runId"`
	JobID      string     `json:"jobId"`
	Slot       *time.Time `json:"slot,omitempty"`
	Attempt    int        `json:"attempt"`
	Generation int64      `json:"generation"`
	WorkerID   string     `json:"workerId,omitempty"`
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	Outcome    Outcome    `json:"outcome"`
	Error      string     `json:"error,omitempty"`
	Reason     string     `json:"reason,omitempty"` // why a slot was missed
	GaveUp     bool       `json:"gaveUp,omitempty"` // the firing's attempts are spent
	Output     string     `json:"output,omitempty"` // bounded tail
	// SlotCount and LastSlot make a missed run stand for SlotCount
	// consecutive slots, from Slot to LastSlot: those of one event past
	// the first 10,000, which get a row each. Zero and nil for one slot.
	SlotCount int64      `json:"slotCount,omitempty"`
	LastSlot  *time.Time `json:"lastSlot,omitempty"`
	// LateOutcome, LateError and LateFinishedAt record a completion its
	// worker sent after its lease had moved on (the reaper took the job
	// back, and it may have run again since): the write was refused, but
	// the execution happened and is shown here.
	LateOutcome    Outcome    `json:"lateOutcome,omitempty"`
	LateError      string     `json:"lateError,omitempty"`
	LateFinishedAt *time.Time `json:"lateFinishedAt,omitempty"`
}

// Claim is a job leased to a worker, with the run row written for it.
type Claim struct {
	Job   Job
	RunID int64
}

// JobCreateParams describes a new job: its definition. The caller
// (handlers) has validated it; zero values mean the defaults; times are
// absolute.
type JobCreateParams struct {
	Name           string // see Job.Name; checked by CheckName
	Type           string
	Payload        json.RawMessage
	RunAt          time.Time // one-off: when it is due (zero: now)
	Schedule       string    // recurring: cron expression
	Timezone       string
	MaxAttempts    int
	Timeout        time.Duration
	Backoff        time.Duration
	Jitter         time.Duration
	IdempotencyKey string
	Overlap        string
	Misfire        string
	// ExpectSuccessWithin arms the dead-man's switch of a recurring job.
	ExpectSuccessWithin time.Duration
	Notify              *Notify
}

// JobListParams filters and pages GET /jobs. Jobs come newest first; Cursor
// is the NextCursor of the previous page.
type JobListParams struct {
	State JobState
	Type  string
	Name  string
	// Health, when set, keeps only the schedules in trouble:
	// HealthFailing (the last firing gave up; not cancelled) or
	// HealthQuiet (no success within expectSuccessWithin).
	Health string
	// LeaseOwner, when set, keeps only the jobs leased to that worker (not
	// a filter of the API's: see Store.RunsHeld).
	LeaseOwner string
	Limit      int
	Cursor     string
}

// The values of JobListParams.Health.
const (
	HealthFailing = "failing"
	HealthQuiet   = "quiet"
)

// Where is the WHERE clause of p's filters (empty when none is set), for
// a page of jobs by id, newest first, and its arguments in order;
// placeholder writes the nth argument's placeholder in the store's SQL.
// A state is written into the text, not passed as an argument: each state
// then has a statement of its own, whose plan may use an index that holds
// some states only (a plan made for any state could not).
func (p JobListParams) Where(placeholder func(n int) string) (string, []any) {
	var (
		conds []string
		args  []any
	)
	state := string(p.State)
	if slices.Contains(AllStates, p.State) {
		conds, state = append(conds, "state = '"+state+"'"), ""
	}
	for _, f := range []struct{ cond, v string }{{"state =", state}, {"type =", p.Type}, {"name =", p.Name}, {"lease_owner =", p.LeaseOwner}, {"id <", p.Cursor}} {
		if f.v != "" {
			args = append(args, f.v)
			conds = append(conds, f.cond+" "+placeholder(len(args)))
		}
	}
	switch p.Health {
	case HealthFailing:
		// A cancelled schedule keeps its failing_since, and is in
		// trouble no more: the stats leave it out too.
		conds = append(conds, "failing_since IS NOT NULL AND state <> 'cancelled'")
	case HealthQuiet:
		conds = append(conds, "quiet_since IS NOT NULL")
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// RunListParams pages a job's runs, newest first.
type RunListParams struct {
	JobID  string
	Limit  int
	Cursor int64 // runs with an id below this; 0 for the first page
}

// RunClaimParams asks for up to Max due jobs of Types for WorkerID.
type RunClaimParams struct {
	WorkerID string
	// Types are the job types to claim; empty: any type. A claim reads
	// (and on PostgreSQL locks, until it commits) up to Max of each type's
	// earliest due jobs and takes the earliest Max of them, so its cost
	// grows with the number of types: name the types a worker serves
	// rather than claiming any type of many.
	Types []string
	Max   int
	Lease time.Duration
	// More says the caller claims again at once if this claim comes back
	// full: it has more free slots than Max. A store may then hold its
	// other writes back for the next claim, so that a spike of due jobs
	// is claimed before the completions of its first runs are recorded.
	More bool
	// Ahead also claims the jobs that fall due within Ahead from now; the
	// caller must start each one no sooner than its NextRunAt. A scheduler
	// that knows a spike is coming claims it before it is due instead of
	// after. Their runs record NextRunAt as their start.
	Ahead time.Duration
}

// RunHeartbeatParams extends a lease held with Generation.
type RunHeartbeatParams struct {
	JobID      string
	Generation int64
	// Lease is how long from now the lease is to last; 0: as long as the
	// claim leased the job for (Job.LeaseFor), or DefaultLease when that
	// is not known. A heartbeat never shortens a lease.
	Lease time.Duration
	// Remote marks a renewal sent through the worker protocol: a lease that
	// sked serve's own pool holds (see ServeWorkerPrefix) refuses it with a
	// *ConflictError.
	Remote bool
}

// Heartbeat is the answer to a renewed lease.
type Heartbeat struct {
	LeaseUntil      time.Time
	CancelRequested bool // someone asked the running handler to stop
}

// RunFinishParams records how the run leased with Generation ended.
type RunFinishParams struct {
	JobID      string
	Generation int64
	Outcome    Outcome // succeeded, failed, timed_out, cancelled or released
	Error      string
	Retryable  bool   // for failed and timed_out: may another attempt help?
	Output     string // bounded tail of the handler's output
	// Remote marks a report sent through the worker protocol: a live lease
	// that sked serve's own pool holds (see ServeWorkerPrefix) refuses it
	// with a *ConflictError, and nothing is recorded.
	Remote bool
}

// ServeWorkerPrefix starts the worker ids of sked serve's own pools. A sked
// serve that starts on SQLite hands back at once the jobs held under its
// host's such ids, as its dead predecessor's, so no remote worker may be
// named so: it would lose its jobs, while it runs them, to whoever claims
// next. Nor may one renew or report such a lease (Remote): its job's
// payload may carry the server's secrets, and the pool runs it.
const ServeWorkerPrefix = "serve:"

// ServeWorker reports whether a worker id names one of sked serve's own
// pools (it begins with ServeWorkerPrefix).
func ServeWorker(id string) bool { return strings.HasPrefix(id, ServeWorkerPrefix) }

// DeliveriesPoolSuffix ends the worker id of sked serve's deliveries'
// pool (notification and ping deliveries), which is its jobs' pool's id
// with this suffix: both name one node (see ServeNode).
const DeliveriesPoolSuffix = "-notify"

// ServeNode is the sked serve process (its host/pid-random part) that
// worker id names, the same for each of its pools; ok is false when id
// names no pool of sked serve's.
func ServeNode(id string) (node string, ok bool) {
	node, ok = strings.CutPrefix(id, ServeWorkerPrefix)
	return strings.TrimSuffix(node, DeliveriesPoolSuffix), ok
}

// ServeRunError refuses a remote renewal or report of a lease that sked
// serve's own pool holds.
func ServeRunError(j Job) error {
	return &ConflictError{State: j.State, Msg: fmt.Sprintf(
		"job %s is run by sked serve's own pool (%s); a remote worker may renew and report only the runs it claimed", j.ID, j.LeaseOwner)}
}

// Store keeps jobs and runs. Every method is one atomic unit. The store owns
// the clock: leases and due times come from Store.Now, never from a caller.
// Wherever a method takes a job's id it also takes a name: the job of that
// name that is not cancelled, or (for reads) the newest cancelled one.
type Store interface {
	// Now is the store's clock.
	Now() time.Time

	// JobCreate inserts a job. When p.IdempotencyKey is held by a job that
	// is not cancelled it changes nothing: it returns that job and
	// created=false if the same request made it, and a *KeyReusedError
	// otherwise. A p.Name held by a job that is not cancelled is a
	// *ConflictError.
	JobCreate(ctx context.Context, p JobCreateParams) (job Job, created bool, err error)
	// JobRedefine changes the definition of a job that is not cancelled to
	// p.Spec (all of it; see SpecOf) and records the change, who made it
	// and what changed, as an EventChanged. A running run finishes as it
	// began; a schedule's next slot comes from the new schedule. Its type
	// and idempotency key cannot change (*ValidationError), nor a one-off
	// job become recurring or the reverse. A job whose definition is no
	// longer p.IfSpec is a *ConflictError.
	JobRedefine(ctx context.Context, p JobRedefineParams) (Job, error)
	// JobPut creates the job p.Spec.Name names, or redefines the one that
	// holds the name when its definition differs from p.Spec; the result
	// says which, and what changed. With p.DryRun it decides the same and
	// writes nothing. The name is required.
	JobPut(ctx context.Context, p JobPutParams) (JobPutResult, error)
	// EventList returns a page of a job's events, newest first, and the
	// cursor of the next page (0 at the end); ErrNotFound if the job does
	// not exist.
	EventList(ctx context.Context, p EventListParams) (events []Event, next int64, err error)
	// EventsAfter returns up to limit events of the given kinds (all, if
	// none) that come after the event of id after (0: from the first), in
	// the order their transactions commit in: the notifier's outbox, read
	// with the last event returned as the next cursor. An event that cannot
	// yet be placed in that order (an older transaction still runs) is
	// returned later, never passed over.
	EventsAfter(ctx context.Context, after int64, kinds []string, limit int) ([]Event, error)
	// JobGet returns ErrNotFound if the job does not exist.
	JobGet(ctx context.Context, id string) (Job, error)
	// JobList returns a page of jobs and the cursor of the next ("" at the end).
	JobList(ctx context.Context, p JobListParams) (jobs []Job, next string, err error)
	// JobCancel stops a job that no worker holds: ready, paused or dead jobs
	// become cancelled; cancelling a cancelled job is a no-op. It returns a
	// *ConflictError (with the live run) when a worker holds the job or it is
	// done, and ErrNotFound if it does not exist. Cancel and claim race
	// atomically: exactly one wins.
	JobCancel(ctx context.Context, id string) (Job, error)
	// JobPause moves a ready job to paused (paused is a no-op); a running
	// recurring job moves to paused when its run ends (PauseRequested); a
	// *ConflictError otherwise.
	JobPause(ctx context.Context, id string) (Job, error)
	// JobResume moves a paused job back to ready. A recurring job resumes at
	// its next future slot; the slots that passed are recorded missed
	// (reason paused). A running job that was to pause when its run ends
	// no longer does. Resuming a ready job is a no-op; a *ConflictError
	// otherwise.
	JobResume(ctx context.Context, id string) (Job, error)
	// JobRetry moves a dead job back to ready, due now, with its attempts
	// reset; a *ConflictError for any other state.
	JobRetry(ctx context.Context, id string) (Job, error)
	// JobRequestCancelRun marks a running job so that its next heartbeat
	// tells the handler to stop; a *ConflictError if the job is not running.
	JobRequestCancelRun(ctx context.Context, id string) (Job, error)
	// JobNextDue returns when the earliest ready job of types (any, if empty)
	// is due, and false when none is waiting.
	JobNextDue(ctx context.Context, types []string) (time.Time, bool, error)

	// RunList returns a page of the job's runs, newest first, and the cursor
	// of the next page (0 at the end); ErrNotFound if the job does not exist.
	RunList(ctx context.Context, p RunListParams) (runs []Run, next int64, err error)
	// RunsLive returns the live run of each of jobs, in one read: the
	// running run of its lease generation (Job.LeaseGeneration), where it
	// has one, in any order.
	RunsLive(ctx context.Context, jobs []Job) ([]Run, error)
	// RunClaim leases up to p.Max due jobs of p.Types to p.WorkerID and
	// writes their run rows, in one transaction. It returns
	// no jobs, not an error, when none are due.
	RunClaim(ctx context.Context, p RunClaimParams) ([]Claim, error)
	// RunsHeld returns the jobs whose live lease worker holds, with their
	// running runs, as a claim answered them (a triggered run's slot is
	// its run's), in any order. After a claim failed with
	// ErrCommitUnknown, those its worker does not run already are the
	// ones a lost claim leased to it, if the worker id is its own.
	RunsHeld(ctx context.Context, worker string) ([]Claim, error)
	// RunHeartbeat extends the lease; ErrStale if p.Generation no longer
	// holds the job.
	RunHeartbeat(ctx context.Context, p RunHeartbeatParams) (Heartbeat, error)
	// RunFinish closes the run and moves the job on: done, retry with
	// backoff, dead, cancelled, back to ready (released), or the next slot
	// of a recurring job. ErrStale if p.Generation no longer holds the job;
	// nothing is changed then but the record of the late outcome on the
	// generation's run (Run.LateOutcome). A repeat of the report the
	// generation's run ended with (outcome, error and output: a worker that
	// lost the answer to it) changes nothing and returns the job as it is
	// now; a ctx of WithRepeatReport learns that it was one.
	RunFinish(ctx context.Context, p RunFinishParams) (Job, error)
	// RunReapExpired returns jobs whose lease ran out to ready (or dead when
	// their attempts are spent) and closes their runs as lease_expired. A
	// job taken back is due again at once, in its old place. It returns how
	// many it reaped.
	RunReapExpired(ctx context.Context) (int, error)

	Controller
	BatchCreator
	StatsReader
	ActivityReader
	ReadyChecker
	Pruner
	WorkerLister

	// Close releases the store's connections.
	Close() error
}

// Defaults applied by the store when a job does not say (see DefaultsFor).
const (
	DefaultMaxAttempts = 5
	DefaultTimeout     = time.Hour
	DefaultBackoff     = time.Second
	DefaultLease       = 30 * time.Second
	// MaxBackoff caps the exponential backoff between attempts.
	MaxBackoff = time.Hour
	// MaxAttempts is the most attempts a job may have (its maxAttempts,
	// and the defaults a server gives). With the backoff capped at
	// MaxBackoff, a thousand attempts already retry for weeks; a job that
	// must never give up is a schedule.
	MaxAttempts = 1000
	// OutputTailBytes bounds the output kept in a run: its last bytes.
	OutputTailBytes = 4096
	// ErrorHeadBytes bounds the error kept in a run: its first bytes.
	ErrorHeadBytes = 4096
	// MaxReasonLen bounds a pause's reason, in bytes: a sentence or two,
	// shown on every page of the job's events.
	MaxReasonLen = 1000
)

// Defaults are the attempts and backoff a job gets when it does not say.
type Defaults struct {
	MaxAttempts int
	Backoff     time.Duration
}

// DefaultsFor is sked's own Defaults for a job of type typ. An http job
// retries for most of a day, as the queues people know do: 25 attempts,
// its backoff doubling from a minute to the one-hour cap, waits of 1, 2, 4,
// …, 32 minutes and then an hour, each drawn from its upper half (14 to 19
// hours in all). Every other type: DefaultMaxAttempts attempts from
// DefaultBackoff.
func DefaultsFor(typ string) Defaults {
	if typ == "http" {
		return Defaults{MaxAttempts: 25, Backoff: time.Minute}
	}
	return Defaults{MaxAttempts: DefaultMaxAttempts, Backoff: DefaultBackoff}
}
