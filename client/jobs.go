package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sked-dev/sked/db"
)

// JobCreateRequest is the body of POST /jobs. Zero values are left out, so
// the server applies its defaults.
type JobCreateRequest struct {
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	RunAt          *time.Time      `json:"runAt,omitempty"` // one-off; nil: now
	Schedule       string          `json:"schedule,omitempty"`
	Timezone       string          `json:"timezone,omitempty"`
	MaxAttempts    int             `json:"maxAttempts,omitempty"`
	Timeout        db.Duration     `json:"timeout,omitempty"`
	Backoff        db.Duration     `json:"backoff,omitempty"`
	Jitter         db.Duration     `json:"jitter,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
	Overlap        string          `json:"overlap,omitempty"`
	Misfire        string          `json:"misfire,omitempty"`
	// ExpectSuccessWithin arms a recurring job's dead-man's switch.
	ExpectSuccessWithin db.Duration `json:"expectSuccessWithin,omitempty"`
}

// JobCreate creates a job. created is false when the idempotency key named
// an existing job, which is returned unchanged.
func (c *Client) JobCreate(ctx context.Context, req JobCreateRequest) (job db.Job, created bool, err error) {
	resp, err := c.doResponse(ctx, http.MethodPost, "/jobs", req, &job)
	if err != nil {
		return db.Job{}, false, err
	}
	return job, resp.StatusCode == http.StatusCreated, nil
}

// JobGet returns the job; an *Error unwrapping to db.ErrNotFound if it does
// not exist.
func (c *Client) JobGet(ctx context.Context, id string) (db.Job, error) {
	var job db.Job
	err := c.do(ctx, http.MethodGet, jobPath(id, ""), nil, &job)
	return job, err
}

// JobList returns a page of jobs, newest first, and the cursor of the next
// page ("" on the last). Zero fields of p are left to the server.
func (c *Client) JobList(ctx context.Context, p db.JobListParams) (jobs []db.Job, next string, err error) {
	q := url.Values{}
	setQuery(q, "state", string(p.State))
	setQuery(q, "type", p.Type)
	setQuery(q, "cursor", p.Cursor)
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	var page struct {
		Jobs       []db.Job `json:"jobs"`
		NextCursor string   `json:"nextCursor"`
	}
	if err := c.do(ctx, http.MethodGet, withQuery("/jobs", q), nil, &page); err != nil {
		return nil, "", err
	}
	return page.Jobs, page.NextCursor, nil
}

// JobCancel cancels a job no worker holds. When a worker holds it, the
// *Error is a 409 (unwrapping to db.ErrConflict) whose detail names the run.
func (c *Client) JobCancel(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, jobPath(id, ""), nil, nil)
}

// JobPause pauses a ready job and returns it; a 409 *Error otherwise.
func (c *Client) JobPause(ctx context.Context, id string) (db.Job, error) {
	return c.jobAction(ctx, id, "pause")
}

// JobResume resumes a paused job and returns it; a 409 *Error otherwise.
func (c *Client) JobResume(ctx context.Context, id string) (db.Job, error) {
	return c.jobAction(ctx, id, "resume")
}

// JobRetry moves a dead job back to ready and returns it; a 409 *Error
// otherwise.
func (c *Client) JobRetry(ctx context.Context, id string) (db.Job, error) {
	return c.jobAction(ctx, id, "retry")
}

// JobCancelRun asks the handler running the job to stop; a 409 *Error when
// the job is not running.
func (c *Client) JobCancelRun(ctx context.Context, id string) (db.Job, error) {
	return c.jobAction(ctx, id, "cancel-run")
}

// JobTrigger runs a ready job once now (for a schedule, an extra run that
// keeps the pending slot); a 409 *Error otherwise.
func (c *Client) JobTrigger(ctx context.Context, id string) (db.Job, error) {
	return c.jobAction(ctx, id, "trigger")
}

// JobSkip records the pending slot of a recurring job as missed and moves
// to the next.
func (c *Client) JobSkip(ctx context.Context, id string) (db.Job, error) {
	return c.jobAction(ctx, id, "skip")
}

// JobPauseUntil pauses a ready job with a reason and, unless until is
// zero, resumes it by itself at until.
func (c *Client) JobPauseUntil(ctx context.Context, id, reason string, until time.Time) (db.Job, error) {
	body := map[string]string{"reason": reason}
	if !until.IsZero() {
		body["until"] = until.Format(time.RFC3339Nano)
	}
	var job db.Job
	err := c.do(ctx, http.MethodPost, jobPath(id, "/pause"), body, &job)
	return job, err
}

// JobBackfill runs each past slot of the recurring job in [from, to] once.
func (c *Client) JobBackfill(ctx context.Context, id string, from, to time.Time) (db.Backfill, error) {
	var b db.Backfill
	err := c.do(ctx, http.MethodPost, jobPath(id, "/backfill"),
		map[string]string{"from": from.Format(time.RFC3339Nano), "to": to.Format(time.RFC3339Nano)}, &b)
	return b, err
}

func (c *Client) jobAction(ctx context.Context, id, action string) (db.Job, error) {
	var job db.Job
	err := c.do(ctx, http.MethodPost, jobPath(id, "/"+action), nil, &job)
	return job, err
}

// RunList returns a page of the job's runs, newest first, and the cursor of
// the next page (0 on the last).
func (c *Client) RunList(ctx context.Context, p db.RunListParams) (runs []db.Run, next int64, err error) {
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor > 0 {
		q.Set("cursor", strconv.FormatInt(p.Cursor, 10))
	}
	resp, err := c.doResponse(ctx, http.MethodGet, withQuery(jobPath(p.JobID, "/runs"), q), nil, &runs)
	if err != nil {
		return nil, 0, err
	}
	if h := resp.Header.Get("Sked-Next-Cursor"); h != "" {
		if next, err = strconv.ParseInt(h, 10, 64); err != nil {
			return nil, 0, fmt.Errorf("read runs of %s: Sked-Next-Cursor %q is not a number", p.JobID, h)
		}
	}
	return runs, next, nil
}

// jobPath is /jobs/{id} followed by suffix, with id escaped.
func jobPath(id, suffix string) string {
	return "/jobs/" + url.PathEscape(id) + suffix
}

func setQuery(q url.Values, name, value string) {
	if value != "" {
		q.Set(name, value)
	}
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
