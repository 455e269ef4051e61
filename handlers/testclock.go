package handlers

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sked-dev/sked/db"
)

// TestClock is the virtual clock `sked serve --test-clock` runs on.
type TestClock interface {
	Now() time.Time
	Set(t time.Time)
	Advance(d time.Duration)
}

// testClockPath is the route that reads and moves the test clock, served
// only when there is one (Config.TestClock).
const testClockPath = "/test/clock"

// testClockRequest moves the test clock: to an instant, or by a duration.
type testClockRequest struct {
	Set     string `json:"set"`     // RFC 3339
	Advance string `json:"advance"` // Go duration, may be negative
}

// handleTestClock answers GET and POST /test/clock: the virtual time, moved
// first by a POST. Registered only when the server runs on a test clock.
func (h *handler) handleTestClock(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		var req testClockRequest
		if err := h.decodeBody(w, r, &req); err != nil {
			h.error(w, r, err)
			return
		}
		switch {
		case (req.Set == "") == (req.Advance == ""):
			h.error(w, r, &db.ValidationError{Field: "set", Msg: `give exactly one of "set" (an RFC 3339 time) or "advance" (a duration such as "90m")`})
			return
		case req.Set != "":
			t, err := timeField("set", req.Set)
			if err != nil {
				h.error(w, r, err)
				return
			}
			h.testClock.Set(t)
		default:
			d, err := time.ParseDuration(req.Advance)
			if err != nil {
				h.error(w, r, &db.ValidationError{Field: "advance", Msg: fmt.Sprintf(`advance %q is not a duration such as "90m" or "-1h"`, req.Advance)})
				return
			}
			if err := db.CheckTime("advance", h.testClock.Now().Add(d)); err != nil {
				h.error(w, r, err)
				return
			}
			h.testClock.Advance(d)
		}
		h.wake(nil)
		h.claimers.wakeAll()
	}
	h.writeJSON(w, r, http.StatusOK, map[string]time.Time{"now": h.testClock.Now()})
}
