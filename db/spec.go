package db

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
)

// Fingerprint identifies the job p defines: two creates with the same
// idempotency key and the same fingerprint are one request sent twice; with
// different fingerprints, two requests (see KeyReusedError). The key is left
// out, and so is a one-off job's due time: a client that retries computes
// it anew ("in an hour"), and the job stays as first created.
func (p JobCreateParams) Fingerprint() string {
	p.IdempotencyKey, p.RunAt = "", time.Time{}
	b, _ := json.Marshal(p) // plain fields: it cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// SpecOf is the definition of j as the parameters that would create it
// again, with its defaults filled in: what JobRedefine changes and JobPut
// compares. A one-off job's due time is not part of it.
func SpecOf(j Job) JobCreateParams {
	return JobCreateParams{
		Name: j.Name, Type: j.Type, Payload: j.Payload, Schedule: j.Schedule, Timezone: j.Timezone,
		MaxAttempts: j.MaxAttempts, Timeout: time.Duration(j.Timeout), Backoff: time.Duration(j.Backoff),
		Jitter: time.Duration(j.Jitter), IdempotencyKey: j.IdempotencyKey, Overlap: j.Overlap, Misfire: j.Misfire,
		ExpectSuccessWithin: time.Duration(j.ExpectSuccessWithin), Notify: j.Notify,
	}
}

// KeyReusedError is returned by a create whose idempotency key a job holds
// that another request made. It unwraps to ErrInvalid.
type KeyReusedError struct {
	Key string
	Job Job // the job that holds the key
	// Index is the element of the request that gave the key (0 for a
	// single create), and Field names it: "jobs[Index].idempotencyKey" in
	// a batch, else empty.
	Index int
	Field string
	// InBatch is set when that job is an earlier one of the same batch,
	// which was not created: the batch was refused whole.
	InBatch bool
}

func (e *KeyReusedError) Error() string {
	if e.InBatch {
		return fmt.Sprintf("idempotency key %q is given to two different jobs of the batch; give each its own key (nothing was created)", e.Key)
	}
	return fmt.Sprintf("idempotency key %q was used by a different request, which created job %s; "+
		"send that request again, or use a new key for a new one", e.Key, e.Job.ID)
}

func (e *KeyReusedError) Unwrap() error { return ErrInvalid }

// MaxNameLen bounds a job's name.
const MaxNameLen = 100

var namePattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// ulidPattern matches a job id (a ULID), which a name must not look like:
// a name is accepted wherever an id is.
var ulidPattern = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)

// The times a request may give (a job's runAt, a pause's end, a backfill's
// range, a test clock): from the Unix epoch to well before the year 10000,
// which RFC 3339 cannot write, so that no slot, jitter or backoff from
// such a time is stored that no answer could hold.
var (
	EarliestTime = time.Unix(0, 0).UTC()
	LatestTime   = time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// CheckTime returns a *ValidationError on field for a t outside
// [EarliestTime, LatestTime).
func CheckTime(field string, t time.Time) error {
	if t.Before(EarliestTime) || !t.Before(LatestTime) {
		return &ValidationError{Field: field, Msg: fmt.Sprintf("%s %s is out of range: give a time from %d to %d",
			field, t.Format(time.RFC3339Nano), EarliestTime.Year(), LatestTime.Year()-1)}
	}
	return nil
}

// routeWords are the path segments after /jobs/ that name a route rather
// than a job: a job of that name could not be reached as /jobs/{name}/….
var routeWords = []string{"batch", "by-name"}

// CheckName returns a *ValidationError for a name that is not ASCII
// letters, digits, '-', '_' and '.', at most MaxNameLen long, that begins
// with '-', looks like a job id, is a word of the API's paths, or is only
// dots. It judges a name given to a job (created, renamed, defined by
// name); a job that has one already is read by it whatever it is.
func CheckName(name string) error {
	invalid := func(format string, args ...any) error {
		return &ValidationError{Field: "name", Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case !namePattern.MatchString(name):
		return invalid("name %q may hold only ASCII letters, digits, '-', '_' and '.'", name)
	case len(name) > MaxNameLen:
		return invalid("name is %d characters long; at most %d are allowed", len(name), MaxNameLen)
	case strings.HasPrefix(name, "-"):
		// sked show -nightly would read it as a flag: the name could be
		// given only after --.
		return invalid("name %q begins with '-': names may not begin with '-', which a command line reads as a flag; "+
			"pick one that begins with a letter, a digit, '_' or '.'", name)
	case ulidPattern.MatchString(name):
		return invalid("name %q looks like a job id; pick one that does not", name)
	case slices.Contains(routeWords, name):
		return invalid("name %q is a word of the API's paths (/jobs/%s); pick another", name, name)
	case strings.Trim(name, ".") == "":
		// "." and ".." are the directory and its parent in a URL's path:
		// /jobs/.. is / to a browser, a client or a proxy.
		return invalid("name %q is only dots, which a URL's path reads as a directory; pick another", name)
	}
	return nil
}

// idEntropy is the random part of job ids: from crypto/rand, so that an id
// cannot be guessed from another (ulid's default is math/rand seeded with
// the process's start time), and increasing within a millisecond, so that
// ids sort as their jobs were created.
var idEntropy = &ulid.LockedMonotonicReader{MonotonicReader: ulid.Monotonic(rand.Reader, 0)}

// TextFault reports where s stops being text that every store keeps as it
// is: the offset of its first NUL character (nul true) or of its first
// byte that is not UTF-8; -1 when it has neither. PostgreSQL's text
// refuses both, which SQLite would keep.
func TextFault(s string) (offset int, nul bool) {
	for i, r := range s {
		switch {
		case r == 0:
			return i, true
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], string(utf8.RuneError)):
			return i, false
		}
	}
	return -1, false
}

// CheckText returns a *ValidationError naming field when s, its value, is
// not text every store keeps as it is (see TextFault).
func CheckText(field, s string) error {
	switch i, nul := TextFault(s); {
	case i < 0:
		return nil
	case nul:
		return &ValidationError{Field: field, Msg: fmt.Sprintf("%s holds a NUL character (U+0000) at byte %d, which sked cannot store; remove it", field, i)}
	default:
		return &ValidationError{Field: field, Msg: fmt.Sprintf("%s is not UTF-8 text (byte %d is %#x), which sked cannot store; send UTF-8", field, i, s[i])}
	}
}

// NewID is a new job's id: a ULID of its creation time t, so that ids sort
// by when their jobs were created.
func NewID(t time.Time) string {
	return ulid.MustNew(ulid.Timestamp(t), idEntropy).String()
}

// IDCeiling is above the id of every job created at or before t, whose
// ids NewID made: the least id of a job created a millisecond after t.
func IDCeiling(t time.Time) string {
	var id ulid.ULID
	if err := id.SetTime(ulid.Timestamp(t) + 1); err != nil {
		return "7ZZZZZZZZZZZZZZZZZZZZZZZZZ" // the greatest ULID
	}
	return id.String()
}

// IsID reports whether ref has the form of a job id rather than a name.
func IsID(ref string) bool { return ulidPattern.MatchString(ref) }

// Event is an entry of a job's timeline: a change of its definition, a
// firing that gave up, a schedule that recovered.
type Event struct {
	ID     int64           `json:"eventId"`
	JobID  string          `json:"jobId"`
	At     time.Time       `json:"at"`
	Kind   string          `json:"kind"`            // Event* below
	Actor  string          `json:"actor,omitempty"` // who made a change
	Detail json.RawMessage `json:"detail"`          // what, by kind
}

// Event kinds.
const (
	// EventChanged: the job's definition changed; Detail is a Changes.
	EventChanged = "changed"
	// EventGaveUp: a firing spent its attempts (a one-off job went dead).
	EventGaveUp = "gave_up"
	// EventRecovered: a schedule whose firing gave up succeeded again.
	EventRecovered = "recovered"
	// EventStarted: a run started, for a job with a ping URL (Notify.Ping).
	EventStarted = "started"
	// EventSucceeded: a run of a job with a ping URL succeeded.
	EventSucceeded = "succeeded"
	// EventQuiet: the dead-man's switch went off: no run of the schedule
	// succeeded within its ExpectSuccessWithin; Detail is a QuietEvent.
	EventQuiet = "quiet"

	// The controls, each recorded when it changed the job; Detail is a
	// ControlEvent.
	EventPaused          = "paused"
	EventResumed         = "resumed"
	EventCancelled       = "cancelled"
	EventRetried         = "retried"          // a dead job back to ready
	EventCancelRequested = "cancel_requested" // cancel-run: the running handler was asked to stop
	EventTriggered       = "triggered"
	EventSkipped         = "skipped"
	EventBackfilled      = "backfilled"
)

// RunEventKinds are the kinds of events about a run, whose Detail is a
// RunEvent.
var RunEventKinds = []string{EventGaveUp, EventRecovered, EventStarted, EventSucceeded}

// OutboxKinds are the kinds of events the notifier tells, read from the
// jobs' timeline (EventsAfter): the events of runs, and the dead-man's
// switch going off. Each is written in the transaction that made it, so it
// is told at least once.
var OutboxKinds = append(slices.Clone(RunEventKinds), EventQuiet)

// QuietEvent is the Detail of an EventQuiet: the switch's span, and the
// last success before it went off (nil: none since the job was created).
type QuietEvent struct {
	ExpectSuccessWithin Duration   `json:"expectSuccessWithin"`
	LastSuccessAt       *time.Time `json:"lastSuccessAt,omitempty"`
}

// ControlEvent is the Detail of a control's event: the job's state before
// and after, and what the control said.
type ControlEvent struct {
	From        JobState   `json:"from"`
	To          JobState   `json:"to"`
	Reason      string     `json:"reason,omitempty"`      // EventPaused
	Until       *time.Time `json:"until,omitempty"`       // EventPaused with an end
	Slot        *time.Time `json:"slot,omitempty"`        // EventSkipped: the slot skipped
	Generation  int64      `json:"generation,omitempty"`  // EventCancelRequested: the run asked to stop
	RangeFrom   *time.Time `json:"rangeFrom,omitempty"`   // EventBackfilled: the range's start
	RangeTo     *time.Time `json:"rangeTo,omitempty"`     // EventBackfilled: the range's end
	JobsCreated int        `json:"jobsCreated,omitempty"` // EventBackfilled
}

// actorKey is the context key of WithActor.
type actorKey struct{}

// WithActor returns ctx carrying who makes the changes made with it (e.g.
// "ann@laptop (192.0.2.7)"), which the store records on the events of
// the job's timeline.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom is the actor ctx carries (WithActor); "" when none.
func ActorFrom(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}

// repeatKey is the context key of WithRepeatReport.
type repeatKey struct{}

// WithRepeatReport returns ctx with which Store.RunFinish tells its caller
// that it answered a repeat: it sets *repeated when the report repeats the
// one its run already ended with, recorded the first time (a worker that
// lost the answer sends it again), so that nothing is counted twice.
func WithRepeatReport(ctx context.Context, repeated *bool) context.Context {
	return context.WithValue(ctx, repeatKey{}, repeated)
}

// MarkRepeatReport sets the flag of WithRepeatReport that ctx carries, if
// any.
func MarkRepeatReport(ctx context.Context) {
	if p, ok := ctx.Value(repeatKey{}).(*bool); ok {
		*p = true
	}
}

// Changes is the Detail of an EventChanged: each changed field's wire name
// with its value before and after.
type Changes map[string]Change

// Change is one field's value before and after a change.
type Change struct {
	From any `json:"from"`
	To   any `json:"to"`
}

// RunEvent is the Detail of the events about a run: EventGaveUp,
// EventRecovered, EventStarted and EventSucceeded.
type RunEvent struct {
	RunID      int64      `json:"runId,omitempty"` // absent from events recorded before it was kept
	Slot       *time.Time `json:"slot,omitempty"`
	Attempt    int        `json:"attempt"`    // the run's: all spent, for EventGaveUp
	Generation int64      `json:"generation"` // the run's lease generation
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	Error      string     `json:"error,omitempty"`
	Output     string     `json:"output,omitempty"` // the run's tail
	// FirstFailure marks, on EventGaveUp, a schedule's firing that gave up
	// after its last success (or since it began): its failing began.
	FirstFailure bool `json:"firstFailure,omitempty"`
}

// EventListParams pages a job's events, newest first.
type EventListParams struct {
	JobID  string // an id or a name
	Limit  int
	Cursor int64 // events with an id below this; 0 for the first page
}

// JobPutParams creates or redefines the job of Spec.Name (see Store.JobPut).
type JobPutParams struct {
	Spec   JobCreateParams
	Actor  string // who puts it, for the job's timeline
	DryRun bool   // decide, and write nothing
}

// JobPutResult is what a put did, or with DryRun would do.
type JobPutResult struct {
	Job     Job     `json:"job"`               // the job as the put leaves it
	Created bool    `json:"created"`           // a new job
	Changes Changes `json:"changes,omitempty"` // what changed of the job that held the name
}

// Changed reports whether the put writes anything.
func (r JobPutResult) Changed() bool { return r.Created || len(r.Changes) > 0 }

// JobRedefineParams changes a job's definition.
type JobRedefineParams struct {
	ID   string          // an id or a name
	Spec JobCreateParams // the whole new definition (see SpecOf)
	// IfSpec, when set, is the fingerprint of SpecOf the job the change was
	// made against: a job changed meanwhile is a conflict, not overwritten.
	IfSpec string
	Actor  string // who changes it, for the job's timeline
}

// Diff is what changes from definition a to b, by each field's wire name.
// Payloads that differ only in spacing are the same.
func Diff(a, b JobCreateParams) Changes {
	c := Changes{}
	add := func(field string, from, to any) {
		if !reflect.DeepEqual(from, to) {
			c[field] = Change{From: from, To: to}
		}
	}
	add("name", a.Name, b.Name)
	if !SameJSON(a.Payload, b.Payload) {
		c["payload"] = Change{From: a.Payload, To: b.Payload}
	}
	add("schedule", a.Schedule, b.Schedule)
	add("timezone", a.Timezone, b.Timezone)
	add("maxAttempts", a.MaxAttempts, b.MaxAttempts)
	add("timeout", Duration(a.Timeout), Duration(b.Timeout))
	add("backoff", Duration(a.Backoff), Duration(b.Backoff))
	add("jitter", Duration(a.Jitter), Duration(b.Jitter))
	add("overlap", a.Overlap, b.Overlap)
	add("misfire", a.Misfire, b.Misfire)
	add("expectSuccessWithin", watch(a.ExpectSuccessWithin), watch(b.ExpectSuccessWithin))
	add("notify", a.Notify, b.Notify)
	return c
}

// watch is a dead-man's switch's window as a change shows it: nil (JSON
// null) for none, not "0s".
func watch(d time.Duration) any {
	if d == 0 {
		return nil
	}
	return Duration(d)
}

// SameJSON reports whether a and b are the same JSON text but for spacing
// and for how strings are escaped (&, <, > or é written as themselves or
// as \u0026, \u003C, \u00e9, as encoders differ): their tokens are
// equal, in order, numbers as written. Text that is not JSON is compared
// byte for byte.
func SameJSON(a, b []byte) bool {
	da, dbb := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	dbb.UseNumber()
	for {
		ta, errA := da.Token()
		tb, errB := dbb.Token()
		switch {
		case errA == io.EOF && errB == io.EOF:
			return true
		case errA != nil && errA != io.EOF, errB != nil && errB != io.EOF:
			return bytes.Equal(a, b)
		case errA != nil || errB != nil || ta != tb:
			return false
		}
	}
}

// NotifyText is n as the database keeps it: JSON, or "" for none.
func NotifyText(n *Notify) string {
	if n == nil {
		return ""
	}
	b, _ := json.Marshal(n) // plain fields: it cannot fail
	return string(b)
}

// ParseNotify reads NotifyText's form.
func ParseNotify(s string) (*Notify, error) {
	if s == "" {
		return nil, nil
	}
	var n Notify
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return nil, fmt.Errorf("stored notify settings %q: %w", s, err)
	}
	return &n, nil
}
