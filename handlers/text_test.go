package handlers

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// onEachStore runs test on the API over a fresh SQLite store and over a
// fresh PostgreSQL one (skipped where no PostgreSQL server can be had):
// both must answer alike.
func onEachStore(t *testing.T, test func(t *testing.T, e *testEnv)) {
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		test(t, newTestEnv(t, nil))
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		test(t, newTestEnvOn(t, postgrestest.Open(t), nil))
	})
}

// TestHandler_NotText sends, where a job's id or name, a query parameter or
// a body's field goes, what PostgreSQL's text cannot hold: a NUL, a byte
// that is not UTF-8. Both stores answer the same 4xx, never a 500, and
// nothing is written. PostgreSQL used to answer 500 (invalid byte sequence
// for encoding "UTF8"), SQLite stored such a payload or reason.
func TestHandler_NotText(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, e *testEnv) {
		e.create(`{"name": "keep", "type": "t", "schedule": "@every 1h"}`, http.StatusCreated)
		const unknown = "no job has that id or name"
		for _, tc := range []struct {
			method, path, body string
			status             int
			field, detail      string
		}{
			// A job named in the path by what no id or name is: no such job.
			{"GET", "/jobs/%FF", "", 404, "", unknown},
			{"GET", "/jobs/%00", "", 404, "", unknown},
			{"GET", "/jobs/%FF/runs", "", 404, "", unknown},
			{"GET", "/jobs/%00/events", "", 404, "", unknown},
			{"GET", "/jobs/%FF/preview", "", 404, "", unknown},
			{"GET", "/jobs/by-name/%FF", "", 404, "", unknown},
			{"GET", "/jobs/by-name/a%00", "", 404, "", unknown},
			{"PATCH", "/jobs/%FF", `{"maxAttempts": 3}`, 404, "", unknown},
			{"DELETE", "/jobs/%00", "", 404, "", unknown},
			{"POST", "/jobs/%FF/pause", "", 404, "", unknown},
			{"POST", "/jobs/%00/resume", "", 404, "", unknown},
			{"POST", "/jobs/%FF/trigger", "", 404, "", unknown},
			{"POST", "/jobs/%FF/heartbeat", `{"generation": 1}`, 404, "", `no job has the id "\xff"; heartbeats and completions`},
			{"POST", "/jobs/%00/complete", `{"generation": 1, "outcome": "succeeded"}`, 404, "", `no job has the id "\x00"`},
			// A name to create a job under is checked as a name.
			{"PUT", "/jobs/by-name/%FF", `{"type": "t"}`, 422, "name", "may hold only ASCII letters"},
			// A query parameter: 400 naming it.
			{"GET", "/jobs?type=%FF", "", 400, "type", "type is not UTF-8 text (byte 0 is 0xff)"},
			{"GET", "/jobs?name=%00", "", 400, "name", "name holds a NUL character (U+0000) at byte 0"},
			{"GET", "/jobs/keep/runs?cursor=%00", "", 400, "cursor", "NUL"},
			{"GET", "/jobs/keep/preview?n=%FF", "", 400, "n", "not UTF-8"},
			// A body that is not UTF-8 is not JSON text.
			{"POST", "/jobs", `{"type": "t", "payload": {"x": "` + "\xff" + `"}}`, 400, "", "request body is not UTF-8 text: byte 32 is 0xff"},
			{"POST", "/jobs/batch", `{"jobs": [{"type": "t", "payload": {"x": "` + "\xff" + `"}}]}`, 400, "", "JSON text must be UTF-8"},
			{"PUT", "/jobs/by-name/other", `{"type": "t", "payload": {"x": "` + "\xff" + `"}}`, 400, "", "not UTF-8"},
			{"PATCH", "/jobs/keep", `{"payload": {"x": "` + "\xff" + `"}}`, 400, "", "not UTF-8"},
			{"POST", "/jobs/keep/pause", `{"reason": "a` + "\xff" + `"}`, 400, "", "not UTF-8"},
			// A free-text field holding a NUL.
			{"POST", "/jobs/keep/pause", `{"reason": "a\u0000b"}`, 422, "reason", "reason holds a NUL character (U+0000) at byte 1, which sked cannot store"},
			{"POST", "/workers/stopped", `{"workerId": "w\u0000"}`, 422, "workerId", "not printable"},
		} {
			t.Run(tc.method+" "+tc.path, func(t *testing.T) {
				p := e.do(tc.method, tc.path, tc.body).wantProblem(t, tc.status, tc.detail)
				if p.Field != tc.field {
					t.Errorf("%s %s %q: field %q, want %q", tc.method, tc.path, tc.body, p.Field, tc.field)
				}
			})
		}
		l := e.list("")
		if len(l.Jobs) != 1 || l.Jobs[0].Name != "keep" || l.Jobs[0].State != "ready" || string(l.Jobs[0].Payload) != "{}" {
			t.Errorf("jobs after the refused requests: %+v; want keep alone, ready, as it was", l.Jobs)
		}
	})
}

// TestHandler_PayloadEscapedNUL: a payload holding an escaped NUL is valid
// JSON, which both stores keep as it was sent (PostgreSQL's payload column
// is json, not jsonb, which would refuse it).
func TestHandler_PayloadEscapedNUL(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, e *testEnv) {
		const payload = `{"a":"\u0000"}`
		j := e.create(`{"type": "t", "payload": `+payload+`}`, http.StatusCreated)
		var got struct{ Payload map[string]any }
		res := e.do(http.MethodGet, "/jobs/"+j.ID, "")
		res.wantStatus(t, http.StatusOK)
		res.decode(t, &got)
		if string(j.Payload) != payload || got.Payload["a"] != "\x00" {
			t.Errorf("payload created %s, read back %v; want %s both times", j.Payload, got.Payload, payload)
		}
	})
}

// TestHandler_ProblemDetailBounded: a problem quoting the value it refuses
// does not echo a megabyte back; its detail is cut to maxDetail characters.
func TestHandler_ProblemDetailBounded(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	huge := strings.Repeat("x", 500_000)
	p := e.do(http.MethodPost, "/jobs", `{"type": "t", "schedule": "`+huge+`"}`).wantProblem(t, http.StatusUnprocessableEntity, "schedule")
	if n := utf8.RuneCountInString(p.Detail); n > maxDetail || !strings.HasSuffix(p.Detail, "…") {
		t.Errorf("detail of %d characters (%.60q…); want at most %d, marked cut", n, p.Detail, maxDetail)
	}
}
