package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

// testNow is the store's clock in every test: jobs created without runAt are
// due at testNow, and a claim at testNow finds them.
var testNow = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// testEnv is an API server on a real, fresh SQLite store.
type testEnv struct {
	t     *testing.T
	store *sqlite.Store
	srv   *httptest.Server
	api   *API
	wakes atomic.Int64
}

// newTestEnv starts the API; configure may adjust the Config first.
func newTestEnv(t *testing.T, configure func(*Config)) *testEnv {
	t.Helper()
	store := sqlitetest.Open(t)
	store.NowFunc = func() time.Time { return testNow }
	e := newTestEnvOn(t, store, configure)
	e.store = store
	return e
}

// newTestEnvOn starts the API on store, of any backend (e.store is nil
// unless it is SQLite's: see newTestEnv); configure may adjust the Config
// first.
func newTestEnvOn(t *testing.T, store db.Store, configure func(*Config)) *testEnv {
	t.Helper()
	e := &testEnv{t: t}
	cfg := Config{Store: store, Wake: func(map[string]int) { e.wakes.Add(1) }}
	if configure != nil {
		configure(&cfg)
	}
	e.api = New(cfg)
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	return e
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends method path with body (no body if empty) and extra headers given
// as name, value pairs. A body is sent as application/json unless the
// headers set Content-Type; an empty value leaves the header out, and
// "Host" sets the request's Host.
func (e *testEnv) do(method, path, body string, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		switch name, value := headers[i], headers[i+1]; {
		case name == "Host":
			req.Host = value
		case value == "":
			req.Header.Del(name)
		default:
			req.Header.Set(name, value)
		}
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// decode unmarshals the response body into v.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// wantStatus fails the test unless the response has status.
func (r response) wantStatus(t *testing.T, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status: got %d, want %d; body %s", r.status, status, r.body)
	}
}

// wantProblem checks that r is a problem+json with status whose detail
// contains detail, and returns it.
func (r response) wantProblem(t *testing.T, status int, detail string) problem {
	t.Helper()
	r.wantStatus(t, status)
	if got := r.header.Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("Content-Type: got %q, want application/problem+json", got)
	}
	var p problem
	r.decode(t, &p)
	if p.Status != status || p.Title != http.StatusText(status) || p.Type != "about:blank" {
		t.Errorf("problem: got type %q title %q status %d, want about:blank %q %d", p.Type, p.Title, p.Status, http.StatusText(status), status)
	}
	if !strings.Contains(p.Detail, detail) {
		t.Errorf("detail: got %q, want it to contain %q", p.Detail, detail)
	}
	return p
}

// create posts body to /jobs and wants status (201 or 200).
func (e *testEnv) create(body string, status int, headers ...string) db.Job {
	e.t.Helper()
	res := e.do(http.MethodPost, "/jobs", body, headers...)
	res.wantStatus(e.t, status)
	if got := res.header.Get("Content-Type"); got != "application/json" {
		e.t.Errorf("Content-Type: got %q, want application/json", got)
	}
	var j db.Job
	res.decode(e.t, &j)
	return j
}

// list returns the jobs of GET /jobs?query.
func (e *testEnv) list(query string) jobListResponse {
	e.t.Helper()
	res := e.do(http.MethodGet, "/jobs?"+query, "")
	res.wantStatus(e.t, http.StatusOK)
	var l jobListResponse
	res.decode(e.t, &l)
	return l
}

// claim leases every due job to worker w1, as the dispatcher would.
func (e *testEnv) claim() []db.Claim {
	e.t.Helper()
	claims, err := e.store.RunClaim(context.Background(), db.RunClaimParams{WorkerID: "w1", Max: 10, Lease: time.Minute})
	if err != nil {
		e.t.Fatal(err)
	}
	return claims
}

func TestHandler_JobCreate(t *testing.T) {
	t.Parallel()

	t.Run("OneOff", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		res := e.do(http.MethodPost, "/jobs", `{"type": "http", "payload": {"url": "https://example.com"},
			"runAt": "2026-12-01T09:00:00+01:00", "maxAttempts": 3, "timeout": "30s", "backoff": "2s"}`)
		res.wantStatus(t, http.StatusCreated)
		var j db.Job
		res.decode(t, &j)
		if j.ID == "" || j.Type != "http" || j.State != db.StateReady || j.MaxAttempts != 3 {
			t.Errorf("job: got %+v", j)
		}
		if string(j.Payload) != `{"url":"https://example.com"}` {
			t.Errorf("payload: got %s", j.Payload)
		}
		if want := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC); j.NextRunAt == nil || !j.NextRunAt.Equal(want) {
			t.Errorf("nextRunAt: got %v, want %v", j.NextRunAt, want)
		}
		if j.Timeout != db.Duration(30*time.Second) || j.Backoff != db.Duration(2*time.Second) {
			t.Errorf("timeout, backoff: got %v, %v", j.Timeout, j.Backoff)
		}
		if got, want := res.header.Get("Location"), "/jobs/"+j.ID; got != want {
			t.Errorf("Location: got %q, want %q", got, want)
		}
		if got := e.wakes.Load(); got != 1 {
			t.Errorf("wakes: got %d, want 1", got)
		}
		// The wire form uses duration strings.
		var raw map[string]any
		res.decode(t, &raw)
		if raw["timeout"] != "30s" {
			t.Errorf("wire timeout: got %v, want \"30s\"", raw["timeout"])
		}
	})

	t.Run("RunIn", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		j := e.create(`{"type": "noop", "runIn": "90m"}`, http.StatusCreated)
		if want := testNow.Add(90 * time.Minute); j.NextRunAt == nil || !j.NextRunAt.Equal(want) {
			t.Errorf("nextRunAt: got %v, want the store's now and 90m (%v)", j.NextRunAt, want)
		}
	})

	t.Run("MaxAttemptsAtBound", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		if j := e.create(fmt.Sprintf(`{"type": "noop", "maxAttempts": %d}`, db.MaxAttempts), http.StatusCreated); j.MaxAttempts != db.MaxAttempts {
			t.Errorf("maxAttempts: got %d, want %d", j.MaxAttempts, db.MaxAttempts)
		}
	})

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		j := e.create(`{"type": "noop"}`, http.StatusCreated)
		if string(j.Payload) != `{}` {
			t.Errorf("payload: got %s, want {}", j.Payload)
		}
		if j.MaxAttempts != db.DefaultMaxAttempts || j.Timeout != db.Duration(db.DefaultTimeout) || j.Backoff != db.Duration(db.DefaultBackoff) {
			t.Errorf("defaults: got maxAttempts %d timeout %v backoff %v", j.MaxAttempts, j.Timeout, j.Backoff)
		}
		if j.NextRunAt == nil || !j.NextRunAt.Equal(testNow) {
			t.Errorf("nextRunAt: got %v, want now (%v)", j.NextRunAt, testNow)
		}
	})

	t.Run("Recurring", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		j := e.create(`{"type": "report", "schedule": "0 9 * * *", "timezone": "Europe/Berlin",
			"overlap": "queue_one", "misfire": "skip", "jitter": "10s"}`, http.StatusCreated)
		if j.Schedule != "0 9 * * *" || j.Timezone != "Europe/Berlin" || j.Overlap != db.OverlapQueueOne || j.Misfire != db.MisfireSkip {
			t.Errorf("job: got %+v", j)
		}
		if j.Jitter != db.Duration(10*time.Second) {
			t.Errorf("jitter: got %v, want 10s", j.Jitter)
		}
		// 09:00 in Berlin on 2 March 2026 (CET, UTC+1), after testNow.
		want := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
		if j.Slot == nil || !j.Slot.Equal(want) {
			t.Errorf("slot: got %v, want %v", j.Slot, want)
		}
	})

	t.Run("RecurringDefaults", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		j := e.create(`{"type": "tick", "schedule": "@every 90s"}`, http.StatusCreated)
		if j.Timezone != "UTC" || j.Overlap != db.OverlapSkip || j.Misfire != db.MisfireRunOnce {
			t.Errorf("job: got timezone %q overlap %q misfire %q", j.Timezone, j.Overlap, j.Misfire)
		}
	})

	t.Run("JitterAtItsBound", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		for _, body := range []string{
			`{"type": "noop", "jitter": "24h"}`,
			`{"type": "noop", "schedule": "@every 1m", "jitter": "1m"}`,
			`{"type": "noop", "schedule": "0 9 * * 1-5", "jitter": "24h"}`,
			`{"type": "noop", "schedule": "30 2 * * *", "timezone": "America/New_York", "jitter": "23h30m"}`,
			`{"type": "noop", "schedule": "0 0 1 * *", "jitter": "672h"}`, // February
		} {
			j := e.create(body, http.StatusCreated)
			if j.Jitter == 0 || j.NextRunAt.Sub(*j.Slot) >= time.Duration(j.Jitter) {
				t.Errorf("%s: jitter %v, due %v after its slot", body, j.Jitter, j.NextRunAt.Sub(*j.Slot))
			}
		}
	})

	t.Run("IdempotencyKeyPrintable", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		j := e.create(`{"type": "noop", "idempotencyKey": "Rechnung 2026/03 – München ✓"}`, http.StatusCreated)
		if j.IdempotencyKey != "Rechnung 2026/03 – München ✓" {
			t.Errorf("key: got %q", j.IdempotencyKey)
		}
		e.create(`{"type": "noop"}`, http.StatusCreated, "Idempotency-Key", `"order:42 ÄÖÜ"`)
	})

	t.Run("IdempotencyKeyInBody", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		first := e.create(`{"type": "noop", "idempotencyKey": "k1"}`, http.StatusCreated)
		second := e.create(`{"type": "noop", "idempotencyKey": "k1"}`, http.StatusOK)
		if first.ID != second.ID || second.IdempotencyKey != "k1" {
			t.Errorf("second create: got job %s key %q, want job %s key k1", second.ID, second.IdempotencyKey, first.ID)
		}
		if l := e.list(""); len(l.Jobs) != 1 {
			t.Errorf("jobs: got %d, want 1", len(l.Jobs))
		}
		if got := e.wakes.Load(); got != 1 {
			t.Errorf("wakes: got %d, want 1 (the 200 does not wake)", got)
		}
	})

	t.Run("IdempotencyKeyHeader", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		first := e.create(`{"type": "noop"}`, http.StatusCreated, "Idempotency-Key", "k2")
		// The structured-field form of the header names the same key, and so
		// does the body.
		second := e.create(`{"type": "noop"}`, http.StatusOK, "Idempotency-Key", `"k2"`)
		third := e.create(`{"type": "noop", "idempotencyKey": "k2"}`, http.StatusOK, "Idempotency-Key", "k2")
		if first.IdempotencyKey != "k2" || second.ID != first.ID || third.ID != first.ID {
			t.Errorf("ids: got %s, %s, %s (key %q), want one job with key k2", first.ID, second.ID, third.ID, first.IdempotencyKey)
		}
		if l := e.list(""); len(l.Jobs) != 1 {
			t.Errorf("jobs: got %d, want 1", len(l.Jobs))
		}
	})
}

func TestHandler_JobCreate_BadInput(t *testing.T) {
	t.Parallel()
	long := `{"type": "noop", "payload": {"data": "` + strings.Repeat("x", 600) + `"}}`
	tests := []struct {
		name    string
		body    string
		headers []string
		status  int
		detail  string
		field   string
	}{
		{"MalformedJSON", `{"type": "noop",}`, nil, 400, "request body is not valid JSON: invalid character '}' looking for beginning of object key string at offset 17", ""},
		{"TruncatedJSON", `{"type": "noop"`, nil, 400, "request body is not valid JSON", ""},
		{"EmptyBody", ``, []string{"Content-Type", "application/json"}, 400, "request body is empty", ""},
		{"NotAnObject", `["noop"]`, nil, 400, "request body must be a JSON object, not an array", ""},
		{"Null", ` null`, nil, 400, "request body must be a JSON object, not null", ""},
		{"TrailingData", `{"type": "noop"} {"type": "noop"}`, nil, 400, "data after the JSON object", ""},
		{"UnknownField", `{"type": "noop", "foo": 1}`, nil, 422, `unknown field "foo"; allowed fields are name, type, payload, runAt, runIn, schedule, timezone, maxAttempts, timeout, backoff, jitter, idempotencyKey, overlap, misfire, expectSuccessWithin, notify`, "foo"},
		{"WrongTypeMaxAttempts", `{"type": "noop", "maxAttempts": "3"}`, nil, 422, "field maxAttempts must be a number, not a string", "maxAttempts"},
		{"FractionalMaxAttempts", `{"type": "noop", "maxAttempts": 1.5}`, nil, 422, "field maxAttempts must be a whole number, not 1.5", "maxAttempts"},
		{"WrongTypeType", `{"type": 7}`, nil, 422, "field type must be a string, not a number", "type"},
		{"MissingType", `{"payload": {}}`, nil, 422, "type is required", "type"},
		{"BadTypeChars", `{"type": "no op"}`, nil, 422, "may contain only letters, digits", "type"},
		{"LongType", `{"type": "` + strings.Repeat("a", 101) + `"}`, nil, 422, "at most 100", "type"},
		{"BadCron", `{"type": "noop", "schedule": "61 * * * *"}`, nil, 422, "is not a cron expression", "schedule"},
		{"NeverFires", `{"type": "noop", "schedule": "0 0 30 2 *"}`, nil, 422, "never fires", "schedule"},
		{"BadTimezone", `{"type": "noop", "schedule": "@hourly", "timezone": "Mars/Olympus"}`, nil, 422, `timezone "Mars/Olympus" is not an IANA timezone`, "timezone"},
		{"TimezoneInLowerCase", `{"type": "noop", "schedule": "@hourly", "timezone": "europe/berlin"}`, nil, 422, `timezone "europe/berlin" is not an IANA timezone, such as "Europe/London" or "America/New_York"; did you mean "Europe/Berlin"?`, "timezone"},
		{"BadTimezoneOneOff", `{"type": "noop", "timezone": "Nowhere"}`, nil, 422, `timezone "Nowhere"`, "timezone"},
		{"LocalTimezone", `{"type": "noop", "timezone": "Local"}`, nil, 422, `timezone "Local"`, "timezone"},
		{"RunAtNotRFC3339", `{"type": "noop", "runAt": "tomorrow"}`, nil, 422, `runAt "tomorrow" is not an RFC 3339 time such as "2026-12-01T09:00:00Z"`, "runAt"},
		{"RunAtNoZone", `{"type": "noop", "runAt": "2026-12-01T09:00:00"}`, nil, 422, "is not an RFC 3339 time", "runAt"},
		// A job due past 9999 was stored, and no answer could hold it.
		{"RunAtYear9999", `{"type": "noop", "runAt": "9999-12-31T23:59:59Z", "jitter": "24h"}`, nil, 422, "runAt 9999-12-31T23:59:59Z is out of range: give a time from 1970 to 8999", "runAt"},
		{"RunAtYear1", `{"type": "noop", "runAt": "0001-01-01T00:00:00Z"}`, nil, 422, "is out of range", "runAt"},
		{"RunInAndRunAt", `{"type": "noop", "runIn": "1h", "runAt": "2026-12-01T09:00:00Z"}`, nil, 422, "runIn and runAt cannot be used together", "runIn"},
		{"RunInAndSchedule", `{"type": "noop", "runIn": "1h", "schedule": "@hourly"}`, nil, 422, "runIn and schedule cannot be used together", "runIn"},
		{"RunInNegative", `{"type": "noop", "runIn": "-1h"}`, nil, 422, "runIn must not be negative", "runIn"},
		{"RunInNotDuration", `{"type": "noop", "runIn": "tomorrow"}`, nil, 422, "runIn:", "runIn"},
		{"RunAtAndSchedule", `{"type": "noop", "runAt": "2026-12-01T09:00:00Z", "schedule": "@hourly"}`, nil, 422, "runAt and schedule cannot be used together", "runAt"},
		{"MaxAttemptsZero", `{"type": "noop", "maxAttempts": 0}`, nil, 422, "maxAttempts must be at least 1", "maxAttempts"},
		{"MaxAttemptsNegative", `{"type": "noop", "maxAttempts": -1}`, nil, 422, "maxAttempts must be at least 1", "maxAttempts"},
		{"MaxAttemptsOverBound", `{"type": "noop", "maxAttempts": 1001}`, nil, 422, "maxAttempts must be at most 1000, not 1001", "maxAttempts"},
		{"MaxAttemptsBillion", `{"type": "noop", "maxAttempts": 1000000000}`, nil, 422, "maxAttempts must be at most 1000, not 1000000000", "maxAttempts"},
		{"TooLarge", long, nil, 413, "larger than the limit of 512 bytes", ""},
		{"BadOverlap", `{"type": "noop", "schedule": "@hourly", "overlap": "always"}`, nil, 422, `overlap "always" is not a policy; use "skip" (the default) or "queue_one"`, "overlap"},
		{"BadMisfire", `{"type": "noop", "schedule": "@hourly", "misfire": "later"}`, nil, 422, `misfire "later" is not a policy; use "run_once" (the default), "skip" or "run_all"`, "misfire"},
		{"OverlapWithoutSchedule", `{"type": "noop", "overlap": "skip"}`, nil, 422, "overlap applies only to recurring jobs", "overlap"},
		{"MisfireWithoutSchedule", `{"type": "noop", "misfire": "run_all"}`, nil, 422, "misfire applies only to recurring jobs", "misfire"},
		{"NegativeTimeout", `{"type": "noop", "timeout": "-5s"}`, nil, 422, "timeout must not be negative", "timeout"},
		{"ZeroTimeout", `{"type": "noop", "timeout": "0s"}`, nil, 422, "timeout must be greater than zero", "timeout"},
		{"SubMillisecondTimeout", `{"type": "noop", "timeout": "500us"}`, nil, 422, "timeout 500µs is shorter than 1ms", "timeout"},
		{"SubMillisecondBackoff", `{"type": "noop", "backoff": "1ns"}`, nil, 422, "backoff 1ns is shorter than 1ms", "backoff"},
		{"NegativeJitter", `{"type": "noop", "jitter": "-1m"}`, nil, 422, "jitter must not be negative", "jitter"},
		{"TimeoutNotDuration", `{"type": "noop", "timeout": "soon"}`, nil, 422, `timeout: "soon" is not a duration`, "timeout"},
		{"TimeoutInDays", `{"type": "noop", "timeout": "1d"}`, nil, 422, `timeout: "1d" is not a duration; use a Go duration such as "30s" or "5m" (a duration has no days: 1d is 24h)`, "timeout"},
		{"TimeoutNumber", `{"type": "noop", "timeout": 30}`, nil, 422, "timeout: a duration is a string", "timeout"},
		{"DisabledType", `{"type": "exec", "payload": {"command": ["true"]}}`, nil, 422, "exec jobs are off; start sked serve with --enable-exec", "type"},
		{"PayloadRejected", `{"type": "http", "payload": {}}`, nil, 422, "payload.url: url is required", "payload.url"},
		{"PayloadPlainError", `{"type": "fussy"}`, nil, 422, "payload: not fussy enough", "payload"},
		{"KeysDiffer", `{"type": "noop", "idempotencyKey": "a"}`, []string{"Idempotency-Key", "b"}, 422, `idempotencyKey "a" in the body and the Idempotency-Key header "b" differ`, "idempotencyKey"},
		{"EmptyKeyHeader", `{"type": "noop"}`, []string{"Idempotency-Key", `""`}, 422, "Idempotency-Key header is empty", "idempotencyKey"},
		{"LongKey", `{"type": "noop", "idempotencyKey": "` + strings.Repeat("k", 256) + `"}`, nil, 422, "at most 255", "idempotencyKey"},
		{"NotifyKey", `{"type": "noop", "idempotencyKey": "notify:x"}`, nil, 422, `idempotencyKey "notify:x" begins as the keys of the jobs sked creates itself`, "idempotencyKey"},
		{"PingKeyHeader", `{"type": "noop"}`, []string{"Idempotency-Key", "ping:x"}, 422, "begins as the keys of the jobs sked creates itself", "idempotencyKey"},
		{"BackfillKey", `{"type": "noop", "idempotencyKey": "backfill:x"}`, nil, 422, "pick a key that does not", "idempotencyKey"},
		{"NotJSONContentType", `type=noop`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "send application/json", ""},
		{"NoContentType", `{"type": "noop"}`, []string{"Content-Type", ""}, 415, "request body has no Content-Type; send it as Content-Type: application/json", ""},
		{"TextPlainJSON", `{"type": "noop"}`, []string{"Content-Type", "text/plain;charset=UTF-8"}, 415, "send application/json", ""},
		{"KeyWithNUL", `{"type": "noop", "idempotencyKey": "k\u0000x"}`, nil, 422, `idempotencyKey "k\x00x" contains a control character`, "idempotencyKey"},
		{"KeyWithCRLF", `{"type": "noop", "idempotencyKey": "k\r\nX: 1"}`, nil, 422, "contains a control character", "idempotencyKey"},
		{"KeyWithTab", `{"type": "noop", "idempotencyKey": "k\tx"}`, nil, 422, "contains a control character", "idempotencyKey"},
		{"KeyWithDEL", `{"type": "noop", "idempotencyKey": "k\u007f"}`, nil, 422, "contains a control character", "idempotencyKey"},
		{"HeaderKeyEscapedNUL", `{"type": "noop"}`, []string{"Idempotency-Key", `"k\u0000x"`}, 422, "contains a control character", "idempotencyKey"},
		{"HeaderKeyEscapedCRLF", `{"type": "noop"}`, []string{"Idempotency-Key", `"k\r\nX: 1"`}, 422, "contains a control character", "idempotencyKey"},
		{"HeaderKeyTab", `{"type": "noop"}`, []string{"Idempotency-Key", "k\tx"}, 422, "contains a control character", "idempotencyKey"},
		{"HeaderKeyNotUTF8", `{"type": "noop"}`, []string{"Idempotency-Key", "k\xffx"}, 422, "is not valid UTF-8", "idempotencyKey"},
		{"JitterOneOffTooLong", `{"type": "noop", "jitter": "2562047h"}`, nil, 422, "jitter 2562047h0m0s is longer than 24h0m0s, the most a one-off job allows; to run it later, set runAt", "jitter"},
		{"JitterOneOffOverADay", `{"type": "noop", "jitter": "24h0m1s"}`, nil, 422, "longer than 24h0m0s", "jitter"},
		{"JitterOverEvery", `{"type": "noop", "schedule": "@every 1m", "jitter": "61s"}`, nil, 422, `jitter 1m1s is longer than 1m0s, the shortest time between two slots of schedule "@every 1m" (2026-03-01T10:01:00Z to 2026-03-01T10:02:00Z); give at most 1m0s`, "jitter"},
		{"JitterHugeRecurring", `{"type": "noop", "schedule": "@hourly", "jitter": "2562047h"}`, nil, 422, "longer than 1h0m0s, the shortest time between two slots", "jitter"},
		{"JitterOverWeekdays", `{"type": "noop", "schedule": "0 9 * * 1-5", "jitter": "25h"}`, nil, 422, "longer than 24h0m0s, the shortest time between two slots", "jitter"},
		{"JitterOverDSTDay", `{"type": "noop", "schedule": "30 2 * * *", "timezone": "America/New_York", "jitter": "24h"}`, nil, 422,
			"longer than 23h30m0s, the shortest time between two slots of schedule \"30 2 * * *\" (2026-03-07T02:30:00-05:00 to 2026-03-08T03:00:00-04:00)", "jitter"},
		{"ExpectSuccessWithinADailyGap", `{"type": "noop", "schedule": "0 3 * * *", "expectSuccessWithin": "1h"}`, nil, 422,
			`expectSuccessWithin 1h0m0s is no longer than 24h0m0s, the longest time between two slots of schedule "0 3 * * *" (2026-03-02T03:00:00Z to 2026-03-03T03:00:00Z): the schedule would be reported quiet`, "expectSuccessWithin"},
		{"ExpectSuccessWithinTheWeekend", `{"type": "noop", "schedule": "0 9 * * 1-5", "expectSuccessWithin": "26h"}`, nil, 422,
			"no longer than 72h0m0s, the longest time between two slots", "expectSuccessWithin"},
	}
	e := newTestEnv(t, func(c *Config) {
		c.MaxBodyBytes = 512
		c.DisabledTypes = map[string]string{"exec": "exec jobs are off; start sked serve with --enable-exec"}
		c.ValidatePayload = func(typ string, payload json.RawMessage) error {
			switch typ {
			case "http":
				var p struct{ URL string }
				if err := json.Unmarshal(payload, &p); err != nil || p.URL == "" {
					return &db.ValidationError{Field: "payload.url", Msg: "url is required"}
				}
			case "fussy":
				return errors.New("not fussy enough")
			}
			return nil
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.do(http.MethodPost, "/jobs", tt.body, tt.headers...)
			p := res.wantProblem(t, tt.status, tt.detail)
			if p.Field != tt.field {
				t.Errorf("field: got %q, want %q", p.Field, tt.field)
			}
			if l := e.list(""); len(l.Jobs) != 0 {
				t.Errorf("jobs after a rejected create: got %d, want 0", len(l.Jobs))
			}
		})
	}
	if got := e.wakes.Load(); got != 0 {
		t.Errorf("wakes: got %d, want 0", got)
	}
}

func TestHandler_JobCreate_ContentTypeWithCharset(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	e.create(`{"type": "noop"}`, http.StatusCreated, "Content-Type", "application/json; charset=utf-8")
}

func TestHandler_JobGet(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "noop", "payload": [1, 2]}`, http.StatusCreated)

	res := e.do(http.MethodGet, "/jobs/"+j.ID, "")
	res.wantStatus(t, http.StatusOK)
	var got db.Job
	res.decode(t, &got)
	if got.ID != j.ID || string(got.Payload) != `[1,2]` {
		t.Errorf("job: got %s %s, want %s [1,2]", got.ID, got.Payload, j.ID)
	}

	e.do(http.MethodGet, "/jobs/nope", "").wantProblem(t, http.StatusNotFound, `job "nope" does not exist`)
}

// A schedule with a dead-man's switch says, read-only, when its window
// began (watchFrom), so that one can tell when it goes quiet; a job
// without a switch does not.
func TestHandler_JobWatchFrom(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "noop", "schedule": "@every 10m", "expectSuccessWithin": "1h"}`, http.StatusCreated)
	plain := e.create(`{"type": "noop", "schedule": "@every 10m"}`, http.StatusCreated)
	for id, want := range map[string]string{j.ID: `"watchFrom":"` + j.CreatedAt.Format(time.RFC3339Nano) + `"`, plain.ID: ""} {
		res := e.do(http.MethodGet, "/jobs/"+id, "")
		res.wantStatus(t, http.StatusOK)
		body := string(res.body)
		if want == "" && strings.Contains(body, "watchFrom") || want != "" && !strings.Contains(body, want) {
			t.Errorf("GET /jobs/%s = %s; want %s", id, body, cmp.Or(want, "no watchFrom"))
		}
	}
	e.do(http.MethodPatch, "/jobs/"+j.ID, `{"watchFrom": "2030-01-01T00:00:00Z"}`).wantProblem(t, http.StatusUnprocessableEntity, `unknown field "watchFrom"`)
}

// A paused schedule with a dead-man's switch is not watched: it shows no
// window (watchFrom), alone or in a list, however long it was watched
// before the pause; its resume starts a whole window.
func TestHandler_JobWatchFromPaused(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	clock := testNow
	e.store.NowFunc = func() time.Time { return clock }
	j := e.create(`{"type": "noop", "schedule": "@every 10m", "expectSuccessWithin": "1h"}`, http.StatusCreated)
	clock = clock.Add(20 * time.Minute)
	e.do(http.MethodPost, "/jobs/"+j.ID+"/pause", "").wantStatus(t, http.StatusOK)
	clock = clock.Add(5 * time.Hour)
	for _, path := range []string{"/jobs/" + j.ID, "/jobs?state=paused", "/jobs"} {
		res := e.do(http.MethodGet, path, "")
		res.wantStatus(t, http.StatusOK)
		if body := string(res.body); !strings.Contains(body, j.ID) || strings.Contains(body, "watchFrom") {
			t.Errorf("GET %s of the paused job = %s; want it without watchFrom", path, body)
		}
	}
	res := e.do(http.MethodPost, "/jobs/"+j.ID+"/resume", "")
	res.wantStatus(t, http.StatusOK)
	if want := `"watchFrom":"` + clock.Format(time.RFC3339Nano) + `"`; !strings.Contains(string(res.body), want) {
		t.Errorf("resumed: %s; want %s, the resume's time", res.body, want)
	}
}

func TestHandler_JobList(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	var ids []string
	for i := range 7 {
		typ := "a"
		if i%2 == 1 {
			typ = "b"
		}
		ids = append(ids, e.create(`{"type": "`+typ+`"}`, http.StatusCreated).ID)
	}
	paused := ids[0]
	e.do(http.MethodPost, "/jobs/"+paused+"/pause", "").wantStatus(t, http.StatusOK)

	t.Run("Empty", func(t *testing.T) {
		res := e.do(http.MethodGet, "/jobs?type=none", "")
		res.wantStatus(t, http.StatusOK)
		if got := strings.TrimSpace(string(res.body)); got != `{"jobs":[]}` {
			t.Errorf("body: got %s, want {\"jobs\":[]}", got)
		}
	})

	t.Run("FilterType", func(t *testing.T) {
		l := e.list("type=b")
		if len(l.Jobs) != 3 || l.NextCursor != "" {
			t.Fatalf("jobs of type b: got %d (next %q), want 3 and no cursor", len(l.Jobs), l.NextCursor)
		}
		for _, j := range l.Jobs {
			if j.Type != "b" {
				t.Errorf("job %s: got type %q, want b", j.ID, j.Type)
			}
		}
	})

	t.Run("FilterState", func(t *testing.T) {
		l := e.list("state=paused")
		if len(l.Jobs) != 1 || l.Jobs[0].ID != paused {
			t.Errorf("paused jobs: got %v, want [%s]", l.Jobs, paused)
		}
		if l := e.list("state=ready&type=a"); len(l.Jobs) != 3 {
			t.Errorf("ready jobs of type a: got %d, want 3", len(l.Jobs))
		}
	})

	t.Run("Paging", func(t *testing.T) {
		seen := map[string]bool{}
		var sizes []int
		cursor := ""
		for range 10 {
			l := e.list("limit=3&cursor=" + cursor)
			sizes = append(sizes, len(l.Jobs))
			for _, j := range l.Jobs {
				if seen[j.ID] {
					t.Errorf("job %s on two pages", j.ID)
				}
				seen[j.ID] = true
			}
			if cursor = l.NextCursor; cursor == "" {
				break
			}
		}
		if len(sizes) != 3 || sizes[0] != 3 || sizes[1] != 3 || sizes[2] != 1 {
			t.Errorf("page sizes: got %v, want [3 3 1]", sizes)
		}
		if len(seen) != 7 {
			t.Errorf("jobs seen: got %d, want 7", len(seen))
		}
	})

	// Each page but the last carries its body's nextCursor in the headers
	// too, as a page of runs or events does: Sked-Next-Cursor, and a Link
	// to the next page that keeps the filters.
	t.Run("PagingHeaders", func(t *testing.T) {
		path, seen := "/jobs?type=a&limit=2", 0
		for pages := 1; ; pages++ {
			if pages > 2 {
				t.Fatalf("a third page of the 4 jobs of type a, 2 a page: GET %s", path)
			}
			res := e.do(http.MethodGet, path, "")
			res.wantStatus(t, http.StatusOK)
			var l jobListResponse
			res.decode(t, &l)
			seen += len(l.Jobs)
			if got := res.header.Get("Sked-Next-Cursor"); got != l.NextCursor {
				t.Errorf("GET %s: Sked-Next-Cursor %q, body's nextCursor %q; want them equal", path, got, l.NextCursor)
			}
			link := res.header.Get("Link")
			if l.NextCursor == "" {
				if link != "" {
					t.Errorf("GET %s, the last page: Link %q; want none", path, link)
				}
				break
			}
			want := `</jobs?cursor=` + l.NextCursor + `&limit=2&type=a>; rel="next"`
			if link != want {
				t.Fatalf("GET %s: Link %q, want %q", path, link, want)
			}
			path = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		}
		if seen != 4 {
			t.Errorf("the pages the Link headers led to held %d jobs; want the 4 of type a", seen)
		}
	})

	t.Run("BadQuery", func(t *testing.T) {
		for _, tt := range []struct{ query, detail, field string }{
			{"limit=0", `limit "0" must be a whole number from 1 to 500`, "limit"},
			{"limit=501", `limit "501" must be a whole number from 1 to 500`, "limit"},
			{"limit=ten", `limit "ten"`, "limit"},
			{"state=sleeping", `state "sleeping" is not a job state`, "state"},
			{"state=failing", `"failing" is not a job state: a failing schedule is ready (or running) and waits for its next slot; list them with health=failing`, "state"},
			{"health=sick", `health "sick" is not known; use failing`, "health"},
			{"status=ready", `unknown query parameter "status"`, "status"},
			{"state=ready&state=dead", `given 2 times`, "state"},
			{"cursor=zzz", `cursor "zzz" is not a cursor of jobs`, "cursor"},
		} {
			p := e.do(http.MethodGet, "/jobs?"+tt.query, "").wantProblem(t, http.StatusBadRequest, tt.detail)
			if p.Field != tt.field {
				t.Errorf("%s: field: got %q, want %q", tt.query, p.Field, tt.field)
			}
		}
	})
}

func TestHandler_JobDelete(t *testing.T) {
	t.Parallel()

	t.Run("Ready", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		j := e.create(`{"type": "noop"}`, http.StatusCreated)
		res := e.do(http.MethodDelete, "/jobs/"+j.ID, "")
		res.wantStatus(t, http.StatusNoContent)
		if len(res.body) != 0 {
			t.Errorf("body: got %q, want none", res.body)
		}
		var got db.Job
		e.do(http.MethodGet, "/jobs/"+j.ID, "").decode(t, &got)
		if got.State != db.StateCancelled {
			t.Errorf("state: got %q, want cancelled", got.State)
		}
		// Cancelling again is a no-op, not an error.
		e.do(http.MethodDelete, "/jobs/"+j.ID, "").wantStatus(t, http.StatusNoContent)
	})

	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		e.do(http.MethodDelete, "/jobs/nope", "").wantProblem(t, http.StatusNotFound, `job "nope" does not exist`)
	})

	t.Run("Running", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		j := e.create(`{"type": "noop"}`, http.StatusCreated)
		claims := e.claim()
		if len(claims) != 1 {
			t.Fatalf("claims: got %d, want 1", len(claims))
		}
		p := e.do(http.MethodDelete, "/jobs/"+j.ID, "").wantProblem(t, http.StatusConflict,
			"job "+j.ID+" is running on worker w1 (run ")
		if !strings.Contains(p.Detail, "it cannot be cancelled — ask the handler to stop with POST /jobs/"+j.ID+"/cancel-run") ||
			!strings.Contains(p.Detail, "POST /jobs/"+j.ID+"/pause, then cancel it") {
			t.Errorf("detail: got %q, want the cancel-run hint, and a schedule's pause then cancel", p.Detail)
		}
		if p.State != db.StateRunning || p.Run == nil || p.Run.ID != claims[0].RunID || p.Run.WorkerID != "w1" {
			t.Errorf("problem members: got state %q run %+v, want running and run %d of w1", p.State, p.Run, claims[0].RunID)
		}
		var got db.Job
		e.do(http.MethodGet, "/jobs/"+j.ID, "").decode(t, &got)
		if got.State != db.StateRunning {
			t.Errorf("state after the refused cancel: got %q, want running", got.State)
		}
	})

	t.Run("Done", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, nil)
		j := e.create(`{"type": "noop"}`, http.StatusCreated)
		c := e.claim()[0]
		if _, err := e.store.RunFinish(context.Background(), db.RunFinishParams{
			JobID: j.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeSucceeded,
		}); err != nil {
			t.Fatal(err)
		}
		p := e.do(http.MethodDelete, "/jobs/"+j.ID, "").wantProblem(t, http.StatusConflict, "job "+j.ID+" is done; it cannot be cancelled")
		if p.State != db.StateDone {
			t.Errorf("state member: got %q, want done", p.State)
		}
	})
}

func TestHandler_RunList(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "noop", "maxAttempts": 5, "backoff": "1s"}`, http.StatusCreated)

	res := e.do(http.MethodGet, "/jobs/"+j.ID+"/runs", "")
	res.wantStatus(t, http.StatusOK)
	if got := strings.TrimSpace(string(res.body)); got != "[]" {
		t.Errorf("runs before any claim: got %s, want []", got)
	}

	// Three attempts: two fail, the third is still running. Each retry is due
	// after its backoff, so the clock moves past it.
	var runIDs []int64
	clock := testNow
	for i := range 3 {
		e.store.NowFunc = func() time.Time { return clock }
		claims := e.claim()
		if len(claims) != 1 {
			t.Fatalf("attempt %d: claims: got %d, want 1", i+1, len(claims))
		}
		runIDs = append(runIDs, claims[0].RunID)
		if i < 2 {
			if _, err := e.store.RunFinish(context.Background(), db.RunFinishParams{
				JobID: j.ID, Generation: claims[0].Job.LeaseGeneration, Outcome: db.OutcomeFailed,
				Error: "boom", Retryable: true,
			}); err != nil {
				t.Fatal(err)
			}
		}
		clock = clock.Add(time.Hour)
	}

	res = e.do(http.MethodGet, "/jobs/"+j.ID+"/runs", "")
	res.wantStatus(t, http.StatusOK)
	if got := res.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type: got %q", got)
	}
	var runs []db.Run
	res.decode(t, &runs)
	if len(runs) != 3 {
		t.Fatalf("runs: got %d, want 3", len(runs))
	}
	if runs[0].ID != runIDs[2] || runs[2].ID != runIDs[0] {
		t.Errorf("order: got %d..%d, want newest (%d) first", runs[0].ID, runs[2].ID, runIDs[2])
	}
	if runs[2].Outcome != db.OutcomeFailed || runs[2].Error != "boom" || runs[2].Attempt != 1 || runs[2].WorkerID != "w1" || runs[2].FinishedAt == nil {
		t.Errorf("first run: got %+v", runs[2])
	}
	if runs[0].Outcome != db.OutcomeRunning || runs[0].Attempt != 3 {
		t.Errorf("live run: got %+v", runs[0])
	}
	if res.header.Get("Sked-Next-Cursor") != "" || res.header.Get("Link") != "" {
		t.Errorf("paging headers on the only page: got %q, %q", res.header.Get("Sked-Next-Cursor"), res.header.Get("Link"))
	}

	t.Run("Paging", func(t *testing.T) {
		res := e.do(http.MethodGet, "/jobs/"+j.ID+"/runs?limit=2", "")
		res.wantStatus(t, http.StatusOK)
		var page []db.Run
		res.decode(t, &page)
		next := res.header.Get("Sked-Next-Cursor")
		if len(page) != 2 || next == "" {
			t.Fatalf("first page: got %d runs, cursor %q; want 2 and a cursor", len(page), next)
		}
		wantLink := "</jobs/" + j.ID + "/runs?cursor=" + next + "&limit=2>; rel=\"next\""
		if got := res.header.Get("Link"); got != wantLink {
			t.Errorf("Link: got %q, want %q", got, wantLink)
		}
		res = e.do(http.MethodGet, "/jobs/"+j.ID+"/runs?limit=2&cursor="+next, "")
		res.wantStatus(t, http.StatusOK)
		res.decode(t, &page)
		if len(page) != 1 || page[0].ID != runIDs[0] || res.header.Get("Sked-Next-Cursor") != "" {
			t.Errorf("second page: got %+v (cursor %q), want run %d alone", page, res.header.Get("Sked-Next-Cursor"), runIDs[0])
		}
	})

	t.Run("Errors", func(t *testing.T) {
		e.do(http.MethodGet, "/jobs/nope/runs", "").wantProblem(t, http.StatusNotFound, `job "nope" does not exist`)
		e.do(http.MethodGet, "/jobs/"+j.ID+"/runs?cursor=x", "").wantProblem(t, http.StatusBadRequest, `cursor "x"`)
		e.do(http.MethodGet, "/jobs/"+j.ID+"/runs?limit=1000", "").wantProblem(t, http.StatusBadRequest, "from 1 to 500")
	})
}

func TestHandler_JobActions(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	post := func(id, action string) response {
		t.Helper()
		return e.do(http.MethodPost, "/jobs/"+id+"/"+action, "")
	}
	state := func(res response) db.JobState {
		t.Helper()
		res.wantStatus(t, http.StatusOK)
		var j db.Job
		res.decode(t, &j)
		return j.State
	}

	j := e.create(`{"type": "noop", "maxAttempts": 1}`, http.StatusCreated)
	if got := state(post(j.ID, "pause")); got != db.StatePaused {
		t.Errorf("pause: got %q, want paused", got)
	}
	// Again, a minute later: nothing changes, so updatedAt stays.
	paused := e.do(http.MethodGet, "/jobs/"+j.ID, "").job(t)
	e.store.NowFunc = func() time.Time { return testNow.Add(time.Minute) }
	if got := post(j.ID, "pause").job(t); got.State != db.StatePaused || !got.UpdatedAt.Equal(paused.UpdatedAt) {
		t.Errorf("pause again: got %s updated %v, want paused and unchanged (%v)", got.State, got.UpdatedAt, paused.UpdatedAt)
	}
	post(j.ID, "retry").wantProblem(t, http.StatusConflict, "job "+j.ID+" is paused; it cannot be retried (only dead jobs can be retried)")
	post(j.ID, "cancel-run").wantProblem(t, http.StatusConflict, "only a running job has a run to stop")

	wakes := e.wakes.Load()
	if got := state(post(j.ID, "resume")); got != db.StateReady {
		t.Errorf("resume: got %q, want ready", got)
	}
	if got := e.wakes.Load(); got != wakes+1 {
		t.Errorf("wakes after resume: got %d, want %d", got, wakes+1)
	}
	resumed := e.do(http.MethodGet, "/jobs/"+j.ID, "").job(t)
	e.store.NowFunc = func() time.Time { return testNow.Add(2 * time.Minute) }
	if got := post(j.ID, "resume").job(t); got.State != db.StateReady || !got.UpdatedAt.Equal(resumed.UpdatedAt) {
		t.Errorf("resume again: got %s updated %v, want ready and unchanged (%v)", got.State, got.UpdatedAt, resumed.UpdatedAt)
	}

	// Claimed: pause is refused, cancel-run is accepted.
	c := e.claim()[0]
	// db.ErrConflict promises the run when a worker holds the job; the
	// SQLite store names it on cancel only, so the detail here may lack it.
	p := post(j.ID, "pause").wantProblem(t, http.StatusConflict, "it cannot be paused — a one-off job's run is all of it")
	if p.State != db.StateRunning {
		t.Errorf("pause of a running job: got state %q, want running", p.State)
	}
	res := post(j.ID, "cancel-run")
	res.wantStatus(t, http.StatusOK)
	var got db.Job
	res.decode(t, &got)
	if !got.CancelRequested {
		t.Errorf("cancel-run: cancelRequested false")
	}

	// The run fails instead of stopping: the request holds, and the job
	// is cancelled rather than retried.
	if ended, err := e.store.RunFinish(context.Background(), db.RunFinishParams{
		JobID: j.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeFailed, Error: "boom", Retryable: true,
	}); err != nil || ended.State != db.StateCancelled {
		t.Fatalf("a run asked to stop failed: job %s, %v; want cancelled", ended.State, err)
	}

	// A job whose only attempt fails: dead, then retried back to ready.
	j = e.create(`{"type": "noop", "maxAttempts": 1}`, http.StatusCreated)
	c = e.claim()[0]
	if _, err := e.store.RunFinish(context.Background(), db.RunFinishParams{
		JobID: j.ID, Generation: c.Job.LeaseGeneration, Outcome: db.OutcomeFailed, Error: "boom", Retryable: true,
	}); err != nil {
		t.Fatal(err)
	}
	post(j.ID, "resume").wantProblem(t, http.StatusConflict, "is dead; it cannot be resumed (only paused jobs, and running schedules that were to pause, can be resumed)")
	wakes = e.wakes.Load()
	if got := state(post(j.ID, "retry")); got != db.StateReady {
		t.Errorf("retry: got %q, want ready", got)
	}
	if got := e.wakes.Load(); got != wakes+1 {
		t.Errorf("wakes after retry: got %d, want %d", got, wakes+1)
	}

	for _, action := range []string{"pause", "resume", "retry", "cancel-run"} {
		post("nope", action).wantProblem(t, http.StatusNotFound, `job "nope" does not exist`)
	}

	// A name whose newest job is cancelled names that job: 409 with its state.
	n := e.create(`{"type": "noop", "name": "gone"}`, http.StatusCreated)
	e.do(http.MethodDelete, "/jobs/"+n.ID, "").wantStatus(t, http.StatusNoContent)
	for _, action := range []string{"pause", "resume", "retry", "cancel-run", "trigger", "skip"} {
		if p := post("gone", action).wantProblem(t, http.StatusConflict, "job gone is cancelled; it cannot be"); p.State != db.StateCancelled {
			t.Errorf("%s of a cancelled name: got state %q, want cancelled", action, p.State)
		}
	}
}

func TestHandler_Routing(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	e.do(http.MethodGet, "/nope", "").wantProblem(t, http.StatusNotFound, "no such endpoint: GET /nope")
	e.do(http.MethodGet, "/jobs/x/nope", "").wantProblem(t, http.StatusNotFound, "no such endpoint")
	// Cancel is DELETE, not an action as pause is: the guess is told so.
	e.do(http.MethodPost, "/jobs/x/cancel", "").wantProblem(t, http.StatusNotFound,
		"no such endpoint: POST /jobs/x/cancel; a job is cancelled with DELETE /jobs/x, and its running run stopped with POST /jobs/x/cancel-run")

	// HEAD is allowed wherever GET is (curl -I), and said so.
	res := e.do(http.MethodPut, "/jobs", "")
	res.wantProblem(t, http.StatusMethodNotAllowed, "PUT is not allowed on /jobs; use GET or HEAD or POST")
	if got := res.header.Get("Allow"); got != "GET, HEAD, POST" {
		t.Errorf("Allow: got %q, want \"GET, HEAD, POST\"", got)
	}
	if res := e.do(http.MethodHead, "/jobs", ""); res.status != http.StatusOK {
		t.Errorf("HEAD /jobs: %d, want 200", res.status)
	}
	res = e.do(http.MethodPost, "/jobs/x/runs", "")
	res.wantProblem(t, http.StatusMethodNotAllowed, "use GET or HEAD")
	if got := res.header.Get("Allow"); got != "GET, HEAD" {
		t.Errorf("Allow: got %q, want \"GET, HEAD\"", got)
	}
	res = e.do(http.MethodGet, "/jobs/x/pause", "")
	res.wantProblem(t, http.StatusMethodNotAllowed, "use POST")
	if got := res.header.Get("Allow"); got != "POST" {
		t.Errorf("Allow: got %q, want \"POST\"", got)
	}
}

func TestHandler_Error(t *testing.T) {
	t.Parallel()
	var logged strings.Builder
	h := &handler{logger: slog.New(slog.NewTextHandler(&logged, nil))}
	conflict := &db.ConflictError{State: db.StateDone, Msg: "job j is already done"}
	tests := []struct {
		name   string
		err    error
		status int
		detail string
		field  string
	}{
		{"Validation", &db.ValidationError{Field: "payload.url", Msg: "url is required"}, 422, "payload.url: url is required", "payload.url"},
		{"ValidationNamingItsField", &db.ValidationError{Field: "maxAttempts", Msg: "maxAttempts must be at least 1"}, 422, "maxAttempts must be at least 1", "maxAttempts"},
		{"Invalid", fmt.Errorf("check: %w", db.ErrInvalid), 422, "check: invalid input", ""},
		{"NotFound", fmt.Errorf("get job x: %w", db.ErrNotFound), 404, "get job x: not found", ""},
		{"Conflict", fmt.Errorf("cancel: %w", conflict), 409, "job j is already done", ""},
		{"Stale", db.ErrStale, 409, "stale lease generation", ""},
		{"KeyReused", fmt.Errorf("create: %w", &db.KeyReusedError{Key: "k", Job: db.Job{ID: "j"}}), 422, `idempotency key "k" was used by a different request, which created job j`, "idempotencyKey"},
		{"Internal", errors.New("disk on fire"), 500, internalDetail, ""},
		{"InternalKeepsGenericDetail", &detailError{err: errors.New("disk on fire"), detail: "secret"}, 500, internalDetail, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logged.Reset()
			w := httptest.NewRecorder()
			h.error(w, httptest.NewRequest(http.MethodGet, "/jobs/x", nil), tt.err)
			res := response{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
			p := res.wantProblem(t, tt.status, tt.detail)
			if p.Field != tt.field {
				t.Errorf("field: got %q, want %q", p.Field, tt.field)
			}
			if tt.status == 409 && errors.Is(tt.err, db.ErrConflict) && p.State != db.StateDone {
				t.Errorf("state member: got %q, want done", p.State)
			}
			// Only 5xx are logged, with the real error.
			if gotLog := logged.String(); (tt.status >= 500) != strings.Contains(gotLog, "disk on fire") {
				t.Errorf("log: got %q", gotLog)
			}
		})
	}
}

// TestHandler_SkipAfterTrigger: a skip while an operator's run is due says
// why it cannot be made then, not that a ready job cannot be skipped.
func TestHandler_SkipAfterTrigger(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	j := e.create(`{"type": "t", "schedule": "@hourly"}`, http.StatusCreated)
	e.do(http.MethodPost, "/jobs/"+j.ID+"/trigger", "").wantStatus(t, http.StatusOK)
	e.do(http.MethodPost, "/jobs/"+j.ID+"/skip", "").
		wantProblem(t, http.StatusConflict, "has an operator's run (sked trigger) due before its pending slot; skip the slot once that run has started")
}

// TestHandler_ReadyConflictNamesJob: the conflicts of a ready job (a
// one-off job's skip, a trigger of a job due now) call it by its name, as
// the other conflicts call it as it was asked for, not by its id alone.
func TestHandler_ReadyConflictNamesJob(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	e.create(`{"type": "t", "name": "later", "runIn": "1h"}`, http.StatusCreated)
	e.do(http.MethodPost, "/jobs/later/skip", "").
		wantProblem(t, http.StatusConflict, "job later is a ready one-off job; only the pending slot of a ready recurring job can be skipped")
	e.create(`{"type": "t", "name": "now"}`, http.StatusCreated)
	e.do(http.MethodPost, "/jobs/now/trigger", "").wantProblem(t, http.StatusConflict, "job now is already due and runs now")
}

// TestHandler_WakeNamesTypes: a write that makes jobs due wakes the
// dispatcher with their types, so that sked serve wakes only the pool that
// serves them (a job created does not wake the deliveries' pool, a
// delivery resumed does); a backfill's, of jobs not counted here, names
// none.
func TestHandler_WakeNamesTypes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var wakes []map[string]int
	e := newTestEnv(t, func(c *Config) {
		c.Wake = func(due map[string]int) {
			mu.Lock()
			defer mu.Unlock()
			wakes = append(wakes, due)
		}
	})
	last := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		if len(wakes) == 0 {
			return map[string]int{"none": 0}
		}
		return wakes[len(wakes)-1]
	}
	j := e.create(`{"type": "report", "payload": {}}`, http.StatusCreated)
	if got := last(); !maps.Equal(got, map[string]int{"report": 1}) {
		t.Errorf("wake of a create: %v, want report: 1", got)
	}
	e.do(http.MethodPost, "/jobs/"+j.ID+"/pause", "").wantStatus(t, http.StatusOK)
	e.do(http.MethodPost, "/jobs/"+j.ID+"/resume", "").wantStatus(t, http.StatusOK)
	if got := last(); !maps.Equal(got, map[string]int{"report": 1}) {
		t.Errorf("wake of a resume: %v, want report: 1", got)
	}
	sched := e.create(`{"type": "nightly", "schedule": "0 3 * * *", "payload": {}}`, http.StatusCreated)
	e.do(http.MethodPost, "/jobs/"+sched.ID+"/backfill", `{"from": "2020-01-01T00:00:00Z", "to": "2020-01-02T00:00:00Z"}`).wantStatus(t, http.StatusCreated)
	if got := last(); got != nil {
		t.Errorf("wake of a backfill: %v, want nil (any type)", got)
	}
}

// TestHandler_PageLinkUnderPrefix: mounted under a prefix (as an embedding
// program's router does, behind http.StripPrefix), a page's Link to the
// next one is under the prefix, as a created job's Location is, for the
// jobs and for a job's runs.
func TestHandler_PageLinkUnderPrefix(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	mux := http.NewServeMux()
	mux.Handle("/ops/sked/", http.StripPrefix("/ops/sked", e.api))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e.create(`{"type": "report", "runAt": "2030-01-01T00:00:00Z"}`, http.StatusCreated)
	j := e.create(`{"type": "report", "schedule": "@every 1h"}`, http.StatusCreated)
	for range 2 { // two extra runs of j
		e.do(http.MethodPost, "/jobs/"+j.ID+"/trigger", "").wantStatus(t, http.StatusOK)
		c := e.claim()
		if len(c) != 1 {
			t.Fatalf("claimed %d jobs; want the triggered one", len(c))
		}
		if _, err := e.store.RunFinish(context.Background(), db.RunFinishParams{JobID: j.ID, Generation: c[0].Job.LeaseGeneration, Outcome: db.OutcomeSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	for path, want := range map[string]string{
		"/ops/sked/jobs?type=report&limit=1":       "</ops/sked/jobs?cursor=",
		"/ops/sked/jobs/" + j.ID + "/runs?limit=1": "</ops/sked/jobs/" + j.ID + "/runs?cursor=",
	} {
		res, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if link := res.Header.Get("Link"); res.StatusCode != http.StatusOK || !strings.HasPrefix(link, want) {
			t.Errorf("GET %s: %d, Link %q; want one beginning %q", path, res.StatusCode, link, want)
		}
	}
}
