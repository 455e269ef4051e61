package handlers

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// endedFor is how long at least (and at most twice) a claim id ended
// before its claim arrived is kept: longer than a claim takes to come after
// the stop that overtook it.
const endedFor = 10 * time.Second

// maxClaimIDLen bounds a claim id.
const maxClaimIDLen = 64

// stoppingWorkers ends the waits of the claims of workers that are
// stopping. A worker that stops while its claim waits could hang up, but an
// answer cut off may carry jobs it claimed: nobody would run them, and their
// leases would be charged as attempts when they ran out (a job of one
// attempt would go dead without having run). So it says it is stopping
// (POST /workers/stopping) and reads the answer, which comes at once, with
// whatever the claim took. A stop that names its claim (a claim id) and
// reaches the server before the claim does is kept (see endedFor): the
// claim then answers at once, having claimed nothing, once. It is safe for concurrent
// use.
type stoppingWorkers struct {
	mu    sync.Mutex
	waits map[string]map[chan struct{}]string // by worker id, each waiting claim's id; guarded by mu
	// ended and older are the claims ended before they arrived: ended
	// those since rotated, older those of the endedFor before; at each
	// rotation older is dropped. Guarded by mu.
	ended, older map[claimKey]struct{}
	rotated      time.Time // guarded by mu
}

// maxEnded bounds the claims kept as ended in one endedFor: a stop beyond
// it is not kept (its claim, should it come, waits as before stops named
// claims), so that stops sent in a flood cannot grow the map without end.
const maxEnded = 10000

// claimKey names one claim of one worker.
type claimKey struct{ worker, claim string }

// add registers a claim of worker, named claim ("": unnamed), and returns
// the channel that is closed when the worker says it is stopping; remove it
// when the claim ends. It returns false, and registers nothing, when that
// claim was ended before it arrived.
func (s *stoppingWorkers) add(worker, claim string, now time.Time) (chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotateLocked(now)
	if k := (claimKey{worker, claim}); claim != "" {
		_, inEnded := s.ended[k]
		_, inOlder := s.older[k]
		if inEnded || inOlder {
			delete(s.ended, k)
			delete(s.older, k)
			return nil, false
		}
	}
	if s.waits == nil {
		s.waits = map[string]map[chan struct{}]string{}
	}
	if s.waits[worker] == nil {
		s.waits[worker] = map[chan struct{}]string{}
	}
	c := make(chan struct{})
	s.waits[worker][c] = claim
	return c, true
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

// stop ends the waits of worker's claims at now: all of them when claim is
// "", else the one of that id, which is kept as ended when it has not
// arrived yet.
func (s *stoppingWorkers) stop(worker, claim string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	for c, id := range s.waits[worker] {
		if claim == "" || id == claim {
			close(c)
			delete(s.waits[worker], c)
			found = true
		}
	}
	if len(s.waits[worker]) == 0 {
		delete(s.waits, worker)
	}
	s.rotateLocked(now)
	if claim != "" && !found && len(s.ended) < maxEnded {
		if s.ended == nil {
			s.ended = map[claimKey]struct{}{}
		}
		s.ended[claimKey{worker, claim}] = struct{}{}
	}
}

// rotateLocked keeps the claims ended at least endedFor, and at most twice
// that, as of now. s.mu is held.
func (s *stoppingWorkers) rotateLocked(now time.Time) {
	switch since := now.Sub(s.rotated); {
	case since >= 2*endedFor:
		s.older, s.ended = nil, nil
	case since >= endedFor:
		s.older, s.ended = s.ended, nil
	default:
		return
	}
	s.rotated = now
}

// handleWorkerStopping serves POST /workers/stopping: a worker that begins
// to stop has its claim (claimId), or all its claims, waiting on this server
// answered at once, with the jobs they claimed, if any. Nothing is recorded.
func (h *handler) handleWorkerStopping(w http.ResponseWriter, r *http.Request) {
	var req wire.WorkerStoppingRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		h.error(w, r, err)
		return
	}
	if err := checkWorkerID(req.WorkerID); err != nil {
		h.error(w, r, err)
		return
	}
	if err := checkClaimID("claimId", req.ClaimID); err != nil {
		h.error(w, r, err)
		return
	}
	h.stopping.stop(req.WorkerID, req.ClaimID, time.Now())
	w.WriteHeader(http.StatusNoContent)
}

// checkClaimID refuses a claim id, given as field, longer than
// maxClaimIDLen; "" is none.
func checkClaimID(field, id string) error {
	if len(id) > maxClaimIDLen {
		return &db.ValidationError{Field: field, Msg: fmt.Sprintf("%s is %d bytes; at most %d are allowed", field, len(id), maxClaimIDLen)}
	}
	return nil
}
