package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sked-dev/sked/db"
)

// jobBatchRequest is the body of POST /jobs/batch. Each job is decoded on
// its own (see batchElement), so that a problem names its element.
type jobBatchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// jobBatchResponse is the body of a POST /jobs/batch answer.
type jobBatchResponse struct {
	Jobs []db.Job `json:"jobs"` // in the order of the request
}

// handleJobBatch serves POST /jobs/batch: every job is validated as POST
// /jobs validates one, then all are created in one transaction, or none.
// A bad element answers 422 with field "jobs[i].field". A job whose
// idempotency key is known is not created again; the existing job stands in
// its place in the answer.
func (h *handler) handleJobBatch(w http.ResponseWriter, r *http.Request) {
	var req jobBatchRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		h.error(w, r, err)
		return
	}
	switch {
	case len(r.Header.Values("Idempotency-Key")) > 0:
		// Not read: a client retrying under it would create every job again.
		h.error(w, r, &db.ValidationError{Field: "Idempotency-Key",
			Msg: "a batch does not take the Idempotency-Key header: give each job its own idempotencyKey in the body (nothing was created)"})
		return
	case len(req.Jobs) == 0:
		h.error(w, r, &db.ValidationError{Field: "jobs", Msg: "jobs is empty; give at least one job"})
		return
	case len(req.Jobs) > db.MaxBatch:
		h.error(w, r, &db.ValidationError{Field: "jobs",
			Msg: fmt.Sprintf("jobs has %d elements; at most %d are allowed per request", len(req.Jobs), db.MaxBatch)})
		return
	}
	ps := make([]db.JobCreateParams, len(req.Jobs))
	for i, raw := range req.Jobs {
		p, err := h.batchElement(raw)
		var ve *db.ValidationError
		if errors.As(err, &ve) {
			err = elementError(i, ve)
		}
		if err != nil {
			h.error(w, r, err)
			return
		}
		ps[i] = p
	}
	jobs, err := h.store.JobCreateBatch(r.Context(), ps)
	if err != nil {
		h.error(w, r, err)
		return
	}
	byType := map[string]int{}
	for _, j := range jobs {
		byType[j.Type]++
	}
	for typ, n := range byType {
		h.due(typ, n)
	}
	h.writeJSON(w, r, http.StatusCreated, jobBatchResponse{Jobs: jobs})
}

// batchElement decodes and checks one job of a batch as POST /jobs does its
// body; a body's problem (not an object, malformed) is a
// *db.ValidationError of the element.
func (h *handler) batchElement(raw json.RawMessage) (db.JobCreateParams, error) {
	var req jobCreateRequest
	if err := decodeJSON(bytes.NewReader(raw), &req); err != nil {
		if re := (*requestError)(nil); errors.As(err, &re) {
			return db.JobCreateParams{}, &db.ValidationError{Msg: strings.Replace(re.Msg, "request body", "the job", 1)}
		}
		return db.JobCreateParams{}, err
	}
	return h.jobParams(&req, nil)
}

// elementError is ve, of element i of a batch, named by its place:
// "jobs[1].timeout: …", or "jobs[1]: …" when ve names no field.
func elementError(i int, ve *db.ValidationError) error {
	element := fmt.Sprintf("jobs[%d]", i)
	if ve.Field == "" {
		return &db.ValidationError{Field: element, Msg: element + ": " + ve.Msg}
	}
	detail := validationDetail(ve)
	if !strings.HasPrefix(detail, ve.Field) {
		detail = ve.Field + ": " + detail
	}
	return &db.ValidationError{Field: element + "." + ve.Field, Msg: element + "." + detail}
}
