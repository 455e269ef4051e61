package handlers

import (
	"net/http"
	"sync"
)

// stoppingWorkers ends the waits of the claims of workers that are
// stopping. A worker that stops while its claim waits could hang up, but an
// answer cut off may carry jobs it claimed: nobody would run them, and their
// leases would be charged as attempts when they ran out (a job of one
// attempt would go dead without having run). So it says it is stopping
// (POST /workers/stopping) and reads the answer, which comes at once, with
// whatever the claim took. It is safe for concurrent use.
type stoppingWorkers struct {
	mu    sync.Mutex
	waits map[string]map[chan struct{}]struct{} // by worker id; guarded by mu
}

// add registers a waiting claim of worker and returns the channel that is
// closed when the worker says it is stopping. Remove it when the claim
// ends.
func (s *stoppingWorkers) add(worker string) chan struct{} {
	c := make(chan struct{})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waits == nil {
		s.waits = map[string]map[chan struct{}]struct{}{}
	}
	if s.waits[worker] == nil {
		s.waits[worker] = map[chan struct{}]struct{}{}
	}
	s.waits[worker][c] = struct{}{}
	return c
}

// remove unregisters c, a claim of worker that ended.
func (s *stoppingWorkers) remove(worker string, c chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waits[worker], c)
	if len(s.waits[worker]) == 0 {
		delete(s.waits, worker)
	}
}

// stop ends the waits of worker's claims.
func (s *stoppingWorkers) stop(worker string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.waits[worker] {
		close(c)
	}
	delete(s.waits, worker)
}

// handleWorkerStopping serves POST /workers/stopping: a worker that begins
// to stop has the claims it has waiting on this server answered at once,
// with the jobs they claimed, if any. Nothing is recorded.
func (h *handler) handleWorkerStopping(w http.ResponseWriter, r *http.Request) {
	id, ok := h.workerOf(w, r)
	if !ok {
		return
	}
	h.stopping.stop(id)
	w.WriteHeader(http.StatusNoContent)
}
