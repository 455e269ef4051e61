// Package notify tells people when something needs them: a job went dead, a
// schedule went quiet (no success within its expectSuccessWithin), the wall
// clock stepped. Each notification is enqueued as an ordinary `http` job, so
// it is delivered, retried, signed (--http-secret) and recorded like any
// other; its idempotency key makes a repeated event a no-op.
package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/sked-dev/sked/db"
)

// Event kinds.
const (
	KindDead      = "job_dead"
	KindQuiet     = "schedule_quiet"
	KindRecovered = "schedule_recovered"
	KindClockStep = "clock_step"
)

// Event is something to tell people about.
type Event struct {
	Kind    string    `json:"kind"`
	JobID   string    `json:"jobId,omitempty"`
	JobType string    `json:"jobType,omitempty"`
	Title   string    `json:"title"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
	// Key identifies the event: the same key is delivered once.
	Key string `json:"key"`
}

// Sink kinds.
const (
	SinkWebhook = "webhook" // POST the event as JSON (signed like every http job)
	SinkNtfy    = "ntfy"    // publish to an ntfy topic
	SinkGotify  = "gotify"  // push a Gotify message
)

// Sink is where notifications go.
type Sink struct {
	Kind  string
	URL   string // webhook: the URL; ntfy: the server root; gotify: the server root
	Topic string // ntfy
	Token string // gotify application token
}

// ParseSink reads a sink from its flag form:
//
//	webhook:https://example.com/hooks/sked
//	ntfy:https://ntfy.sh/my-topic
//	gotify:https://gotify.example.com/?token=AbC…
func ParseSink(s string) (Sink, error) {
	kind, rawURL, ok := strings.Cut(s, ":")
	if !ok {
		return Sink{}, fmt.Errorf("notify sink %q: write it as kind:URL, e.g. webhook:https://example.com/hook, ntfy:https://ntfy.sh/topic or gotify:https://host/?token=T", s)
	}
	if kind != SinkWebhook && kind != SinkNtfy && kind != SinkGotify {
		return Sink{}, fmt.Errorf("notify sink %q: unknown kind %q; use webhook, ntfy or gotify", s, kind)
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Sink{}, fmt.Errorf("notify sink %q: %q is not an absolute http(s) URL", s, rawURL)
	}
	switch kind {
	case SinkNtfy:
		topic := strings.Trim(u.Path, "/")
		if topic == "" || strings.Contains(topic, "/") {
			return Sink{}, fmt.Errorf("notify sink %q: give the topic as the URL's path, e.g. ntfy:https://ntfy.sh/my-topic", s)
		}
		return Sink{Kind: kind, URL: u.Scheme + "://" + u.Host + "/", Topic: topic}, nil
	case SinkGotify:
		token := u.Query().Get("token")
		if token == "" {
			return Sink{}, fmt.Errorf("notify sink %q: give the application token as ?token=…", s)
		}
		return Sink{Kind: kind, URL: u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/") + "/message", Token: token}, nil
	default:
		return Sink{Kind: kind, URL: u.String()}, nil
	}
}

// httpPayload is the payload of an `http` job (see worker.HTTPPayload).
type httpPayload struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    any               `json:"body"`
}

// request is the http job payload that delivers e to sink.
func (s Sink) request(e Event) httpPayload {
	switch s.Kind {
	case SinkNtfy:
		return httpPayload{URL: s.URL, Method: "POST", Body: map[string]any{
			"topic": s.Topic, "title": e.Title, "message": e.Message, "tags": []string{"sked", e.Kind}, "priority": 4,
		}}
	case SinkGotify:
		return httpPayload{URL: s.URL, Method: "POST", Headers: map[string]string{"X-Gotify-Key": s.Token},
			Body: map[string]any{"title": e.Title, "message": e.Message, "priority": 7}}
	default:
		return httpPayload{URL: s.URL, Method: "POST", Body: e}
	}
}

// JobCreator is the part of db.Store a Notifier needs.
type JobCreator interface {
	JobCreate(ctx context.Context, p db.JobCreateParams) (db.Job, bool, error)
}

// Notifier enqueues one http job per sink for each event.
type Notifier struct {
	Store JobCreator
	Sinks []Sink
}

// Notify enqueues e for every sink. An event already enqueued (same key) is
// not enqueued again.
func (n *Notifier) Notify(ctx context.Context, e Event) error {
	for i, s := range n.Sinks {
		payload, err := json.Marshal(s.request(e))
		if err != nil {
			return fmt.Errorf("encode notification: %w", err)
		}
		_, _, err = n.Store.JobCreate(ctx, db.JobCreateParams{
			Type: "http", Payload: payload, MaxAttempts: 8, Backoff: 5 * time.Second, Timeout: 30 * time.Second,
			IdempotencyKey: fmt.Sprintf("notify:%d:%s", i, e.Key),
		})
		if err != nil {
			return fmt.Errorf("enqueue %s notification %s: %w", s.Kind, e.Key, err)
		}
	}
	return nil
}
