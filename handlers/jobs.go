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
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// jobListResponse is the body of GET /jobs.
type jobListResponse struct {
	Jobs       []db.Job `json:"jobs"`                 // never null
	NextCursor string   `json:"nextCursor,omitempty"` // absent on the last page
}

// handleJobCreate serves POST /jobs: 201 and the new job, or 200 and the
// existing job when the idempotency key was seen before.
func (h *handler) handleJobCreate(w http.ResponseWriter, r *http.Request) {
	p, err := h.jobCreateBody(w, r, "")
	if err != nil {
		h.error(w, r, err)
		return
	}

	job, created, err := h.createJob(r.Context(), p)
	if err != nil {
		h.error(w, r, err)
		return
	}
	if !created {
		h.writeJSON(w, r, http.StatusOK, job)
		return
	}
	w.Header().Set("Location", jobLocation(r, job.ID))
	h.writeJSON(w, r, http.StatusCreated, job)
}

// jobLocation is the address of job id for the Location header of an
// answer to r: /jobs/{id} under the API's mount prefix.
func jobLocation(r *http.Request, id string) string {
	return mountPrefix(r) + "/jobs/" + url.PathEscape(id)
}

// mountPrefix is what an http.StripPrefix in front of the API took off r's
// path (see web.Mount), "" when none did: the addresses the API answers
// with go under it, so that they hold wherever the API is mounted.
func mountPrefix(r *http.Request) string {
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
		if before, ok := strings.CutSuffix(u.Path, r.URL.Path); ok {
			return before
		}
	}
	return ""
}

// createJob creates the job of p and, when it is new, wakes whoever may
// claim it.
func (h *handler) createJob(ctx context.Context, p db.JobCreateParams) (db.Job, bool, error) {
	job, created, err := h.store.JobCreate(ctx, p)
	if err != nil {
		return db.Job{}, false, err
	}
	if created {
		h.due(job.Type, 1)
	}
	return job, created, nil
}

// JobCreate creates the job req defines, in-process, as POST /jobs does
// with req as its body: the same checks (JobParams), defaults and wake-up.
// created is false when req's idempotency key named an existing job, which
// is returned unchanged. A bad field is a *db.ValidationError (what the API
// answers 422 for).
func (a *API) JobCreate(ctx context.Context, req wire.JobCreateRequest) (job db.Job, created bool, err error) {
	p, err := a.JobParams(req)
	if err != nil {
		return db.Job{}, false, err
	}
	return a.h.createJob(ctx, p)
}

// JobPut gives the job named name the definition req, in-process, as
// PUT /jobs/by-name/{name} does with req as its body: it creates the job
// when no job that is not cancelled has the name, and otherwise changes
// that job to req (a put of the same definition changes nothing), with
// the same checks and wake-up. req.Name is name or empty. The timeline
// records the change by the actor ctx carries (db.WithActor), "embedded"
// when none.
func (a *API) JobPut(ctx context.Context, name string, req wire.JobCreateRequest) (db.JobPutResult, error) {
	if err := sameName(req.Name, name); err != nil {
		return db.JobPutResult{}, err
	}
	req.Name = name
	p, err := a.JobParams(req)
	var off *typeDisabledError
	if err != nil && !errors.As(err, &off) {
		return db.JobPutResult{}, err
	}
	return a.h.put(ctx, p, err, cmp.Or(db.ActorFrom(ctx), "embedded"), false)
}

// JobParams checks req as POST /jobs checks its body, at the store's now:
// req is encoded and decoded as that body is, then validated with this
// API's disabled types, notification settings and payload checks. It
// returns what the store creates the job from; a bad field is a
// *db.ValidationError.
func (a *API) JobParams(req wire.JobCreateRequest) (db.JobCreateParams, error) {
	// The payload is checked by the validation, which says what is wrong
	// with it; json.Marshal would refuse it with a message of its own.
	payload := req.Payload
	req.Payload = nil
	b, err := json.Marshal(req)
	if err != nil {
		return db.JobCreateParams{}, fmt.Errorf("encode job: %w", err)
	}
	var body jobCreateRequest
	if err := decodeJSON(bytes.NewReader(b), &body); err != nil {
		return db.JobCreateParams{}, err
	}
	body.Payload = payload
	return a.h.jobParams(&body, nil)
}

// jobCreateBody reads r's body, a create request, and checks it (jobParams)
// with the Idempotency-Key header. name, when not empty, is the job's name
// from the path: a name in the body must agree.
func (h *handler) jobCreateBody(w http.ResponseWriter, r *http.Request, name string) (db.JobCreateParams, error) {
	var req jobCreateRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		return db.JobCreateParams{}, err
	}
	if name != "" {
		if err := sameName(req.Name, name); err != nil {
			return db.JobCreateParams{}, err
		}
		req.Name = name
	}
	return h.jobParams(&req, r.Header.Values("Idempotency-Key"))
}

// sameName refuses a definition's name given that differs from name, the
// one it is put under.
func sameName(given, name string) error {
	if given != "" && given != name {
		return fieldError("name", "name %q in the definition differs from %q, the name it is put under; leave it out or make them agree", given, name)
	}
	return nil
}

// handleJobGet serves GET /jobs/{id}.
func (h *handler) handleJobGet(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	job, err := h.store.JobGet(r.Context(), id)
	if err != nil {
		h.error(w, r, jobError(id, action{}, err))
		return
	}
	h.writeDated(w, r, http.StatusOK, job)
}

// handleJobGetByName serves GET /jobs/by-name/{name}: GET /jobs/{id} for a
// name alone, whatever it looks like.
func (h *handler) handleJobGetByName(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if db.IsID(name) { // no name has this form; the store would read it as an id
		h.error(w, r, jobError(name, action{}, db.ErrNotFound))
		return
	}
	job, err := h.store.JobGet(r.Context(), name)
	if err != nil {
		h.error(w, r, jobError(name, action{}, err))
		return
	}
	h.writeDated(w, r, http.StatusOK, job)
}

// handleJobList serves GET /jobs?state=&type=&name=&health=&limit=&cursor=:
// a page of jobs, newest first, and the cursor of the next page, in the
// body and, as the runs and events lists have it, in the headers
// (nextPage).
func (h *handler) handleJobList(w http.ResponseWriter, r *http.Request) {
	q, err := queryParams(r, "state", "type", "name", "health", "limit", "cursor")
	if err != nil {
		h.error(w, r, err)
		return
	}
	p := db.JobListParams{State: db.JobState(q["state"]), Type: q["type"], Name: q["name"], Health: q["health"], Cursor: q["cursor"]}
	switch p.State {
	case "", db.StateReady, db.StateRunning, db.StateDone, db.StateDead, db.StateCancelled, db.StatePaused:
	case db.HealthFailing, db.HealthQuiet:
		h.error(w, r, &requestError{
			Status: http.StatusBadRequest, Field: "state",
			Msg: fmt.Sprintf("%q is not a job state: a %s schedule is ready (or running) and waits for its next slot; list them with health=%s", p.State, p.State, p.State),
		})
		return
	default:
		h.error(w, r, &requestError{
			Status: http.StatusBadRequest, Field: "state",
			Msg: fmt.Sprintf("state %q is not a job state; use ready, running, done, dead, cancelled or paused", p.State),
		})
		return
	}
	if p.Health != "" && p.Health != db.HealthFailing && p.Health != db.HealthQuiet {
		h.error(w, r, &requestError{
			Status: http.StatusBadRequest, Field: "health",
			Msg: fmt.Sprintf("health %q is not known; use failing (the last firing gave up) or quiet (no success within expectSuccessWithin)", p.Health),
		})
		return
	}
	if p.Cursor != "" && !db.IsID(p.Cursor) {
		h.error(w, r, &requestError{
			Status: http.StatusBadRequest, Field: "cursor",
			Msg: fmt.Sprintf("cursor %q is not a cursor of jobs; pass the nextCursor of the previous page", p.Cursor),
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
	if next != "" {
		nextPage(w, r, next, p.Limit)
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
// was) cancelled; 409 naming the run when a worker holds it. By name it
// cancels the live job of that name, and answers 204 as well when the
// newest job of that name is cancelled already, so that it can be repeated.
func (h *handler) handleJobDelete(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	_, err := h.store.JobCancel(r.Context(), id)
	if errors.Is(err, db.ErrNotFound) && !db.IsID(id) {
		if j, getErr := h.store.JobGet(r.Context(), id); getErr == nil && j.State == db.StateCancelled {
			err = nil
		}
	}
	if err != nil {
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
		h.due(job.Type, 1)
	}
	h.writeJSON(w, r, http.StatusOK, job)
}

// action describes a state change for the detail of its 409.
type action struct {
	done  string // "cancelled", as in "it cannot be cancelled"
	which string // the states it applies to
	hint  string // what to do when a worker holds the job, with %[1]s (or %s) for the id
	// in is the state it applies to, when a conflict in that state is
	// about something else, which the store's message says.
	in db.JobState
}

var (
	actionCancel = action{done: "cancelled", which: "only ready, paused and dead jobs can be cancelled",
		hint: "ask the handler to stop with POST /jobs/%[1]s/cancel-run; a schedule, which runs again, pauses when its run ends: " +
			"POST /jobs/%[1]s/pause, then cancel it"}
	actionPause = action{done: "paused", which: "only ready jobs, and running schedules (which pause when the run ends), can be paused",
		hint: "a one-off job's run is all of it: stop the run with POST /jobs/%s/cancel-run"}
	actionResume    = action{done: "resumed", which: "only paused jobs, and running schedules that were to pause, can be resumed", in: db.StatePaused}
	actionRetry     = action{done: "retried", which: "only dead jobs can be retried"}
	actionCancelRun = action{done: "asked to stop", which: "only a running job has a run to stop"}
)

// jobError gives err, from a store call on job id (an id or a name), a
// detail that names the job and, on a conflict, why and what to do instead.
func jobError(id string, a action, err error) error {
	if errors.Is(err, db.ErrNotFound) {
		detail := fmt.Sprintf("job %q does not exist", id)
		if !db.IsID(id) {
			detail += ": no job has that id or name"
		}
		return &detailError{err: err, detail: detail}
	}
	var ce *db.ConflictError
	if a.done == "" || !errors.As(err, &ce) {
		return err
	}
	if a.in != "" && ce.State == a.in {
		return &detailError{err: err, detail: ce.Msg}
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
