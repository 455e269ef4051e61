package handlers

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// The workers view of GET /workers: the workers that hold jobs now, from
// the running jobs (their lease owner and lease end) and each one's live
// run (when it was claimed), and the workers the store saw claim in the
// last workersSeenWithin, holding jobs or not; each with the types it
// claims and when it was first and last seen, from the store's record of
// it, however old (a worker busy on all its slots claims nothing).

// workersSeenWithin is how far back GET /workers lists the workers that
// hold nothing.
const workersSeenWithin = time.Hour

// handleWorkers serves GET /workers: the workers that hold jobs now or
// claimed in the last workersSeenWithin.
func (h *handler) handleWorkers(w http.ResponseWriter, r *http.Request) {
	now := h.store.Now()
	seen, err := h.store.Workers(r.Context(), time.Time{}) // a week's worth: one row per worker process
	if err != nil {
		h.error(w, r, err)
		return
	}
	jobs, next, err := h.store.JobList(r.Context(), db.JobListParams{State: db.StateRunning, Limit: MaxPageLimit})
	if err != nil {
		h.error(w, r, fmt.Errorf("list running jobs: %w", err))
		return
	}
	if next != "" {
		past, err := h.heldPastPage(r.Context(), seen, jobs, now)
		if err != nil {
			h.error(w, r, err)
			return
		}
		jobs = append(jobs, past...)
	}
	runs, err := h.store.RunsLive(r.Context(), jobs)
	if err != nil {
		h.error(w, r, fmt.Errorf("read the live runs of %d running jobs: %w", len(jobs), err))
		return
	}
	runOf := make(map[string]*db.Run, len(runs))
	for i := range runs {
		runOf[runs[i].JobID] = &runs[i]
	}
	byID := map[string]*wire.Worker{}
	view := func(id string) *wire.Worker {
		v := byID[id]
		if v == nil {
			v = &wire.Worker{WorkerID: id, Running: []wire.WorkerJob{}}
			byID[id] = v
		}
		return v
	}
	record := make(map[string]db.Worker, len(seen))
	for _, s := range seen {
		record[s.ID] = s
		if now.Sub(s.LastSeen) <= workersSeenWithin {
			view(s.ID)
		}
	}
	for _, j := range jobs {
		run := runOf[j.ID]
		v := view(j.LeaseOwner)
		v.Running = append(v.Running, wire.WorkerJob{Job: j, Run: run})
		v.LeaseUntil = later(v.LeaseUntil, j.LeaseUntil)
		if run != nil {
			v.LastClaimAt = later(v.LastClaimAt, run.StartedAt)
		}
	}
	resp := wire.WorkersResponse{At: now, Workers: []wire.Worker{}, SeenWithin: db.Duration(workersSeenWithin), Truncated: next != ""}
	for id, v := range byID {
		if s, ok := record[id]; ok {
			v.Types, v.FirstSeenAt, v.LastSeenAt, v.StoppedAt = append([]string{}, s.Types...), &s.FirstSeen, &s.LastSeen, s.StoppedAt
		}
		v.Silent = v.SilentAt(now)
		resp.Workers = append(resp.Workers, *v)
	}
	slices.SortFunc(resp.Workers, func(a, b wire.Worker) int {
		return cmp.Or(orZero(b.LastSeen()).Compare(orZero(a.LastSeen())), cmp.Compare(a.WorkerID, b.WorkerID))
	})
	h.writeJSON(w, r, http.StatusOK, resp)
}

// heldPastPage finds, when more jobs run than the page of them GET /workers
// reads, a job held by each recorded worker that holds none of the page's
// and would otherwise be marked silent: a worker busy with long runs claims
// nothing while its slots are full, and is not gone.
func (h *handler) heldPastPage(ctx context.Context, seen []db.Worker, page []db.Job, now time.Time) ([]db.Job, error) {
	holds := make(map[string]bool, len(seen))
	for _, j := range page {
		holds[j.LeaseOwner] = true
	}
	var held []db.Job
	for _, s := range seen {
		if holds[s.ID] || now.Sub(s.LastSeen) > workersSeenWithin || !(wire.Worker{LastSeenAt: &s.LastSeen, StoppedAt: s.StoppedAt}).SilentAt(now) {
			continue
		}
		jobs, _, err := h.store.JobList(ctx, db.JobListParams{State: db.StateRunning, LeaseOwner: s.ID, Limit: 1})
		if err != nil {
			return nil, fmt.Errorf("list the running jobs of worker %s: %w", s.ID, err)
		}
		held = append(held, jobs...)
	}
	return held, nil
}

// handleWorkerStopped serves POST /workers/stopped: a worker that has shut
// down says so, and is listed as stopped until it claims again.
func (h *handler) handleWorkerStopped(w http.ResponseWriter, r *http.Request) {
	var req wire.WorkerStoppedRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		h.error(w, r, err)
		return
	}
	if err := checkWorkerID(req.WorkerID); err != nil {
		h.error(w, r, err)
		return
	}
	if err := h.store.WorkerStopped(r.Context(), req.WorkerID); err != nil {
		h.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// later is the later of a and b; nil is never.
func later(a, b *time.Time) *time.Time {
	if a == nil || b != nil && b.After(*a) {
		return b
	}
	return a
}

// orZero is *t, or the zero time for nil.
func orZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
