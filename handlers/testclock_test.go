package handlers

import (
	"net/http"
	"testing"
	"time"

	"github.com/sked-dev/sked/clock"
)

// TestHandler_TestClockRange: the test clock is not set or moved past the
// times a request may give (a schedule's next slot there would be stored,
// and no answer could hold it), nor before 1970; the clock stays put.
func TestHandler_TestClockRange(t *testing.T) {
	t.Parallel()
	virtual := clock.NewVirtual(testNow)
	e := newTestEnv(t, func(c *Config) { c.TestClock = virtual })
	refused := func(body string) {
		t.Helper()
		e.do(http.MethodPost, "/test/clock", body).wantProblem(t, http.StatusUnprocessableEntity, "is out of range: give a time from 1970 to 8999")
	}
	refused(`{"set": "9999-12-31T23:59:59Z"}`)
	refused(`{"set": "1969-12-31T23:59:59Z"}`)
	refused(`{"advance": "-500000h"}`)
	if now := virtual.Now(); !now.Equal(testNow) {
		t.Errorf("the clock moved to %s; want it at %s", now, testNow)
	}
	late := time.Date(8999, 12, 1, 0, 0, 0, 0, time.UTC)
	e.do(http.MethodPost, "/test/clock", `{"set": "8999-12-01T00:00:00Z"}`).wantStatus(t, http.StatusOK)
	refused(`{"advance": "8760h"}`)
	if now := virtual.Now(); !now.Equal(late) {
		t.Errorf("the clock moved to %s; want it at %s", now, late)
	}
}

// TestHandler_TestClockAbsent: a server on the real clock answers
// /test/clock 404 problem+json saying that the route exists only with
// --test-clock, not merely that there is no such endpoint.
func TestHandler_TestClockAbsent(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		e.do(method, "/test/clock", `{"advance": "1h"}`).wantProblem(t, http.StatusNotFound, "it exists only when the server runs with --test-clock")
	}
}
