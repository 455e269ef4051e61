package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/sked-dev/sked/db"
)

// Signal is what a ping tells a healthchecks.io-style check about a run.
type Signal string

// Signals, each sent to its own URL (healthchecks.io, and the checks that
// copy it: Uptime Kuma push monitors, Cronitor's telemetry).
const (
	PingStart   Signal = "start"   // a run started: URL/start
	PingSuccess Signal = "success" // a run succeeded: URL
	PingFail    Signal = "fail"    // a firing failed: URL/fail
)

// pingStartTimeout bounds the one attempt of a start ping; the end pings
// of a run wait that long after its start (see Ping).
const pingStartTimeout = 10 * time.Second

// CheckPingURL returns an error that says how to fix s unless it can be a
// job's ping URL: an absolute http:// or https:// URL, such as
// https://hc-ping.com/<uuid> or https://hc-ping.com/<ping key>/<slug>?create=1.
func CheckPingURL(s string) error {
	_, err := parsePingURL(s)
	return err
}

func parsePingURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, fmt.Errorf("ping URL %q: give the check's absolute http(s) URL, e.g. https://hc-ping.com/<uuid>", s)
	}
	return u, nil
}

// pingBody is what a ping posts; healthchecks.io keeps it in the check's log.
type pingBody struct {
	JobID   string    `json:"jobId"`
	JobName string    `json:"jobName,omitempty"`
	RunID   int64     `json:"runId,omitempty"`
	Slot    time.Time `json:"slot,omitzero"`
	Attempt int       `json:"attempt"`
	Error   string    `json:"error,omitempty"`
	Output  string    `json:"output,omitempty"`
}

// Ping enqueues an http job that POSTs signal sig of run r of job j to the
// check at pingURL: to pingURL/start, pingURL or pingURL/fail (a query
// such as ?create=1 stays at the end). The JSON body names the job, the
// run, its slot and attempt and, on success and fail, r's error and output
// tail. Its idempotency key is the signal and the run, so a repeated ping
// is enqueued once.
//
// A start ping is tried once, for at most 10 s: a check told "start" after
// it was told the run ended would wait for an end that never comes and
// alarm, while a lost start only loses the run's duration. The success and
// fail pings are retried like notifications and fall due no sooner than
// 10 s after r.StartedAt, once the start ping's attempt is over.
//
// It returns an error if pingURL is not one CheckPingURL accepts or the
// job cannot be created.
func (n *Notifier) Ping(ctx context.Context, pingURL string, sig Signal, j db.Job, r db.Run) error {
	u, err := parsePingURL(pingURL)
	if err != nil {
		return err
	}
	body := pingBody{JobID: j.ID, JobName: j.Name, RunID: r.ID, Slot: db.Deref(r.Slot), Attempt: r.Attempt}
	p := db.JobCreateParams{
		Type: TypeHTTP, MaxAttempts: deliveryAttempts, Backoff: deliveryBackoff, Timeout: deliveryTimeout,
		IdempotencyKey: fmt.Sprintf("%s%s:%s:%d", db.PingKeyPrefix, sig, j.ID, r.ID),
	}
	switch sig {
	case PingStart:
		u = u.JoinPath("start")
		p.MaxAttempts, p.Timeout = 1, pingStartTimeout
	case PingSuccess, PingFail:
		if sig == PingFail {
			u = u.JoinPath("fail")
		}
		body.Error, body.Output = r.Error, r.Output
		if r.StartedAt != nil {
			p.RunAt = r.StartedAt.Add(pingStartTimeout)
		}
	default:
		return fmt.Errorf("ping %s: unknown signal %q", j.ID, sig)
	}
	if p.Payload, err = json.Marshal(httpPayload{URL: u.String(), Method: "POST", Body: body}); err != nil {
		return fmt.Errorf("encode ping: %w", err)
	}
	if err := n.create(ctx, p); err != nil {
		return fmt.Errorf("enqueue %s ping of job %s: %w", sig, j.ID, err)
	}
	return nil
}
