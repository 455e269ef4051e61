package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sked-dev/sked/db"
)

// FuzzJobCreateParams feeds arbitrary bodies through the decoding and
// validation of POST /jobs. Properties: nothing panics; every refusal is a
// 4xx problem; every acceptance satisfies what the store relies on.
func FuzzJobCreateParams(f *testing.F) {
	for _, seed := range []string{
		`{"type": "noop"}`, // minimal
		`{"type": "http", "payload": {"url": "https://example.com"}, "runAt": "2026-12-01T09:00:00Z", "maxAttempts": 3, "timeout": "30s"}`,
		`{"type": "r", "schedule": "0 9 * * *", "timezone": "Europe/Berlin", "overlap": "queue_one", "misfire": "run_all", "jitter": "5s"}`,
		`{"type": "r", "schedule": "TZ=UTC 0 * * * *"}`, // robfig v3.0.1 panics on TZ= specs
		`{"type": "r", "schedule": "@every -1s"}`,
		`{"type": "x", "maxAttempts": 1e400}`, // number out of range
		`{"type": "x", "timeout": "-9223372036854775808ns"}`,
		`{"type": "x", "payload": null, "runAt": null, "timeout": null}`,
		`{"type": "x"} trailing`,
		`{"type": "x", "idempotencyKey": "k\u0000x", "jitter": "2562047h"}`, // control character; jitter in 2299
		`{"type": "r", "schedule": "@every 1m", "jitter": "1m"}`,            // jitter at its bound
		`{"type": "x", "name": "nightly-backup", "notify": {"on": ["gave_up"], "sinks": ["ntfy:https://ntfy.sh/t"]}}`,
		`{"type": "x", "name": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "notify": []}`, // a name shaped like an id
		`{"type": "x", "name": "by-name", "notify": {"on": "x", "extra": 1}}`,
		`[`, ``, `null`, `"str"`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		h := &handler{maxBodyBytes: DefaultMaxBodyBytes}
		r := httptest.NewRequest(http.MethodPost, "/jobs", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var req jobCreateRequest
		err := h.decodeBody(httptest.NewRecorder(), r, &req)
		var p db.JobCreateParams
		if err == nil {
			p, err = jobCreateParams(&req, nil, testNow)
		}
		if refused(t, err) {
			return
		}
		if p.Type == "" || len(p.Type) > maxTypeLen || strings.IndexFunc(p.Type, func(c rune) bool { return !isTypeChar(c) }) >= 0 {
			t.Errorf("accepted type %q", p.Type)
		}
		if !json.Valid(p.Payload) {
			t.Errorf("accepted payload %q is not JSON", p.Payload)
		}
		// Zero is "the default", which the store fills in.
		if p.MaxAttempts < 0 || p.Timeout < 0 || p.Backoff < 0 || p.Jitter < 0 {
			t.Errorf("accepted maxAttempts %d timeout %v backoff %v jitter %v", p.MaxAttempts, p.Timeout, p.Backoff, p.Jitter)
		}
		if p.Schedule != "" && !p.RunAt.IsZero() {
			t.Errorf("accepted both schedule %q and runAt %v", p.Schedule, p.RunAt)
		}
		if p.Schedule == "" && (p.Overlap != "" || p.Misfire != "") {
			t.Errorf("accepted overlap %q misfire %q without a schedule", p.Overlap, p.Misfire)
		}
		if p.Schedule == "" && p.Jitter > maxOneOffJitter {
			t.Errorf("accepted jitter %v on a one-off job", p.Jitter)
		}
		if !utf8.ValidString(p.IdempotencyKey) || strings.IndexFunc(p.IdempotencyKey, unicode.IsControl) >= 0 {
			t.Errorf("accepted idempotency key %q", p.IdempotencyKey)
		}
		if p.Name != "" && db.CheckName(p.Name) != nil {
			t.Errorf("accepted name %q", p.Name)
		}
	})
}

// FuzzJobPatch applies arbitrary bodies as PATCH /jobs/{id} does to a
// recurring job's definition. Properties: nothing panics; every refusal is
// a 4xx problem; what is accepted keeps the job's type, stays recurring
// and is due at no runAt, and a patch without a name keeps the name.
func FuzzJobPatch(f *testing.F) {
	for _, seed := range []string{
		`{"schedule": "*/15 * * * *", "timezone": "Europe/Berlin"}`,
		`{"name": null, "notify": null, "jitter": null, "maxAttempts": null}`,
		`{"payload": {"a": null, "b": [1, 2]}, "notify": {"ping": "https://hc.example/1"}}`,
		`{"schedule": null}`, `{"type": "other"}`, `{"runAt": "2026-12-01T09:00:00Z"}`, `{"runAt": null}`,
		`{"payload": null, "overlap": null, "misfire": null}`, // back to the defaults
		`{"notify": {"on": null}}`, `{"notify": 7}`, `{"foo": 1}`, `[]`, `null`, `{`,
	} {
		f.Add(seed)
	}
	job := db.Job{
		ID: "01KJ9ZK3W4V0S6Q2B8C1D5E7F9", Name: "report", Type: "noop", Payload: json.RawMessage(`{"a":1}`),
		Schedule: "0 * * * *", Timezone: "UTC", MaxAttempts: 5, Timeout: db.Duration(time.Hour), Backoff: db.Duration(time.Second),
		Jitter: db.Duration(time.Minute), Overlap: db.OverlapSkip, Misfire: db.MisfireRunOnce, Notify: &db.Notify{On: []string{"gave_up"}},
	}
	f.Fuzz(func(t *testing.T, body string) {
		h := &handler{maxBodyBytes: DefaultMaxBodyBytes}
		r := httptest.NewRequest(http.MethodPatch, "/jobs/report", strings.NewReader(body))
		r.Header.Set("Content-Type", mergePatchType)
		var patch map[string]json.RawMessage
		err := h.decodeBodyAs(httptest.NewRecorder(), r, &patch, mergePatchType)
		var req jobCreateRequest
		if err == nil {
			req, err = patchRequest(db.SpecOf(job), patch)
		}
		if err == nil {
			err = checkKept(job, req)
		}
		var p db.JobCreateParams
		if err == nil {
			p, err = jobCreateParams(&req, nil, testNow)
		}
		if refused(t, err) {
			return
		}
		if p.Type != job.Type || p.Schedule == "" || !p.RunAt.IsZero() {
			t.Errorf("accepted type %q schedule %q runAt %v", p.Type, p.Schedule, p.RunAt)
		}
		if _, named := patch["name"]; !named && p.Name != job.Name {
			t.Errorf("a patch without a name changed it to %q", p.Name)
		}
	})
}

// refused reports whether err refused a fuzzed input, failing t unless it
// answers a 4xx problem.
func refused(t *testing.T, err error) bool {
	t.Helper()
	if err == nil {
		return false
	}
	if s := problemFor(err).Status; s < 400 || s >= 500 {
		t.Fatalf("refusal %v answers %d, want a 4xx", err, s)
	}
	return true
}
