package handlers

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sked-dev/sked/db"
)

// The workers view of GET /workers. The store keeps no record of workers: a
// worker is known by the jobs it holds. So the view is derived from the
// running jobs (their lease owner and lease end) and each one's live run
// (when it was claimed); a worker holding nothing does not appear.

// workersResponse is the body of GET /workers.
type workersResponse struct {
	At      time.Time    `json:"at"`
	Workers []workerView `json:"workers"` // never null; newest claim first
	// Truncated says more jobs were running than one page of MaxPageLimit,
	// which is all that was read.
	Truncated bool `json:"truncated"`
}

// workerView is one worker: what it runs, when it last claimed a job and
// how far its heartbeats have extended its leases.
type workerView struct {
	WorkerID string `json:"workerId"`
	// LastClaimAt is when its newest live run began (its claim).
	LastClaimAt *time.Time `json:"lastClaimAt,omitempty"`
	// LeaseUntil is the latest lease end among its jobs; each heartbeat
	// moves it on, and a lease that passes is taken back by the reaper.
	LeaseUntil *time.Time   `json:"leaseUntil,omitempty"`
	Running    []workerWork `json:"running"`
}

// workerWork is a job a worker holds and its live run (nil when it has
// none: its lease ended between the two reads).
type workerWork struct {
	Job db.Job  `json:"job"`
	Run *db.Run `json:"run,omitempty"`
}

// handleWorkers serves GET /workers: the workers that hold jobs now.
func (h *handler) handleWorkers(w http.ResponseWriter, r *http.Request) {
	jobs, next, err := h.store.JobList(r.Context(), db.JobListParams{State: db.StateRunning, Limit: MaxPageLimit})
	if err != nil {
		h.error(w, r, fmt.Errorf("list running jobs: %w", err))
		return
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
	byID := map[string]*workerView{}
	for _, j := range jobs {
		run := runOf[j.ID]
		v := byID[j.LeaseOwner]
		if v == nil {
			v = &workerView{WorkerID: j.LeaseOwner}
			byID[j.LeaseOwner] = v
		}
		v.Running = append(v.Running, workerWork{Job: j, Run: run})
		v.LeaseUntil = later(v.LeaseUntil, j.LeaseUntil)
		if run != nil {
			v.LastClaimAt = later(v.LastClaimAt, run.StartedAt)
		}
	}
	resp := workersResponse{At: h.store.Now(), Workers: []workerView{}, Truncated: next != ""}
	for _, v := range byID {
		resp.Workers = append(resp.Workers, *v)
	}
	slices.SortFunc(resp.Workers, func(a, b workerView) int {
		return cmp.Or(orZero(b.LastClaimAt).Compare(orZero(a.LastClaimAt)), cmp.Compare(a.WorkerID, b.WorkerID))
	})
	h.writeJSON(w, r, http.StatusOK, resp)
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
