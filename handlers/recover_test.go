package handlers

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/internal/syncbuf"
)

// panickingStore is the real store whose JobGet panics with value, as a
// bug below a handler would.
type panickingStore struct {
	*sqlite.Store
	value any
}

func (p panickingStore) JobGet(context.Context, string) (db.Job, error) { panic(p.value) }

// A panic in a handler answers a generic 500 problem, is logged with its
// value, path and stack, and the server goes on serving.
func TestRecoverer_PanicAnswers500(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	e := newTestEnv(t, func(cfg *Config) {
		cfg.Store = panickingStore{Store: cfg.Store.(*sqlite.Store), value: "index out of range"}
		cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	res := e.do(http.MethodGet, "/jobs/j1", "")
	res.wantStatus(t, http.StatusInternalServerError)
	var p struct {
		Status int
		Detail string
	}
	res.decode(t, &p)
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") || p.Status != 500 || p.Detail != internalDetail {
		t.Errorf("answer %s %+v, want a problem+json 500 with the generic detail", ct, p)
	}
	var line struct{ Msg, Method, Path, Panic, Stack string }
	if err := json.Unmarshal([]byte(logs.String()), &line); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if line.Msg != "panic in http handler" || line.Method != "GET" || line.Path != "/jobs/j1" || line.Panic != "index out of range" ||
		!strings.Contains(line.Stack, "panickingStore.JobGet") {
		t.Errorf("logged %+v, want the panic with its method, path, value and stack", line)
	}
	e.do(http.MethodGet, "/jobs", "").wantStatus(t, http.StatusOK)
}

// http.ErrAbortHandler keeps its meaning: the connection is dropped
// without an answer and nothing is logged as a bug.
func TestRecoverer_AbortHandler(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	e := newTestEnv(t, func(cfg *Config) {
		cfg.Store = panickingStore{Store: cfg.Store.(*sqlite.Store), value: http.ErrAbortHandler}
		cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	res, err := e.srv.Client().Get(e.srv.URL + "/jobs/j1")
	if err == nil {
		res.Body.Close()
		t.Fatalf("an aborted handler answered %d, want the connection dropped", res.StatusCode)
	}
	if logs.String() != "" {
		t.Errorf("an abort was logged: %s", logs.String())
	}
}
