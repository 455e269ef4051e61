package notify

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sked-dev/sked/db"
)

// The events a job's settings choose (db.Notify.On).
const (
	OnGaveUp    = "gave_up"   // run_gave_up, and job_dead for a one-off job
	OnFailing   = "failing"   // run_gave_up of a schedule's first firing to give up since it last succeeded, and job_dead
	OnRecovered = "recovered" // schedule_recovered
	OnQuiet     = "quiet"     // schedule_quiet
	OnNone      = "none"      // no event: the job tells nothing (its ping is apart)
)

// CheckSettings returns an error that says how to fix n unless every event
// it names is known, every sink parses and, for an email sink, is one the
// server was started with (only the server holds SMTP credentials), and its
// ping URL is sound.
func (n *Notifier) CheckSettings(s *db.Notify) error {
	if s == nil {
		return nil
	}
	for _, on := range s.On {
		if on != OnGaveUp && on != OnFailing && on != OnRecovered && on != OnQuiet && on != OnNone {
			return &db.ValidationError{Field: "notify.on", Msg: fmt.Sprintf("%q is not an event; use %s, %s, %s or %s, or %s alone for none", on, OnGaveUp, OnFailing, OnRecovered, OnQuiet, OnNone)}
		}
	}
	if slices.Contains(s.On, OnNone) && len(s.On) > 1 {
		return &db.ValidationError{Field: "notify.on", Msg: fmt.Sprintf("%q tells no event, and stands alone; give it alone, or the events to tell", OnNone)}
	}
	if len(s.Sinks) > maxSinks {
		return &db.ValidationError{Field: "notify.sinks", Msg: fmt.Sprintf("notify.sinks lists %d sinks; at most %d are allowed", len(s.Sinks), maxSinks)}
	}
	for field, urls := range map[string][]string{"notify.sinks": s.Sinks, "notify.ping": {s.Ping}} {
		for _, u := range urls {
			if len(u) > maxURLLen {
				return &db.ValidationError{Field: field, Msg: fmt.Sprintf("%s holds a URL %d bytes long; at most %d are allowed", field, len(u), maxURLLen)}
			}
		}
	}
	if _, err := n.sinksOf(s); err != nil {
		return err
	}
	if s.Ping != "" {
		if err := CheckPingURL(s.Ping); err != nil {
			return &db.ValidationError{Field: "notify.ping", Msg: err.Error()}
		}
	}
	return nil
}

// Bounds of a job's notification settings: a few sinks, each URL of the
// length browsers and servers take.
const (
	maxSinks  = 10
	maxURLLen = 2048
)

// sinksOf is where events with settings s go: its own sinks, or the
// server's.
func (n *Notifier) sinksOf(s *db.Notify) ([]Sink, error) {
	if s == nil || len(s.Sinks) == 0 {
		return n.Sinks, nil
	}
	var out []Sink
	for _, spec := range s.Sinks {
		sink, err := ParseSink(spec)
		if err != nil {
			return nil, &db.ValidationError{Field: "notify.sinks", Msg: err.Error()}
		}
		if sink.Kind == SinkSMTP {
			i := slices.IndexFunc(n.Sinks, func(t Sink) bool { return t.Kind == SinkSMTP && t.SMTP.Name == sink.SMTP.Name })
			if i < 0 {
				return nil, &db.ValidationError{Field: "notify.sinks", Msg: fmt.Sprintf(
					"email sink %s is not one sked serve was started with (--notify); only those hold their passwords", sink.SMTP.Name)}
			}
			sink = n.Sinks[i]
		}
		out = append(out, sink)
	}
	return out, nil
}

// wants reports whether settings s choose event e: OnFailing chooses, of
// a schedule's give-ups, the first since it last succeeded.
func wants(s *db.Notify, e Event) bool {
	if s == nil || len(s.On) == 0 {
		return true
	}
	on := map[string]string{KindGaveUp: OnGaveUp, KindDead: OnGaveUp, KindRecovered: OnRecovered, KindQuiet: OnQuiet}[e.Kind]
	return slices.Contains(s.On, on) ||
		slices.Contains(s.On, OnFailing) && (e.Kind == KindDead || e.Kind == KindGaveUp && e.FirstFailure)
}

// Tell enqueues e, an event of job j, for the sinks j's settings choose
// (the server's sinks and every event, unless they say otherwise). The
// jobs that deliver notifications are not told about.
func (n *Notifier) Tell(ctx context.Context, j db.Job, e Event) error {
	if IsDelivery(j.IdempotencyKey) || !wants(j.Notify, e) {
		return nil
	}
	sinks, err := n.sinksOf(j.Notify)
	if err != nil {
		return fmt.Errorf("notify about job %s: %w", j.ID, err)
	}
	return n.enqueue(ctx, e, sinks)
}

// Deliver tells people, and a job's ping URL, about ev, an event of job j's
// timeline (db.OutboxKinds): a firing that gave up (job_dead for a one-off
// job), a schedule that recovered or went quiet, and the starts, successes
// and give-ups of a job with a ping URL. Each delivery's key is the event,
// so delivering it again is a no-op.
func (n *Notifier) Deliver(ctx context.Context, j db.Job, ev db.Event) error {
	if ev.Kind == db.EventQuiet {
		var q db.QuietEvent
		if err := json.Unmarshal(ev.Detail, &q); err != nil {
			return fmt.Errorf("read event %d of job %s: %w", ev.ID, j.ID, err)
		}
		return n.Tell(ctx, j, Quiet(j, ev.At, q.ExpectSuccessWithin))
	}
	var d db.RunEvent
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		return fmt.Errorf("read event %d of job %s: %w", ev.ID, j.ID, err)
	}
	// The run's id keys its deliveries. An event recorded before events
	// kept it is keyed by its own id, as it was then, so that one told
	// before an upgrade is not told again.
	r := db.Run{ID: cmp.Or(d.RunID, ev.ID), JobID: j.ID, Slot: d.Slot, Attempt: d.Attempt, Generation: d.Generation,
		StartedAt: d.StartedAt, FinishedAt: &ev.At, Error: d.Error, Output: d.Output, GaveUp: ev.Kind == db.EventGaveUp}
	if p := j.Notify; p != nil && p.Ping != "" && !IsDelivery(j.IdempotencyKey) {
		sig := map[string]Signal{db.EventStarted: PingStart, db.EventSucceeded: PingSuccess, db.EventGaveUp: PingFail}[ev.Kind]
		if sig != "" {
			if err := n.Ping(ctx, p.Ping, sig, j, r); err != nil {
				return err
			}
		}
	}
	switch {
	case ev.Kind == db.EventGaveUp && !j.Recurring():
		return n.Tell(ctx, j, Dead(j, r))
	case ev.Kind == db.EventGaveUp:
		e := GaveUp(j, r)
		e.FirstFailure = d.FirstFailure
		return n.Tell(ctx, j, e)
	case ev.Kind == db.EventRecovered:
		return n.Tell(ctx, j, Recovered(j, ev.At))
	}
	return nil
}

// sinkID names a sink in the keys of its deliveries, the same however the
// server's sinks are ordered.
func sinkID(s Sink) string {
	b, _ := json.Marshal(s) // plain fields: it cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
