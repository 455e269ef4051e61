package handlers

import (
	"context"
	"net/http"
	"time"
)

// Readiness settings of GET /readyz: it answers within readyTimeout, a 503
// when the check takes longer (a lock another process holds, a writer
// queue that long), so that a probe waiting a few seconds gets an answer.
const (
	readyTimeout    = 2 * time.Second
	readyRetryAfter = 5 * time.Second
)

// handleHealthz serves GET, HEAD and OPTIONS /healthz: the process is up and
// serving HTTP. It never looks at the database, so that an orchestrator does
// not restart a process that only waits for its disk. net/http sends no body
// for HEAD.
func (h *handler) handleHealthz(w http.ResponseWriter, r *http.Request) {
	h.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
}

// notReadyDetail is all GET /readyz tells a request that could not use the
// API of why it is not ready: the error may name the database's host, user
// and file, and /readyz answers anyone.
const notReadyDetail = "not ready; the server log says why, and so does /readyz asked with a token " +
	"(or, without tokens, by a Host the API serves)"

// handleReadyz serves GET, HEAD and OPTIONS /readyz: 200 when the database
// takes writes and its schema is current, else 503 with Retry-After, and
// what is wrong to a request that may use the API (mayUseAPI). A server
// shutting down is not ready, so that a load balancer sends new work to
// the other nodes while this one still serves its runs' heartbeats.
func (h *handler) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if h.shuttingDown() {
		h.notReady(w, "not ready: shutting down; this node hands out no new jobs, and serves the runs it leased until they end")
		return
	}
	if h.readyFunc != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := h.readyFunc(ctx); err != nil {
			if r.Context().Err() != nil {
				// The client hung up before the check ended: the client
				// commands ask every node of --server at once and leave
				// the others once one is ready. Nothing is wrong here.
				h.logger.DebugContext(r.Context(), "readiness probe hung up before the check ended", "err", err)
				return
			}
			h.logger.WarnContext(r.Context(), "not ready", "err", err)
			detail := notReadyDetail
			if h.mayUseAPI(r) {
				detail = "not ready: " + err.Error()
			}
			h.notReady(w, detail)
			return
		}
	}
	h.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ready"})
}

// notReady answers 503 with Retry-After, saying detail.
func (h *handler) notReady(w http.ResponseWriter, detail string) {
	h.writeProblem(w, problem{
		Type:       "about:blank",
		Title:      http.StatusText(http.StatusServiceUnavailable),
		Status:     http.StatusServiceUnavailable,
		Detail:     detail,
		retryAfter: int(readyRetryAfter.Seconds()),
	})
}
