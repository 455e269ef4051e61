// Package notify tells people when something needs them: a firing gave up,
// a job went dead, a schedule went quiet (no success within its
// expectSuccessWithin) or recovered, the wall clock stepped. Each
// notification is enqueued as a job, one per sink, so it is delivered,
// retried and recorded like any other: a `notify.http` job for the
// webhook, ntfy, Gotify, Slack and Discord sinks (run by the http kind,
// signed with --http-secret like every http job), a `notify.email` job for
// an SMTP sink (run by the email kind). Those types are the deliveries'
// own, so that sked serve runs them in slots of their own, apart from
// user jobs (see Types). A delivery's idempotency key makes a repeated
// event a no-op.
//
// Ping sends the start, success and fail signals of a job's runs to a
// healthchecks.io-style URL, the same way.
package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/web"
)

// Event kinds.
const (
	KindGaveUp    = "run_gave_up" // a firing spent its attempts
	KindDead      = "job_dead"
	KindQuiet     = "schedule_quiet"
	KindRecovered = "schedule_recovered"
	KindClockStep = "clock_step"
)

// Event is something to tell people about. A webhook sink receives it as
// JSON; the other sinks render Title, Message, Output and URL in their own
// formats.
type Event struct {
	Kind string `json:"kind"`
	// Who: the job, named by JobName when it has one (every sink shows
	// the name first, else the id).
	JobID    string `json:"jobId,omitempty"`
	JobName  string `json:"jobName,omitempty"`
	JobType  string `json:"jobType,omitempty"`
	Schedule string `json:"schedule,omitempty"` // empty for a one-off job
	// What happened: the run and firing (run_gave_up), the attempts
	// spent, the last error and the tail of the last run's output.
	RunID       int64     `json:"runId,omitempty"`
	Slot        time.Time `json:"slot,omitzero"`
	Attempts    int       `json:"attempts,omitempty"`
	MaxAttempts int       `json:"maxAttempts,omitempty"`
	Error       string    `json:"error,omitempty"`
	Output      string    `json:"output,omitempty"`
	// FirstFailure marks a schedule's first firing to give up since it
	// last succeeded (run_gave_up).
	FirstFailure bool `json:"firstFailure,omitempty"`
	// ExpectSuccessWithin is the dead-man's switch of a quiet schedule.
	ExpectSuccessWithin db.Duration `json:"expectSuccessWithin,omitzero"`
	// Title and Message are the text people read. Notify writes them from
	// the fields above when they are empty.
	Title   string `json:"title"`
	Message string `json:"message"`
	// URL is the job's page on the dashboard (the dashboard itself for
	// events about no job); Notify sets it when the Notifier has a
	// PublicURL.
	URL string    `json:"url,omitempty"`
	At  time.Time `json:"at"`
	// Key identifies the event: the same key is delivered once.
	Key string `json:"key"`
}

// JobCreator is the part of db.Store a Notifier needs.
type JobCreator interface {
	JobCreate(ctx context.Context, p db.JobCreateParams) (db.Job, bool, error)
}

// Notifier enqueues one job per sink for each event.
type Notifier struct {
	Store JobCreator
	Sinks []Sink
	// PublicURL is the address people open the dashboard at (sked serve
	// --public-url); every message then links to the job's page. Empty:
	// no links.
	PublicURL string
}

// The retries of a delivery: 8 attempts, 5 s apart and doubling (with
// jitter), over five to ten minutes in all.
const (
	deliveryAttempts = 8
	deliveryBackoff  = 5 * time.Second
	deliveryTimeout  = 30 * time.Second
)

// The types of the jobs that deliver notifications and pings. sked serve
// runs them in slots of their own (--notify-workers), which user jobs
// cannot take and which take no user job: a receiver that hangs holds
// only those slots, and a flood of user jobs does not hold back an alert.
// No remote worker may claim them: they carry the server's secrets (the
// SMTP password, the http signing secret) to sinks the server was given.
const (
	TypeHTTP  = "notify.http"  // run by the http kind
	TypeEmail = "notify.email" // run by the email kind
)

// kindOf is the built-in kind that runs each delivery type.
var kindOf = map[string]string{TypeHTTP: "http", TypeEmail: "email"}

// Types are the delivery job types, sorted.
func Types() []string { return []string{TypeEmail, TypeHTTP} }

// Handlers maps each delivery type to the handler of the kind that runs it,
// taken from kinds (handlers by job type); a type whose kind kinds lacks
// (email without an SMTP sink) is left out.
func Handlers[H any](kinds map[string]H) map[string]H {
	out := map[string]H{}
	for typ, kind := range kindOf {
		if h, ok := kinds[kind]; ok {
			out[typ] = h
		}
	}
	return out
}

// IsDelivery reports whether a job with this idempotency key delivers a
// notification or a ping. Such a job is not itself announced when it goes
// dead or gives up, since that announcement would go to the same sinks and
// fail the same way, one after another.
func IsDelivery(idempotencyKey string) bool { return DeliveryKind(idempotencyKey) != "" }

// DeliveryKind is "notification" or "ping" for a job with this idempotency
// key that delivers one, and "" for any other job: what lists show in the
// place of the name such a job does not have.
func DeliveryKind(idempotencyKey string) string {
	switch {
	case strings.HasPrefix(idempotencyKey, db.NotifyKeyPrefix):
		return "notification"
	case strings.HasPrefix(idempotencyKey, db.PingKeyPrefix):
		return "ping"
	}
	return ""
}

// Notify enqueues e, an event of no job (a clock step), for every sink of
// the server. Events of jobs go through Tell, which follows the job's
// settings.
func (n *Notifier) Notify(ctx context.Context, e Event) error {
	return n.enqueue(ctx, e, n.Sinks)
}

// enqueue enqueues e for each of sinks, with its Title, Message and URL
// filled in. An event already enqueued for a sink (same key) is not
// enqueued again.
func (n *Notifier) enqueue(ctx context.Context, e Event, sinks []Sink) error {
	if e.Title == "" {
		e.Title, e.Message = e.text()
	}
	if n.PublicURL != "" {
		e.URL = web.JobURL(n.PublicURL, e.JobID)
	}
	for _, s := range sinks {
		typ, body := s.delivery(e)
		payload, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode notification: %w", err)
		}
		err = n.create(ctx, db.JobCreateParams{
			Type: typ, Payload: payload,
			MaxAttempts: deliveryAttempts, Backoff: deliveryBackoff, Timeout: deliveryTimeout,
			IdempotencyKey: db.NotifyKeyPrefix + sinkID(s) + ":" + e.Key,
		})
		if err != nil {
			return fmt.Errorf("enqueue %s notification %s: %w", s.Kind, e.Key, err)
		}
	}
	return nil
}

// create creates a delivery job. Its key names the event: when the key is
// taken, the event was enqueued already, if in other words (a job's name
// or error changed since), and that is not enqueued again.
func (n *Notifier) create(ctx context.Context, p db.JobCreateParams) error {
	_, _, err := n.Store.JobCreate(ctx, p)
	var reused *db.KeyReusedError
	if errors.As(err, &reused) {
		return nil
	}
	return err
}
