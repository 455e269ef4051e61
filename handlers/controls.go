package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/db"
)

// The operator's controls of a schedule beyond the lifecycle: pause with a
// reason and an end, run now, skip the next slot, backfill a range.

// pauseRequest is the optional body of POST /jobs/{id}/pause.
type pauseRequest struct {
	Reason string `json:"reason"`
	Until  string `json:"until"` // RFC 3339; empty: until resumed by hand
}

// backfillRequest is the body of POST /jobs/{id}/backfill.
type backfillRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// handleJobPause serves POST /jobs/{id}/pause, with an optional body
// {reason, until}: a pause with an end resumes by itself.
func (h *handler) handleJobPause(w http.ResponseWriter, r *http.Request) {
	has, err := h.hasBody(w, r)
	if err != nil {
		h.error(w, r, err)
		return
	}
	if !has {
		h.jobAction(w, r, actionPause, h.store.JobPause, false)
		return
	}
	var req pauseRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		h.error(w, r, err)
		return
	}
	p := db.JobPauseParams{ID: chi.URLParam(r, "id"), Reason: req.Reason}
	if req.Until != "" {
		t, err := timeField("until", req.Until)
		if err != nil {
			h.error(w, r, err)
			return
		}
		p.Until = t
	}
	h.jobAction(w, r, actionPause, func(ctx context.Context, _ string) (db.Job, error) {
		return h.store.JobPauseUntil(ctx, p)
	}, false)
}

// handleJobTrigger serves POST /jobs/{id}/trigger: one extra run now; a
// schedule keeps its pending slot.
func (h *handler) handleJobTrigger(w http.ResponseWriter, r *http.Request) {
	h.jobAction(w, r, actionTrigger, h.store.JobTrigger, true)
}

// handleJobSkip serves POST /jobs/{id}/skip: the pending slot is recorded
// missed (skipped) and the schedule moves to the following one.
func (h *handler) handleJobSkip(w http.ResponseWriter, r *http.Request) {
	h.jobAction(w, r, actionSkip, h.store.JobSkipNext, false)
}

// handleJobBackfill serves POST /jobs/{id}/backfill {from, to}: one run of
// each slot in the range, as one-off jobs; repeating it creates nothing.
func (h *handler) handleJobBackfill(w http.ResponseWriter, r *http.Request) {
	var req backfillRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		h.error(w, r, err)
		return
	}
	p := db.JobBackfillParams{ID: chi.URLParam(r, "id")}
	for _, f := range []struct {
		name, v string
		dst     *time.Time
	}{{"from", req.From, &p.From}, {"to", req.To, &p.To}} {
		t, err := timeField(f.name, f.v)
		if err != nil {
			h.error(w, r, err)
			return
		}
		*f.dst = t
	}
	b, err := h.store.JobBackfill(r.Context(), p)
	if err != nil {
		h.error(w, r, jobError(p.ID, actionBackfill, err))
		return
	}
	status := http.StatusOK
	if b.Created > 0 {
		status = http.StatusCreated
		h.dueAny()
	}
	h.writeJSON(w, r, status, b)
}

var (
	actionTrigger  = action{done: "triggered", which: "only a ready job that is not yet due can be run now", in: db.StateReady}
	actionSkip     = action{done: "skipped", which: "only the pending slot of a ready recurring job can be skipped", in: db.StateReady}
	actionBackfill = action{done: "backfilled", which: "only recurring jobs have slots to backfill"}
)
