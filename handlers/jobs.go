package handlers

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/schedule"
)

// Limits on the strings of a new job.
const (
	maxTypeLen           = 100
	maxIdempotencyKeyLen = 255
)

// jobCreateRequest is the body of POST /jobs. Pointers and raw fields tell an
// absent field from a zero one; durations and runAt are parsed by hand so
// that their errors name the field.
type jobCreateRequest struct {
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload"`
	RunAt          *string         `json:"runAt"`
	Schedule       string          `json:"schedule"`
	Timezone       string          `json:"timezone"`
	MaxAttempts    *int            `json:"maxAttempts"`
	Timeout        json.RawMessage `json:"timeout"`
	Backoff        json.RawMessage `json:"backoff"`
	Jitter         json.RawMessage `json:"jitter"`
	IdempotencyKey string          `json:"idempotencyKey"`
	Overlap        string          `json:"overlap"`
	Misfire        string          `json:"misfire"`
	// ExpectSuccessWithin arms a recurring job's dead-man's switch.
	ExpectSuccessWithin json.RawMessage `json:"expectSuccessWithin"`
}

// jobListResponse is the body of GET /jobs.
type jobListResponse struct {
	Jobs       []db.Job `json:"jobs"`                 // never null
	NextCursor string   `json:"nextCursor,omitempty"` // absent on the last page
}

// handleJobCreate serves POST /jobs: 201 and the new job, or 200 and the
// existing job when the idempotency key was seen before.
func (h *handler) handleJobCreate(w http.ResponseWriter, r *http.Request) {
	var req jobCreateRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		h.error(w, r, err)
		return
	}
	p, err := h.jobParams(&req, r.Header.Values("Idempotency-Key"))
	if err != nil {
		h.error(w, r, err)
		return
	}

	job, created, err := h.store.JobCreate(r.Context(), p)
	if err != nil {
		h.error(w, r, err)
		return
	}
	if !created {
		h.writeJSON(w, r, http.StatusOK, job)
		return
	}
	h.due(job.Type)
	w.Header().Set("Location", "/jobs/"+url.PathEscape(job.ID))
	h.writeJSON(w, r, http.StatusCreated, job)
}

// jobParams validates req as jobCreateParams does, then refuses disabled
// types and checks the payload of its kind. Every error is a
// *db.ValidationError.
func (h *handler) jobParams(req *jobCreateRequest, headerKeys []string) (db.JobCreateParams, error) {
	p, err := jobCreateParams(req, headerKeys)
	if err != nil {
		return p, err
	}
	if reason, ok := h.disabledTypes[p.Type]; ok {
		return p, &db.ValidationError{Field: "type", Msg: reason}
	}
	if h.validatePayload != nil {
		if err := h.validatePayload(p.Type, p.Payload); err != nil {
			var ve *db.ValidationError
			if !errors.As(err, &ve) {
				err = &db.ValidationError{Field: "payload", Msg: err.Error()}
			}
			return p, err
		}
	}
	return p, nil
}

// jobCreateParams validates req (and the Idempotency-Key header values) and
// fills in the defaults. Every error is a *db.ValidationError.
func jobCreateParams(req *jobCreateRequest, headerKeys []string) (db.JobCreateParams, error) {
	invalid := func(field, format string, args ...any) (db.JobCreateParams, error) {
		return db.JobCreateParams{}, &db.ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	p := db.JobCreateParams{
		Type:        req.Type,
		Schedule:    req.Schedule,
		Timezone:    req.Timezone,
		MaxAttempts: db.DefaultMaxAttempts,
		Timeout:     db.DefaultTimeout,
		Backoff:     db.DefaultBackoff,
	}

	switch {
	case req.Type == "":
		return invalid("type", "type is required: the kind of work, such as \"http\", \"exec\" or a handler's name")
	case len(req.Type) > maxTypeLen:
		return invalid("type", "type is %d characters long; at most %d are allowed", len(req.Type), maxTypeLen)
	case strings.IndexFunc(req.Type, func(c rune) bool { return !isTypeChar(c) }) >= 0:
		return invalid("type", "type %q may contain only letters, digits and _ . : -", req.Type)
	}

	payload, err := normalizePayload(req.Payload)
	if err != nil {
		return invalid("payload", "payload is not valid JSON: %v", err)
	}
	p.Payload = payload

	if req.Timezone != "" {
		if _, err := time.LoadLocation(req.Timezone); err != nil || req.Timezone == "Local" {
			return invalid("timezone", "timezone %q is not an IANA time zone name such as \"UTC\" or \"Europe/Berlin\"", req.Timezone)
		}
	}
	if req.RunAt != nil {
		if req.Schedule != "" {
			return invalid("runAt", "runAt and schedule cannot be used together: give runAt for a one-off job or schedule for a recurring one")
		}
		t, err := time.Parse(time.RFC3339Nano, *req.RunAt)
		if err != nil {
			return invalid("runAt", "runAt %q is not an RFC 3339 time such as \"2026-12-01T09:00:00Z\"", *req.RunAt)
		}
		p.RunAt = t
	}
	if req.Schedule != "" {
		if _, err := schedule.Parse(req.Schedule, req.Timezone); err != nil {
			return invalid("schedule", "schedule: %v", err)
		}
		if p.Timezone == "" {
			p.Timezone = "UTC"
		}
		p.Overlap, p.Misfire = db.OverlapSkip, db.MisfireRunOnce
	}

	if req.Overlap != "" {
		if req.Schedule == "" {
			return invalid("overlap", "overlap applies only to recurring jobs; remove it or add a schedule")
		}
		if req.Overlap != db.OverlapSkip && req.Overlap != db.OverlapQueueOne {
			return invalid("overlap", "overlap %q is not a policy; use %q (the default) or %q", req.Overlap, db.OverlapSkip, db.OverlapQueueOne)
		}
		p.Overlap = req.Overlap
	}
	if req.Misfire != "" {
		if req.Schedule == "" {
			return invalid("misfire", "misfire applies only to recurring jobs; remove it or add a schedule")
		}
		switch req.Misfire {
		case db.MisfireRunOnce, db.MisfireSkip, db.MisfireRunAll:
		default:
			return invalid("misfire", "misfire %q is not a policy; use %q (the default), %q or %q", req.Misfire, db.MisfireRunOnce, db.MisfireSkip, db.MisfireRunAll)
		}
		p.Misfire = req.Misfire
	}

	if req.MaxAttempts != nil {
		if *req.MaxAttempts < 1 {
			return invalid("maxAttempts", "maxAttempts must be at least 1, not %d; omit it for the default of %d", *req.MaxAttempts, db.DefaultMaxAttempts)
		}
		p.MaxAttempts = *req.MaxAttempts
	}
	durations := []struct {
		field    string
		raw      json.RawMessage
		dst      *time.Duration
		zeroOK   bool
		fallback time.Duration
	}{
		{"timeout", req.Timeout, &p.Timeout, false, db.DefaultTimeout},
		{"backoff", req.Backoff, &p.Backoff, false, db.DefaultBackoff},
		{"jitter", req.Jitter, &p.Jitter, true, 0},
		{"expectSuccessWithin", req.ExpectSuccessWithin, &p.ExpectSuccessWithin, true, 0},
	}
	for _, d := range durations {
		if isAbsent(d.raw) {
			continue
		}
		var v db.Duration
		if err := v.UnmarshalJSON(d.raw); err != nil {
			return invalid(d.field, "%s: %v", d.field, err)
		}
		switch {
		case v < 0:
			return invalid(d.field, "%s must not be negative, not %s", d.field, time.Duration(v))
		case v == 0 && !d.zeroOK:
			return invalid(d.field, "%s must be greater than zero; omit it for the default of %s", d.field, d.fallback)
		}
		*d.dst = time.Duration(v)
	}

	if p.ExpectSuccessWithin > 0 && req.Schedule == "" {
		return invalid("expectSuccessWithin", "expectSuccessWithin watches a schedule; remove it or add a schedule")
	}

	key, err := idempotencyKey(req.IdempotencyKey, headerKeys)
	if err != nil {
		return db.JobCreateParams{}, err
	}
	p.IdempotencyKey = key
	return p, nil
}

// isTypeChar reports whether c may appear in a job type.
func isTypeChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == ':' || c == '-'
}

// isAbsent reports whether a raw field was left out or given as null.
func isAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// normalizePayload returns raw compacted, or {} when it is absent or null.
func normalizePayload(raw json.RawMessage) (json.RawMessage, error) {
	if isAbsent(raw) {
		return json.RawMessage(`{}`), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// idempotencyKey merges the body's key with the Idempotency-Key header's. The
// header may be a structured-field string ("…", as the IETF draft has it) or
// bare. Both may be given only when they agree.
func idempotencyKey(body string, header []string) (string, error) {
	invalid := func(format string, args ...any) (string, error) {
		return "", &db.ValidationError{Field: "idempotencyKey", Msg: fmt.Sprintf(format, args...)}
	}
	if len(header) > 1 {
		return invalid("the Idempotency-Key header is given %d times; give one idempotency key", len(header))
	}
	key := body
	if len(header) == 1 {
		h := strings.TrimSpace(header[0])
		if uq, err := strconv.Unquote(h); err == nil && strings.HasPrefix(h, `"`) {
			h = uq
		}
		if h == "" {
			return invalid("the Idempotency-Key header is empty; give a key or leave the header out")
		}
		if body != "" && body != h {
			return invalid("idempotencyKey %q in the body and the Idempotency-Key header %q differ; give one key", body, h)
		}
		key = h
	}
	if len(key) > maxIdempotencyKeyLen {
		return invalid("idempotencyKey is %d bytes long; at most %d are allowed", len(key), maxIdempotencyKeyLen)
	}
	return key, nil
}

// handleJobGet serves GET /jobs/{id}.
func (h *handler) handleJobGet(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	job, err := h.store.JobGet(r.Context(), id)
	if err != nil {
		h.error(w, r, jobError(id, action{}, err))
		return
	}
	h.writeJSON(w, r, http.StatusOK, job)
}

// handleJobList serves GET /jobs?state=&type=&limit=&cursor=: a page of jobs,
// newest first, and the cursor of the next page.
func (h *handler) handleJobList(w http.ResponseWriter, r *http.Request) {
	q, err := queryParams(r, "state", "type", "limit", "cursor")
	if err != nil {
		h.error(w, r, err)
		return
	}
	p := db.JobListParams{State: db.JobState(q["state"]), Type: q["type"], Cursor: q["cursor"]}
	switch p.State {
	case "", db.StateReady, db.StateRunning, db.StateDone, db.StateDead, db.StateCancelled, db.StatePaused:
	default:
		h.error(w, r, &requestError{
			Status: http.StatusBadRequest, Field: "state",
			Msg: fmt.Sprintf("state %q is not a job state; use ready, running, done, dead, cancelled or paused", p.State),
		})
		return
	}
	if p.Limit, err = parseLimit(q["limit"]); err != nil {
		h.error(w, r, err)
		return
	}
	jobs, next, err := h.store.JobList(r.Context(), p)
	if err != nil {
		h.error(w, r, queryError(err))
		return
	}
	if jobs == nil {
		jobs = []db.Job{}
	}
	h.writeJSON(w, r, http.StatusOK, jobListResponse{Jobs: jobs, NextCursor: next})
}

// queryError makes bad input the store found in a query string (an unknown
// cursor) a 400, like the rest of the query string's faults.
func queryError(err error) error {
	var ve *db.ValidationError
	if errors.As(err, &ve) {
		return &requestError{Status: http.StatusBadRequest, Field: ve.Field, Msg: validationDetail(ve)}
	}
	if errors.Is(err, db.ErrInvalid) {
		return &requestError{Status: http.StatusBadRequest, Msg: err.Error()}
	}
	return err
}

// handleJobDelete serves DELETE /jobs/{id}: 204 when the job is (or already
// was) cancelled; 409 naming the run when a worker holds it.
func (h *handler) handleJobDelete(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if _, err := h.store.JobCancel(r.Context(), id); err != nil {
		h.error(w, r, jobError(id, actionCancel, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleJobResume serves POST /jobs/{id}/resume.
func (h *handler) handleJobResume(w http.ResponseWriter, r *http.Request) {
	h.jobAction(w, r, actionResume, h.store.JobResume, true)
}

// handleJobRetry serves POST /jobs/{id}/retry: a dead job back to ready.
func (h *handler) handleJobRetry(w http.ResponseWriter, r *http.Request) {
	h.jobAction(w, r, actionRetry, h.store.JobRetry, true)
}

// handleJobCancelRun serves POST /jobs/{id}/cancel-run: ask the running
// handler to stop at its next heartbeat.
func (h *handler) handleJobCancelRun(w http.ResponseWriter, r *http.Request) {
	h.jobAction(w, r, actionCancelRun, h.store.JobRequestCancelRun, false)
}

// jobAction runs a state change on the job named in the path and answers 200
// with the job; wake says whether the job may now be due.
func (h *handler) jobAction(w http.ResponseWriter, r *http.Request, a action, change func(context.Context, string) (db.Job, error), wake bool) {
	id := chi.URLParam(r, "id")
	job, err := change(r.Context(), id)
	if err != nil {
		h.error(w, r, jobError(id, a, err))
		return
	}
	if wake {
		h.due(job.Type)
	}
	h.writeJSON(w, r, http.StatusOK, job)
}

// action describes a state change for the detail of its 409.
type action struct {
	done  string // "cancelled", as in "it cannot be cancelled"
	which string // the states it applies to
	hint  string // what to do when a worker holds the job, with %s for the id
}

var (
	actionCancel = action{"cancelled", "only ready, paused and dead jobs can be cancelled",
		"ask the handler to stop with POST /jobs/%s/cancel-run"}
	actionPause = action{"paused", "only ready jobs can be paused",
		"pause it after the run ends, or stop the run with POST /jobs/%s/cancel-run"}
	actionResume    = action{"resumed", "only paused jobs can be resumed", ""}
	actionRetry     = action{"retried", "only dead jobs can be retried", ""}
	actionCancelRun = action{"asked to stop", "only a running job has a run to stop", ""}
)

// jobError gives err, from a store call on job id, a detail that names the
// job and, on a conflict, why and what to do instead.
func jobError(id string, a action, err error) error {
	if errors.Is(err, db.ErrNotFound) {
		return &detailError{err: err, detail: fmt.Sprintf("job %q does not exist", id)}
	}
	var ce *db.ConflictError
	if a.done == "" || !errors.As(err, &ce) {
		return err
	}
	var b strings.Builder
	if ce.Run != nil && ce.State == db.StateRunning {
		fmt.Fprintf(&b, "job %s is running on worker %s (run %d, attempt %d); it cannot be %s",
			id, cmp.Or(ce.Run.WorkerID, "(unknown)"), ce.Run.ID, ce.Run.Attempt, a.done)
	} else {
		fmt.Fprintf(&b, "job %s is %s; it cannot be %s", id, ce.State, a.done)
	}
	if ce.State == db.StateRunning && a.hint != "" {
		fmt.Fprintf(&b, " — "+a.hint, id)
	} else {
		b.WriteString(" (" + a.which + ")")
	}
	return &detailError{err: err, detail: b.String()}
}
