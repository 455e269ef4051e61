// Package wire holds what both ends of sked's HTTP API must agree on: the
// bodies of the worker protocol (POST /claims, /jobs/{id}/heartbeat and
// /jobs/{id}/complete), the body of a new job (POST /jobs), the workers
// view (GET /workers), and the protocol's limits. The server (package
// handlers) decodes or writes them and the Go client (package client)
// encodes or reads them, so neither keeps a copy of its own;
// only a new job's body the server decodes into a form of its own, with
// raw fields, so that each error names its field (JobCreateRequest is what
// that form reads).
//
// Fields the server must tell absent from zero are pointers, and durations
// it validates are raw JSON (a Go duration string such as "30s", made by
// DurationJSON), so that a bad value is refused with an error naming its
// field.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sked-dev/sked/db"
)

// Limits of the worker protocol.
const (
	// DefaultClaimWait is how long POST /claims waits for a due job when the
	// request does not say, and how long the Go client asks it to wait. It
	// stays below MaxClaimWait and the server's write timeout.
	DefaultClaimWait = 25 * time.Second
	// MaxClaimWait caps a claim's wait below the server's write timeout.
	MaxClaimWait = 50 * time.Second
	// MaxClaim is the most jobs one claim may take; the server answers 422
	// past it.
	MaxClaim = 100
	// MinLease is the shortest lease a worker may ask for.
	MinLease = 300 * time.Millisecond
	// MaxLease is the longest lease a worker may ask for.
	MaxLease = 24 * time.Hour
)

// ClaimRequest is the body of POST /claims: lease up to Max (nil: one) due
// jobs of Types to WorkerID for Lease (absent: db.DefaultLease), waiting up
// to Wait (absent: DefaultClaimWait) for one to become due.
type ClaimRequest struct {
	WorkerID string          `json:"workerId"`
	Types    []string        `json:"types"`
	Max      *int            `json:"max,omitempty"`
	Lease    json.RawMessage `json:"lease,omitempty"`
	Wait     json.RawMessage `json:"wait,omitempty"`
}

// ClaimIDHeader names a POST /claims (any text of up to 64 bytes, unique
// among its worker's claims), for a POST /workers/stopping that must end its
// wait; optional. A header, not a field of the body, so that a server that
// does not know it (and refuses unknown fields) ignores it.
const ClaimIDHeader = "Sked-Claim-Id"

// ActorHeader names who sends a request (a person, a script), for the
// events it records; optional, printable text.
const ActorHeader = "Sked-Actor"

// NextCursorHeader, on a page of jobs, runs or events, is the cursor of the
// next page: the cursor query parameter of the request for it (GET /jobs
// has it in its body's nextCursor too).
const NextCursorHeader = "Sked-Next-Cursor"

// ClaimResendHeader, on a POST /claims, names (by its ClaimIDHeader) the
// worker's claim that got no answer (its connection broke): the server
// may have claimed jobs for it that it never heard of. When the server
// that answered that claim still knows what it answered (the same node,
// not restarted, within minutes), the answer holds those jobs again, as
// far as the claim's leases still hold them, renewed from now, and nothing
// newly claimed; the worker runs those it does not run already and did not
// run (the same job and generation), so that none waits for its lease to
// run out and is charged a failed attempt without having run.
const ClaimResendHeader = "Sked-Claim-Resend"

// Claimed is one job of a claim's answer: the job as claimed, its run and
// the lease generation every later write must name.
type Claimed struct {
	db.Job
	RunID      int64 `json:"runId"`
	Generation int64 `json:"generation"`
}

// MarshalJSON writes c as one object, the job's fields as the API shows
// them (db.Job.MarshalJSON) with runId and generation: the method of the
// embedded job, promoted, would write the job alone.
func (c Claimed) MarshalJSON() ([]byte, error) {
	job, err := c.Job.MarshalJSON()
	if err != nil {
		return nil, err
	}
	job = bytes.TrimSuffix(bytes.TrimSpace(job), []byte("}"))
	return fmt.Appendf(job, `,"runId":%d,"generation":%d}`, c.RunID, c.Generation), nil
}

// ClaimResponse is the body of a POST /claims answer.
type ClaimResponse struct {
	Claims []Claimed `json:"claims"` // never null
	// Waited is how long after the request arrived the claim was made, at
	// the earliest: a worker that measures from when it sent the request
	// knows its leases began no sooner than then plus Waited, however long
	// the long poll held it. Absent from older servers: 0.
	Waited db.Duration `json:"waited"`
}

// HeartbeatRequest is the body of POST /jobs/{id}/heartbeat: extend the
// lease held with Generation (required) to Lease from now (absent: as long
// as the claim leased the job for).
type HeartbeatRequest struct {
	Generation *int64          `json:"generation"`
	Lease      json.RawMessage `json:"lease,omitempty"`
}

// HeartbeatResponse is the body of a heartbeat's answer.
type HeartbeatResponse struct {
	LeaseUntil      time.Time `json:"leaseUntil"`
	CancelRequested bool      `json:"cancelRequested"`
}

// CompleteRequest is the body of POST /jobs/{id}/complete: how the run
// leased with Generation (required) ended. The answer is the job as it
// moved on.
type CompleteRequest struct {
	Generation *int64     `json:"generation"`
	Outcome    db.Outcome `json:"outcome"`
	Error      string     `json:"error,omitempty"`
	Retryable  *bool      `json:"retryable,omitempty"` // for failed and timed_out; absent: true
	Output     string     `json:"output,omitempty"`
}

// JobCreateRequest is the body of POST /jobs and PUT /jobs/by-name/{name}:
// a job's definition. Zero values are left out, so the server applies its
// defaults.
type JobCreateRequest struct {
	// Name names the job: unique among jobs that are not cancelled, and
	// accepted wherever its id is.
	Name    string          `json:"name,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
	RunAt   *time.Time      `json:"runAt,omitempty"` // one-off; nil: now
	// RunIn makes a one-off job due this long after the server's now (not
	// this machine's), instead of at RunAt.
	RunIn          db.Duration `json:"runIn,omitempty"`
	Schedule       string      `json:"schedule,omitempty"`
	Timezone       string      `json:"timezone,omitempty"`
	MaxAttempts    int         `json:"maxAttempts,omitempty"`
	Timeout        db.Duration `json:"timeout,omitempty"`
	Backoff        db.Duration `json:"backoff,omitempty"`
	Jitter         db.Duration `json:"jitter,omitempty"`
	IdempotencyKey string      `json:"idempotencyKey,omitempty"`
	Overlap        string      `json:"overlap,omitempty"`
	Misfire        string      `json:"misfire,omitempty"`
	// ExpectSuccessWithin arms a recurring job's dead-man's switch.
	ExpectSuccessWithin db.Duration `json:"expectSuccessWithin,omitempty"`
	// Notify is the job's own notification settings; nil: the server's.
	Notify *db.Notify `json:"notify,omitempty"`
}

// RequestOf is the request that gives a job the definition p (as
// db.SpecOf reads it off a job).
func RequestOf(p db.JobCreateParams) JobCreateRequest {
	return JobCreateRequest{
		Name: p.Name, Type: p.Type, Payload: p.Payload, Schedule: p.Schedule, Timezone: p.Timezone,
		MaxAttempts: p.MaxAttempts, Timeout: db.Duration(p.Timeout), Backoff: db.Duration(p.Backoff),
		Jitter: db.Duration(p.Jitter), IdempotencyKey: p.IdempotencyKey, Overlap: p.Overlap, Misfire: p.Misfire,
		ExpectSuccessWithin: db.Duration(p.ExpectSuccessWithin), Notify: p.Notify,
	}
}

// DurationJSON is d in the wire form of a duration, a Go duration string;
// nil (absent, so the default) for zero.
func DurationJSON(d time.Duration) json.RawMessage {
	if d == 0 {
		return nil
	}
	b, _ := db.Duration(d).MarshalJSON() // a string: it cannot fail
	return b
}

// WorkerStoppedRequest is the body of POST /workers/stopped: a worker that
// has shut down says so, so that it is not taken for one still serving its
// types.
type WorkerStoppedRequest struct {
	WorkerID string `json:"workerId"`
}

// WorkerStoppingRequest is the body of POST /workers/stopping: a worker
// that begins to stop has its claims waiting on the server answered at
// once.
type WorkerStoppingRequest struct {
	WorkerID string `json:"workerId"`
	// ClaimID, when set, ends only the claim sent with that id
	// (ClaimIDHeader), also when the claim reaches the server after the
	// stop (it then claims nothing); empty ends all the worker's waiting
	// claims.
	ClaimID string `json:"claimId,omitempty"`
}

// WorkersResponse is the body of GET /workers.
type WorkersResponse struct {
	At      time.Time `json:"at"`
	Workers []Worker  `json:"workers"` // never null; most recently seen first
	// SeenWithin is how far back the workers that hold no job are listed:
	// an hour. It is absent from a server that keeps no record of workers
	// (lists only those holding jobs).
	SeenWithin db.Duration `json:"seenWithin,omitzero"`
	// Truncated says more jobs were running than one page (500), which
	// is all that was read, but for one job past it of each worker that
	// would otherwise look silent.
	Truncated bool `json:"truncated"`
}

// Worker is one worker of GET /workers: what it claims and runs, when it
// was last seen claiming, and how far its heartbeats have extended its
// leases.
type Worker struct {
	WorkerID string `json:"workerId"`
	// Types are the job types it claims; []: any type. Absent when the
	// store has no record of it: it holds jobs, but its last claim was over
	// a week ago, or before the server recorded workers.
	Types []string `json:"types,omitzero"`
	// FirstSeenAt and LastSeenAt are its first and last recorded claims,
	// whether or not they found a job. A claim is recorded as it begins,
	// at most every db.WorkerSeenEvery per worker. A pool inside sked
	// serve with a free slot claims every second or so; sked work's claims
	// wait on the server for a job (25 s by default, MaxClaimWait at most)
	// and begin again at once. So a live worker's LastSeenAt is at most
	// about that old, unless it is busy on all its slots: then it claims
	// nothing, but holds jobs. See SilentAt.
	FirstSeenAt *time.Time `json:"firstSeenAt,omitempty"`
	LastSeenAt  *time.Time `json:"lastSeenAt,omitempty"`
	// StoppedAt is when it said it shut down (POST /workers/stopped);
	// absent while it has not since its last claim.
	StoppedAt *time.Time `json:"stoppedAt,omitempty"`
	// LastClaimAt is when its newest live run began (its claim).
	LastClaimAt *time.Time `json:"lastClaimAt,omitempty"`
	// LeaseUntil is the latest lease end among its jobs; each heartbeat
	// moves it on, and a lease that passes is taken back by the reaper.
	LeaseUntil *time.Time  `json:"leaseUntil,omitempty"`
	Running    []WorkerJob `json:"running"` // never null
	// Silent is SilentAt the response's At: the worker seems gone without
	// saying so.
	Silent bool `json:"silent"`
}

// SilentAfter is how long a live worker that holds no job goes at most
// without a recorded claim: claims are recorded at most every
// db.WorkerSeenEvery, and sked work's claims wait on the server up to
// MaxClaimWait.
const SilentAfter = MaxClaimWait + 2*db.WorkerSeenEvery

// SilentAt says whether w seems gone at now without having said so: it
// holds no job, has not said it stopped, and was last seen over
// SilentAfter before now (killed, cut off from the server, or stopped
// without telling it).
func (w Worker) SilentAt(now time.Time) bool {
	seen := w.LastSeen()
	return len(w.Running) == 0 && w.StoppedAt == nil && (seen == nil || now.Sub(*seen) > SilentAfter)
}

// LastSeen is the later of w's last recorded claim and its newest live
// run's start; nil when it has neither.
func (w Worker) LastSeen() *time.Time {
	if w.LastSeenAt == nil || w.LastClaimAt != nil && w.LastClaimAt.After(*w.LastSeenAt) {
		return w.LastClaimAt
	}
	return w.LastSeenAt
}

// WorkerJob is a job a worker holds and its live run (nil when it has
// none: its lease ended between the two reads).
type WorkerJob struct {
	Job db.Job  `json:"job"`
	Run *db.Run `json:"run,omitempty"`
}
