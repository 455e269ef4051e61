package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// TestAPI_JobCreate creates jobs in-process and checks that each request
// fares as it does as the body of POST /jobs: the same fault in the same
// field, the same job, the same wake-up.
func TestAPI_JobCreate(t *testing.T) {
	t.Parallel()
	var cfg Config
	e := newTestEnv(t, func(c *Config) {
		c.DisabledTypes = map[string]string{"exec": "exec jobs are off"}
		c.ValidatePayload = func(typ string, payload json.RawMessage) error {
			if typ == "strict" && string(payload) != `{"ok":true}` {
				return &db.ValidationError{Field: "payload.ok", Msg: "payload.ok must be true"}
			}
			return nil
		}
		cfg = *c
	})
	api := New(cfg) // the same store, checks and wake-up as e's server
	ctx := context.Background()

	runAt := testNow.Add(time.Hour)
	for _, req := range []wire.JobCreateRequest{
		{},
		{Type: "exec"},
		{Type: "bad type"},
		{Type: "strict", Payload: json.RawMessage(`{"ok":false}`)},
		{Type: "noop", Schedule: "every tuesday"},
		{Type: "noop", Schedule: "@hourly", RunAt: &runAt},
		{Type: "noop", Timezone: "Mars/Olympus"},
		{Type: "noop", MaxAttempts: -1},
		{Type: "noop", Name: "batch"},
	} {
		_, _, err := api.JobCreate(ctx, req)
		var ve *db.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, db.ErrInvalid) {
			t.Errorf("JobCreate(%+v): %v, want a *db.ValidationError", req, err)
			continue
		}
		body, _ := json.Marshal(req)
		var p problem
		e.do(http.MethodPost, "/jobs", string(body)).decode(t, &p)
		if p.Status != http.StatusUnprocessableEntity || p.Field != ve.Field || p.Detail != validationDetail(ve) {
			t.Errorf("%s: in-process %q (%s), over HTTP %d %q (%s)", body, ve.Field, validationDetail(ve), p.Status, p.Field, p.Detail)
		}
	}
	// A payload that is not JSON, or not UTF-8, cannot be sent over HTTP
	// (the body is refused whole); in-process it is the payload's fault.
	for _, payload := range []string{`{"a":`, "{\"a\":\"\xff\"}"} {
		_, _, err := api.JobCreate(ctx, wire.JobCreateRequest{Type: "noop", Payload: json.RawMessage(payload)})
		if ve := (*db.ValidationError)(nil); !errors.As(err, &ve) || ve.Field != "payload" {
			t.Errorf("JobCreate with the payload %q: %v, want a *db.ValidationError of payload", payload, err)
		}
	}
	if n := len(e.list("").Jobs); n != 0 || e.wakes.Load() != 0 {
		t.Fatalf("refused requests left %d jobs and %d wake-ups", n, e.wakes.Load())
	}

	req := wire.JobCreateRequest{Type: "strict", Payload: json.RawMessage(`{"ok": true}`), RunAt: &runAt, IdempotencyKey: "k1"}
	j, created, err := api.JobCreate(ctx, req)
	if err != nil || !created || e.wakes.Load() != 1 {
		t.Fatalf("JobCreate: %+v created=%v wakes=%d, %v", j, created, e.wakes.Load(), err)
	}
	if !j.NextRunAt.Equal(runAt) || string(j.Payload) != `{"ok":true}` || j.MaxAttempts != db.DefaultMaxAttempts {
		t.Errorf("job: runAt %v payload %s maxAttempts %d; want %v, {\"ok\":true} and %d", j.NextRunAt, j.Payload, j.MaxAttempts, runAt, db.DefaultMaxAttempts)
	}
	again, created, err := api.JobCreate(ctx, req)
	if err != nil || created || again.ID != j.ID || e.wakes.Load() != 1 {
		t.Errorf("JobCreate with the same idempotency key: %s created=%v wakes=%d, %v; want %s unchanged", again.ID, created, e.wakes.Load(), err, j.ID)
	}
	body, _ := json.Marshal(req)
	var viaHTTP db.Job
	e.do(http.MethodPost, "/jobs", string(body)).decode(t, &viaHTTP)
	if viaHTTP.ID != j.ID {
		t.Errorf("POST /jobs of the same request answered %s, want %s", viaHTTP.ID, j.ID)
	}
}
