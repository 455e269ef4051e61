package handlers

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// Changing a job's definition: PATCH /jobs/{id} with a JSON merge patch,
// PUT /jobs/by-name/{name} with the whole definition.

// mergePatchType is the media type of a JSON merge patch (RFC 7386).
const mergePatchType = "application/merge-patch+json"

// handleJobPatch serves PATCH /jobs/{id}: the job's definition, as the body
// of the POST /jobs that would create it, changed by a JSON merge patch
// (RFC 7386: a member sets a field, null removes it, an object merges into
// an object), is checked as POST /jobs checks a new job and becomes the
// job's. 200 and the job; 409 when the job changed between its read and
// the write (read it again and retry) or is cancelled.
func (h *handler) handleJobPatch(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	var patch map[string]json.RawMessage
	if err := h.decodeBodyAs(w, r, &patch, mergePatchType, "application/json"); err != nil {
		h.error(w, r, err)
		return
	}
	job, err := h.store.JobGet(r.Context(), id)
	if err != nil {
		h.error(w, r, jobError(id, action{}, err))
		return
	}
	spec := db.SpecOf(job)
	req, err := patchRequest(spec, patch)
	if err == nil {
		err = checkKept(job, req)
	}
	if err != nil {
		h.error(w, r, err)
		return
	}
	p, err := h.jobParams(&req, nil)
	if err != nil {
		h.error(w, r, err)
		return
	}
	// By id: the job read, even when another has taken its name since.
	job, err = h.store.JobRedefine(r.Context(), db.JobRedefineParams{ID: job.ID, Spec: p, IfSpec: spec.Fingerprint(), Actor: actorOf(r)})
	if err != nil {
		h.error(w, r, jobError(id, action{}, err))
		return
	}
	h.due(job.Type, 1)
	h.writeJSON(w, r, http.StatusOK, job)
}

// patchRequest is the create request of definition spec with the merge
// patch applied, decoded as POST /jobs decodes its body. A patch may not
// set runAt or runIn: a one-off job's due time is not part of its
// definition.
func patchRequest(spec db.JobCreateParams, patch map[string]json.RawMessage) (jobCreateRequest, error) {
	for _, field := range []string{"runAt", "runIn"} {
		if v, ok := patch[field]; ok && !isAbsent(v) {
			return jobCreateRequest{}, fieldError(field, "%s cannot be patched: a job's due time is not part of its definition; cancel the job and create a new one", field)
		}
	}
	if err := checkPatchNames(patch); err != nil {
		return jobCreateRequest{}, err
	}
	base, err := json.Marshal(wire.RequestOf(spec))
	if err != nil {
		return jobCreateRequest{}, fmt.Errorf("encode definition of %s: %w", spec.Name, err)
	}
	p, err := json.Marshal(patch)
	if err != nil {
		return jobCreateRequest{}, fmt.Errorf("encode patch: %w", err)
	}
	merged, err := jsonpatch.MergePatch(base, p)
	if err != nil {
		return jobCreateRequest{}, &requestError{Status: http.StatusBadRequest, Msg: "request body is not a JSON merge patch: " + err.Error()}
	}
	var req jobCreateRequest
	if err := decodeJSON(bytes.NewReader(merged), &req); err != nil {
		return jobCreateRequest{}, err
	}
	return req, nil
}

// checkPatchNames refuses a member of patch, or of its notify, named as a
// field in another case ("Jitter"). A merge patch applies members by their
// exact names, so {"Jitter": null} would remove nothing, while the merged
// definition's decoding folds case: {"Jitter": "1m"} would set jitter.
func checkPatchNames(patch map[string]json.RawMessage) error {
	if err := checkNames("", patch, wire.FieldNames(&jobCreateRequest{})); err != nil {
		return err
	}
	var notify map[string]json.RawMessage
	if raw, ok := patch["notify"]; ok && json.Unmarshal(raw, &notify) == nil {
		return checkNames("notify.", notify, wire.FieldNames(&db.Notify{}))
	}
	return nil
}

// checkNames refuses the first member of members, by name, that is not
// one of fields but is one of them in another case.
func checkNames(prefix string, members map[string]json.RawMessage, fields []string) error {
	for _, name := range slices.Sorted(maps.Keys(members)) {
		if slices.Contains(fields, name) {
			continue
		}
		for _, f := range fields {
			if strings.EqualFold(f, name) {
				return fieldError(prefix+name, "unknown field %q: a merge patch names each field exactly, in its case; did you mean %q?", prefix+name, f)
			}
		}
	}
	return nil
}

// checkKept refuses a change of what a job keeps for life, its type and
// whether it is recurring, before the checks of the new definition would
// refuse it with advice that does not apply (to drop the policies of a
// schedule removed, for one). The store refuses them too.
func checkKept(j db.Job, req jobCreateRequest) error {
	switch {
	case req.Type != j.Type:
		return fieldError("type", "job %s is of type %s; a type cannot change: create a new job", j.ID, j.Type)
	case (req.Schedule == "") != (j.Schedule == ""):
		return fieldError("schedule", "a one-off job cannot become recurring, nor a recurring job one-off: create a new job")
	}
	return nil
}

// dryRunParam reads r's dryRun query parameter: false when absent, a 400
// when it is not a boolean, is given twice or has another parameter beside
// it (a typo such as ?dryrun=true must not write). The read role's check
// (writesNothing) reads it here too, so that both agree on what is a dry
// run.
func dryRunParam(r *http.Request) (bool, error) {
	q, err := queryParams(r, "dryRun")
	if err != nil {
		return false, err
	}
	dry, err := strconv.ParseBool(cmp.Or(q["dryRun"], "false"))
	if err != nil {
		return false, &requestError{Status: http.StatusBadRequest, Field: "dryRun", Msg: fmt.Sprintf("dryRun %q is true or false", q["dryRun"])}
	}
	return dry, nil
}

// isPut reports whether r is a PUT /jobs/by-name/{name}, the one write
// that takes a query parameter (dryRun).
func isPut(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/jobs/by-name/")
}

// refuseWriteQueries answers 400 to a write given a query parameter it
// does not take (every write but a PUT's dryRun): POST /jobs?dryRun=true
// would otherwise create the job it was meant to try.
func (h *handler) refuseWriteQueries(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		switch {
		case r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions:
		case isPut(r):
			_, err = dryRunParam(r)
		case r.URL.RawQuery != "":
			_, err = queryParams(r)
		}
		if err != nil {
			h.error(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// handleJobPut serves PUT /jobs/by-name/{name}[?dryRun=true]: the body is
// the job's whole definition, as POST /jobs takes it, with the name in the
// path. It creates the job (201) when no job that is not cancelled has the
// name, and otherwise gives that job the definition (200), and answers
// what it did: {job, created, changes}; Sked-Changed says whether anything
// was written. The same PUT again changes nothing. With dryRun it answers
// the same and writes nothing.
//
// A job of a type this server does not run (Config.DisabledTypes) is
// refused as POST /jobs refuses it, unless the job that has the name has
// that very definition: such a put changes nothing and is answered so, for
// sked apply sends every job of its file, also those stored by a server
// that runs their type.
func (h *handler) handleJobPut(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	p, bodyErr := h.jobCreateBody(w, r, name)
	var off *typeDisabledError
	if bodyErr != nil && !errors.As(bodyErr, &off) {
		h.error(w, r, bodyErr)
		return
	}
	dry, err := dryRunParam(r)
	if err != nil {
		h.error(w, r, err)
		return
	}
	res, err := h.put(r.Context(), p, bodyErr, actorOf(r), dry)
	if err != nil {
		h.error(w, r, err)
		return
	}
	w.Header().Set("Sked-Changed", strconv.FormatBool(res.Changed() && !dry))
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
		w.Header().Set("Location", jobLocation(r, res.Job.ID))
	}
	h.writeJSON(w, r, status, res)
}

// put gives the job named in p the definition p, as PUT
// /jobs/by-name/{name} and API.JobPut do, and wakes the dispatcher when it
// wrote. checkErr is what checking the definition found: only a
// *typeDisabledError may be given, which lets through a put that changes
// nothing (see handleJobPut) and is returned for one that would.
func (h *handler) put(ctx context.Context, p db.JobCreateParams, checkErr error, actor string, dry bool) (db.JobPutResult, error) {
	var off *typeDisabledError
	errors.As(checkErr, &off)
	res, err := h.store.JobPut(ctx, db.JobPutParams{Spec: p, Actor: actor, DryRun: dry || off != nil})
	if off != nil && (err != nil || res.Changed()) {
		return db.JobPutResult{}, off
	}
	if err != nil {
		return db.JobPutResult{}, jobError(p.Name, action{}, err)
	}
	if res.Changed() && !dry {
		h.due(res.Job.Type, 1)
	}
	return res, nil
}
