package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
)

// TestClient_Definitions drives what `sked apply`, `sked edit` and `sked
// export` need: create by name, put, patch, the timeline, list by name, and
// a job's definition written back as the request that makes it.
func TestClient_Definitions(t *testing.T) {
	t.Parallel()
	_, url := serve(t)
	ctx := context.Background()
	c := &client.Client{BaseURL: url, Actor: "ann@laptop"}

	req := client.JobCreateRequest{
		Name: "cert-renewal", Type: "noop", Schedule: "17 3 * * *", Payload: json.RawMessage(`{"domains":["example.com"]}`),
		Notify: &db.Notify{On: []string{"gave_up", "recovered"}},
	}
	if dry, err := c.JobPut(ctx, "cert-renewal", req, true); err != nil || !dry.Created {
		t.Fatalf("dry run of the first put: %+v %v", dry, err)
	}
	first, err := c.JobPut(ctx, "cert-renewal", req, false)
	j := first.Job
	if err != nil || !first.Created || j.Name != "cert-renewal" || j.Notify == nil {
		t.Fatalf("first put: %+v %v", first, err)
	}
	if again, err := c.JobPut(ctx, "cert-renewal", req, false); err != nil || again.Changed() || again.Job.ID != j.ID {
		t.Fatalf("the same put: %+v %v; want %s unchanged", again, err, j.ID)
	}

	// Written back, the definition puts nothing new.
	back := client.RequestOf(j)
	if back.Name != "cert-renewal" || back.MaxAttempts != db.DefaultMaxAttempts || back.Overlap != db.OverlapSkip {
		t.Errorf("RequestOf: got %+v", back)
	}
	if r, err := c.JobPut(ctx, "cert-renewal", back, false); err != nil || r.Changed() {
		t.Errorf("putting RequestOf the job: %+v %v; want nothing changed", r, err)
	}

	patched, err := c.JobPatch(ctx, "cert-renewal", map[string]any{"schedule": "17 4 * * *", "notify": nil})
	if err != nil || patched.Schedule != "17 4 * * *" || patched.Notify != nil {
		t.Fatalf("patch: %+v, %v", patched, err)
	}
	_, err = c.JobPatch(ctx, "cert-renewal", map[string]any{"type": "other"})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || !errors.Is(err, db.ErrInvalid) || apiErr.Field != "type" {
		t.Errorf("patch of the type: %v; want a 422 on field type", err)
	}
	if _, err := c.JobPatch(ctx, "nobody", map[string]any{"maxAttempts": 2}); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("patch of an unknown name: %v; want ErrNotFound", err)
	}

	c.Actor = ""
	if _, err := c.JobPatch(ctx, j.ID, json.RawMessage(`{"maxAttempts": 7}`)); err != nil {
		t.Fatal(err)
	}

	events, next, err := c.EventList(ctx, db.EventListParams{JobID: "cert-renewal", Limit: 1})
	if err != nil || len(events) != 1 || next == 0 {
		t.Fatalf("first page of events: %+v next=%d %v; want 1 and a cursor", events, next, err)
	}
	if events[0].Actor != "api (127.0.0.1)" {
		t.Errorf("newest event's actor %q; want the API's", events[0].Actor)
	}
	// The put that created the job and the put that changed nothing
	// recorded no event: the patches are the only ones.
	rest, next, err := c.EventList(ctx, db.EventListParams{JobID: j.ID, Cursor: next})
	if err != nil || len(rest) != 1 || next != 0 {
		t.Fatalf("second page: %+v next=%d %v; want the first patch alone", rest, next, err)
	}
	if rest[0].Kind != db.EventChanged || rest[0].Actor != "ann@laptop (127.0.0.1)" {
		t.Errorf("first patch's event: %+v; want ann's change", rest[0])
	}
	var changes db.Changes
	if err := json.Unmarshal(rest[0].Detail, &changes); err != nil || !slices.Equal(slices.Sorted(maps.Keys(changes)), []string{"notify", "schedule"}) {
		t.Errorf("changes: %s (%v)", rest[0].Detail, err)
	}

	if _, _, err := c.JobCreate(ctx, client.JobCreateRequest{Name: "cert-renewal", Type: "noop"}); !errors.Is(err, db.ErrConflict) {
		t.Errorf("a second job of the name: %v; want ErrConflict", err)
	}
	jobs, _, err := c.JobList(ctx, db.JobListParams{Name: "cert-renewal"})
	if err != nil || len(jobs) != 1 || jobs[0].ID != j.ID {
		t.Errorf("list by name: %+v, %v", jobs, err)
	}
}

// TestClient_NotSked: a server that is not sked (a web server, a proxy's
// error page) is named as such, not with a JSON decoder's complaint.
func TestClient_NotSked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status      int
		contentType string
		body        string
	}{
		{http.StatusOK, "text/plain", "ok"},
		{http.StatusOK, "", "ok"},
		{http.StatusNotFound, "text/html; charset=utf-8", "<!DOCTYPE html><html><body>Not here</body></html>"},
		{http.StatusNotFound, "", ""}, // a bare 404: sked's own say why
		{http.StatusBadGateway, "text/plain", "\n"},
		{http.StatusNotFound, "text/plain; charset=utf-8", "404 page not found\n"}, // another Go server
		{http.StatusForbidden, "", "Forbidden"},
		{http.StatusNotFound, "application/json", `{"error": "no route"}`}, // another API
		{http.StatusBadGateway, "text/plain", "upstream down"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if c.contentType != "" {
				w.Header().Set("Content-Type", c.contentType)
			} else {
				w.Header()["Content-Type"] = nil // no sniffing
			}
			w.WriteHeader(c.status)
			io.WriteString(w, c.body)
		}))
		_, _, err := (&client.Client{BaseURL: srv.URL}).JobList(context.Background(), db.JobListParams{})
		if err == nil || !strings.Contains(err.Error(), "is it a sked server?") || strings.Contains(err.Error(), "<html") {
			t.Errorf("%d %q: %v; want it to ask whether this is a sked server", c.status, c.contentType, err)
		}
		// Below 500 it is not sked there (a 5xx is a proxy's while sked is
		// down: an answer to retry), and the status stays known.
		if notSked := errors.As(err, new(*client.NotSkedError)); notSked != (c.status < 500) || c.status >= 400 && !client.IsStatus(err, c.status) {
			t.Errorf("%d %q: %v; NotSkedError %v, want %v, and IsStatus(%d)", c.status, c.contentType, err, notSked, c.status < 500, c.status)
		}
		srv.Close()
	}
}

// TestClient_JobWait: JobWait reads the job until it has ended, asking
// again through a 503 (a server restarting) and a server that does not
// answer; a 404 ends the wait.
func TestClient_JobWait(t *testing.T) {
	t.Parallel()
	var read atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads := read.Add(1)
		switch {
		case r.URL.Path == "/jobs/gone":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"status": 404, "detail": "job \"gone\" does not exist"}`)
		case reads == 1:
			io.WriteString(w, `{"jobId": "j1", "state": "running"}`)
		case reads == 2:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"status": 503, "detail": "restarting"}`)
		case reads == 3:
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close() // no answer at all
		default:
			io.WriteString(w, `{"jobId": "j1", "state": "dead", "attempt": 3, "lastError": "exit status 1"}`)
		}
	}))
	defer srv.Close()
	// A connection of its own for each request: net/http sends a GET
	// again by itself only on a reused connection that broke.
	c := &client.Client{BaseURL: srv.URL, HTTP: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	job, err := c.JobWait(context.Background(), "j1", 100*time.Millisecond)
	if reads := read.Load(); err != nil || job.State != db.StateDead || reads != 4 {
		t.Fatalf("JobWait: %+v, %v after %d reads; want the dead job after 4", job, err, reads)
	}
	if _, err := c.JobWait(context.Background(), "gone", 100*time.Millisecond); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("JobWait of a job that does not exist: %v, want ErrNotFound", err)
	}

	// The wait's context ends first, here during its second read: the job
	// as last read, and the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runningReads atomic.Int32
	running := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runningReads.Add(1) == 2 {
			cancel()
		}
		io.WriteString(w, `{"jobId": "j2", "state": "running", "attempt": 1}`)
	}))
	defer running.Close()
	job, err = (&client.Client{BaseURL: running.URL}).JobWait(ctx, "j2", 100*time.Millisecond)
	if !errors.Is(err, context.Canceled) || job.ID != "j2" || job.State != db.StateRunning {
		t.Errorf("JobWait until its context ends: %+v, %v; want the running job as last read and the cancellation", job, err)
	}
}

// TestClient_JobWaitNoAnswer: a wait whose server stops answering gives up
// once it has given no answer for NoAnswerLimit (here 1ms: at its first
// request without an answer), with ErrNoAnswer and the job as last read,
// where it asked for ever; 503s are answers (a server restarting, its
// database failing over) and never end it. TestPollUntil_NoAnswer checks
// the default minute.
func TestClient_JobWaitNoAnswer(t *testing.T) {
	t.Parallel()
	for _, answer := range []int{0, http.StatusServiceUnavailable} {
		var read atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch reads := read.Add(1); {
			case reads == 1:
				io.WriteString(w, `{"jobId": "j1", "state": "running"}`)
			case reads == 10:
				io.WriteString(w, `{"jobId": "j1", "state": "done"}`)
			case answer == 0:
				hj, _ := w.(http.Hijacker)
				conn, _, _ := hj.Hijack()
				conn.Close() // no answer at all
			default:
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(answer)
				io.WriteString(w, `{"status": 503, "detail": "restarting"}`)
			}
		}))
		c := &client.Client{BaseURL: srv.URL, HTTP: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, NoAnswerLimit: time.Millisecond}
		job, err := c.JobWait(context.Background(), "j1", 100*time.Millisecond)
		reads := read.Load()
		srv.Close()
		switch {
		case answer == 0 && (!errors.Is(err, client.ErrNoAnswer) || job.State != db.StateRunning || reads != 2):
			t.Errorf("JobWait of a server that stopped answering: %+v, %v after %d reads; want the running job as last read and ErrNoAnswer after 2", job, err, reads)
		case answer != 0 && (err != nil || job.State != db.StateDone):
			t.Errorf("JobWait through eight 503s: %+v, %v after %d reads; want the done job", job, err, reads)
		}
	}
}
