package cli

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/handlers"
)

// refusedAddr is an address where nothing listens.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestExitCodes: a script tells by the exit status a job that failed (1)
// from a command line it got wrong (2), a server it could not reach or
// that failed (3) and a request the server refused (4).
func TestExitCodes(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	if _, _, err := s.JobCreate(context.Background(), db.JobCreateParams{Type: "nobody", Name: "ready-one"}); err != nil {
		t.Fatal(err)
	}
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"the database is out of reach"}`))
	}))
	t.Cleanup(failing.Close)
	notSked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<!DOCTYPE html><title>my router</title>"))
	}))
	t.Cleanup(notSked.Close)
	notSkedPage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("<html><body><h1>404 Not Found</h1><hr>nginx</body></html>"))
	}))
	t.Cleanup(notSkedPage.Close)
	notSkedText := httptest.NewServer(http.NotFoundHandler()) // another Go program's plain 404
	t.Cleanup(notSkedText.Close)
	down := refusedAddr(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ls", "--server", srv.URL}, ExitOK, ""},
		{[]string{"ls", "--limit", "many", "--server", srv.URL}, ExitUsage, "give a whole number"},
		// Zero is the flag's unset value: a --limit below 1 would silently be the server's default.
		{[]string{"ls", "--limit", "0", "--server", srv.URL}, ExitUsage, "--limit 0: give a number from 1 to 500"},
		{[]string{"runs", "ready-one", "--limit", "-1", "--server", srv.URL}, ExitUsage, "--limit -1: give a number from 1 to 500"},
		{[]string{"runs", "ready-one", "--limit", "1", "--server", srv.URL}, ExitOK, ""},
		{[]string{"ls", "--server", down}, ExitUnreachable, "connection refused"},
		{[]string{"ls", "--server", notSked.URL}, ExitUnreachable, "answered with text/html, not sked's JSON: is it a sked server?"},
		{[]string{"show", "nightly", "--server", notSkedPage.URL}, ExitUnreachable, "answered with an HTML page (404 Not Found), not sked's JSON: is it a sked server?"},
		{[]string{"show", "nightly", "--server", notSkedText.URL}, ExitUnreachable, `answered with plain text (404 Not Found: "404 page not found"), not sked's JSON`},
		{[]string{"ls", "--server", srv.URL + "/api"}, ExitRefused,
			"no such endpoint: GET /api/jobs (404 Not Found); is --server (SKED_SERVER), now " + srv.URL + "/api, the address sked answers at (sked serve's has no path)"},
		{[]string{"ls", "--server", srv.URL + "/jobs"}, ExitRefused, "ends with the API's path /jobs, which sked adds itself: give " + srv.URL},
		{[]string{"add", "--type", "t", "--server", srv.URL + "/jobs/"}, ExitRefused, "(405 Method Not Allowed); --server (SKED_SERVER), now " + srv.URL + "/jobs/, ends with the API's path /jobs"},
		{[]string{"show", "ready-one", "--server", failing.URL}, ExitUnreachable, "the database is out of reach (503 Service Unavailable)"},
		{[]string{"show", "nosuchjob", "--server", srv.URL}, ExitRefused, `job "nosuchjob" does not exist: no job has that id or name (404 Not Found)`},
		{[]string{"retry", "ready-one", "--server", srv.URL}, ExitRefused, "only dead jobs can be retried"},
		{[]string{"ls", "--state", "sleeping", "--server", srv.URL}, ExitRefused, `state "sleeping" is not a job state`},
	} {
		code, _, stderr := mainOf(c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("sked %q: exit %d, %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

// TestExitCodes_DatabaseDown: a command whose server cannot reach its
// PostgreSQL exits 3 and says when to try again as a time, not as the
// header the API's clients read ("after Retry-After seconds").
func TestExitCodes_DatabaseDown(t *testing.T) {
	u := postgrestest.URL(t)
	proxy := postgrestest.NewProxy(t, u)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: postgrestest.OpenURL(t, proxy.URL(u))}))
	t.Cleanup(srv.Close)
	proxy.Cut()
	code, _, stderr := mainOf("ls", "--server", srv.URL)
	if code != ExitUnreachable || !strings.Contains(stderr, "cannot be reached") || !strings.Contains(stderr, "retry after 5s") ||
		strings.Contains(stderr, "Retry-After") {
		t.Errorf("sked ls of a server whose database is down: exit %d, %q; want exit %d saying to retry after 5s", code, stderr, ExitUnreachable)
	}
}

// TestExitCodes_Interrupted: a client command whose context ends (Ctrl-C,
// SIGTERM) before the server answers exits 130, not 3: the server was
// not at fault. Its message says, in words and not as Go's "context
// canceled", whether a change may have reached the server, which ones
// were made before, or that none reached it.
func TestExitCodes_Interrupted(t *testing.T) {
	s := sqlitetest.Open(t)
	api := handlers.New(handlers.Config{Store: s})
	arrived := make(chan struct{}, 1)
	// The server hangs on reads of the jobs, on creating one, and on
	// putting the job named "second".
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/jobs" || r.URL.Path == "/jobs/by-name/second" && r.URL.Query().Get("dryRun") == "" {
			_, _ = io.Copy(io.Discard, r.Body) // else a hang-up goes unseen
			select {
			case arrived <- struct{}{}:
			default:
			}
			<-r.Context().Done()
			return
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(hang.Close)
	file := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(file, []byte("- {name: first, type: noop, schedule: '@daily'}\n- {name: second, type: noop, schedule: '@daily'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ls"}, "interrupted before it was done: no change reached " + hang.URL + ", which changed nothing"},
		{[]string{"add", "--type", "noop"}, "interrupted before it was done: POST /jobs was sent to " + hang.URL + " and got no answer, so the server may have made that change or not"},
		{[]string{"apply", "-f", file}, "interrupted before it was done: PUT /jobs/by-name/second was sent to " + hang.URL +
			" and got no answer, so the server may have made that change or not (the 1 change answered before it stays made)"},
	} {
		// Interrupted once the server has the request.
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-arrived:
				cancel()
			case <-ctx.Done():
			}
		}()
		var stdout, stderr strings.Builder
		code := Main(ctx, append(c.args, "--server", hang.URL), Env{Getenv: func(string) string { return "" }, Stdout: &stdout, Stderr: &stderr})
		cancel()
		if code != ExitInterrupted || !strings.Contains(stderr.String(), c.want) || strings.Contains(stderr.String(), "context canceled") {
			t.Errorf("sked %q interrupted: exit %d, %q; want exit %d and %q", c.args, code, stderr.String(), ExitInterrupted, c.want)
		}
	}
}

// TestJSONErrors: a command given --json that fails prints on stdout one
// JSON document, {"error": …}, with the server's problem when it answered,
// what sked says of it and the exit status; stderr says it as without
// --json. A wait that ends otherwise prints what it waited for instead.
func TestJSONErrors(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	type doc struct {
		Error *jsonError `json:"error"`
	}
	read := func(t *testing.T, args ...string) (jsonError, string) {
		t.Helper()
		code, stdout, stderr := mainOf(args...)
		var d doc
		if err := json.Unmarshal([]byte(stdout), &d); err != nil || d.Error == nil {
			t.Fatalf("sked %q: exit %d, stdout %q (%v); want an error document", args, code, stdout, err)
		}
		if d.Error.ExitCode != code || d.Error.Message == "" || !strings.Contains(stderr, "sked: "+d.Error.Message) {
			t.Errorf("sked %q: exit %d, stderr %q; the document's exit code %d and message %q say otherwise", args, code, stderr, d.Error.ExitCode, d.Error.Message)
		}
		return *d.Error, stderr
	}

	e, _ := read(t, "show", "nosuchjob", "--json", "--server", srv.URL)
	if e.Type != "about:blank" || e.Title != "Not Found" || e.Status != 404 || e.Detail != `job "nosuchjob" does not exist: no job has that id or name` || e.ExitCode != ExitRefused {
		t.Errorf("error document of a job that does not exist: %+v", e)
	}
	e, _ = read(t, "add", "--json", "--type", "noop", "--schedule", "every tuesday", "--server", srv.URL)
	if e.Status != 422 || e.Field != "schedule" || e.ExitCode != ExitRefused {
		t.Errorf("error document of a bad schedule: %+v; want 422 naming the field", e)
	}
	e, _ = read(t, "ls", "--json", "--server", refusedAddr(t))
	if e.Status != 0 || !strings.Contains(e.Detail, "connection refused") || e.ExitCode != ExitUnreachable {
		t.Errorf("error document of a server not there: %+v", e)
	}
	e, _ = read(t, "add", "--json", "--type", "noop", "--in", "soon", "--server", srv.URL)
	if !strings.HasPrefix(e.Detail, `--in "soon"`) || e.ExitCode != ExitUsage {
		t.Errorf("error document of a bad flag value: %+v", e)
	}
	// The problem's extension members come through as the server sent
	// them: a 409 on cancelling a job a worker holds carries its state and
	// live run.
	ctx := context.Background()
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "thumb"})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"thumb"}, Max: 1}); err != nil || len(c) != 1 {
		t.Fatalf("claim: %v, %v", c, err)
	}
	code, stdout, _ := mainOf("cancel", j.ID, "--json", "--server", srv.URL)
	var held struct {
		Error struct {
			Status   int    `json:"status"`
			State    string `json:"state"`
			ExitCode int    `json:"exitCode"`
			Run      *struct {
				JobID    string `json:"jobId"`
				WorkerID string `json:"workerId"`
			} `json:"run"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &held); err != nil || code != ExitRefused || held.Error.Status != 409 || held.Error.ExitCode != ExitRefused ||
		held.Error.State != "running" || held.Error.Run == nil || held.Error.Run.JobID != j.ID || held.Error.Run.WorkerID != "w" {
		t.Errorf("sked cancel of a held job --json: exit %d, %s (%v); want a 409 with the job's state and its run", code, stdout, err)
	}
	// Without --json, stdout stays empty.
	if code, stdout, _ := mainOf("show", "nosuchjob", "--server", srv.URL); code != ExitRefused || stdout != "" {
		t.Errorf("sked show nosuchjob: exit %d, stdout %q; want nothing on stdout", code, stdout)
	}
}
