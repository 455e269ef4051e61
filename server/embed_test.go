package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/wire"
	"github.com/sked-dev/sked/worker"
)

// ran records the jobs a Go handler ran.
type ran struct {
	mu  sync.Mutex
	ids map[string]int
}

func (r *ran) handle(ctx context.Context, j *worker.Job) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil {
		r.ids = map[string]int{}
	}
	r.ids[j.ID]++
	return nil
}

func (r *ran) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids[id]
}

func (r *ran) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}

// embed starts a server for cfg with a Go handler of type "greet", and
// runs it until the test ends. Run's error is checked then.
func embed(t *testing.T, cfg server.Config) (*server.Server, *ran) {
	t.Helper()
	s := server.New(cfg)
	r := &ran{}
	s.Handle("greet", r.handle)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if _, _, err := s.Enqueue(context.Background(), wire.JobCreateRequest{Type: "greet"}); !errors.Is(err, server.ErrClosed) {
			t.Errorf("Enqueue after Run returned: %v, want ErrClosed", err)
		}
		if err := s.Run(context.Background()); !errors.Is(err, server.ErrClosed) {
			t.Errorf("Run after Run returned: %v, want ErrClosed", err)
		}
	})
	return s, r
}

// TestServer_Embedded runs sked without a listener of its own, its Handler
// mounted under /sked/ in another program's router: the dashboard and every
// address it uses resolve under the prefix, jobs created through the API and
// with Enqueue run on the Go handler, and Enqueue refuses what POST /jobs
// refuses, with the same error.
func TestServer_Embedded(t *testing.T) {
	unstarted := server.New(server.Config{DB: filepath.Join(t.TempDir(), "sked.db")})
	if _, _, err := unstarted.Enqueue(context.Background(), wire.JobCreateRequest{Type: "greet"}); err == nil {
		t.Error("Enqueue before Start succeeded")
	}
	s, r := embed(t, server.Config{DB: filepath.Join(t.TempDir(), "sked.db")})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the program's own page") })
	mux.Handle("/sked/", http.StripPrefix("/sked", s.Handler()))
	app := httptest.NewServer(mux)
	t.Cleanup(app.Close)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string) (int, http.Header, string) {
		t.Helper()
		res, err := noRedirect.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(b)
	}

	// The bare prefix leads to the page (ServeMux redirects it, or
	// web.Mount does for a router that passes it on), whose addresses stay
	// under it.
	code, h, _ := get(app.URL + "/sked")
	if loc, _ := url.Parse(h.Get("Location")); code/100 != 3 || mustParse(t, app.URL+"/sked").ResolveReference(loc).Path != "/sked/" {
		t.Fatalf("GET /sked: %d to %q, want a redirect to /sked/", code, h.Get("Location"))
	}
	page := app.URL + "/sked/"
	code, _, body := get(page)
	if code != http.StatusOK || !strings.Contains(body, "<title>sked</title>") {
		t.Fatalf("GET /sked/: %d %.80q, want the dashboard", code, body)
	}
	refs := regexp.MustCompile(`(?:href|src)="([^"#]+)"`).FindAllStringSubmatch(body, -1)
	if len(refs) < 2 {
		t.Fatalf("the dashboard refers to %d files, want its script and style sheet at least", len(refs))
	}
	refs = append(refs, []string{"", "jobs?limit=1"}, []string{"", "stats"}) // what the page's script fetches
	for _, m := range refs {
		if strings.HasPrefix(m[1], "data:") {
			continue
		}
		u := mustParse(t, page).ResolveReference(mustParse(t, m[1]))
		if !strings.HasPrefix(u.Path, "/sked/") {
			t.Errorf("the dashboard refers to %q, outside the prefix", m[1])
			continue
		}
		if code, _, b := get(u.String()); code != http.StatusOK {
			t.Errorf("GET %s (%q of the page): %d %.200s", u.Path, m[1], code, b)
		}
	}
	if code, _, body := get(app.URL + "/elsewhere"); code != http.StatusOK || body != "the program's own page" {
		t.Errorf("the program's own route: %d %q", code, body)
	}

	// A job created through the mounted API runs on the Go handler; the
	// answer's Location is under the prefix.
	var j db.Job
	for _, c := range []struct{ method, path string }{{http.MethodPut, "/sked/jobs/by-name/nightly"}, {http.MethodPost, "/sked/jobs"}} {
		req, _ := http.NewRequest(c.method, app.URL+c.path, strings.NewReader(`{"type": "greet"}`))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if c.method == http.MethodPut {
			var put struct{ Job db.Job }
			err = json.Unmarshal(b, &put)
			j = put.Job
		} else {
			err = json.Unmarshal(b, &j)
		}
		if res.StatusCode != http.StatusCreated || err != nil {
			t.Fatalf("%s %s: %d %s", c.method, c.path, res.StatusCode, b)
		}
		if loc := res.Header.Get("Location"); loc != "/sked/jobs/"+j.ID {
			t.Errorf("%s %s: Location %q, want /sked/jobs/%s", c.method, c.path, loc, j.ID)
		}
	}
	waitUntil(t, "the job created through the API to run", func() bool { return r.count(j.ID) == 1 })
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Errorf("Close while Run runs: %v, want a refusal saying to cancel Run's context", err)
	}

	// Enqueue refuses what the API refuses, with the error it answers 422
	// for, and creates nothing.
	for _, req := range []wire.JobCreateRequest{{}, {Type: "exec"}, {Type: "greet", Schedule: "every day"}, {Type: "greet", MaxAttempts: -2}} {
		_, _, err := s.Enqueue(context.Background(), req)
		var ve *db.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, db.ErrInvalid) {
			t.Errorf("Enqueue(%+v): %v, want a *db.ValidationError", req, err)
			continue
		}
		body, _ := json.Marshal(req)
		code, answer := call(t, http.MethodPost, app.URL+"/sked/jobs", string(body))
		var p struct{ Field, Detail string }
		json.Unmarshal([]byte(answer), &p)
		if code != http.StatusUnprocessableEntity || p.Field != ve.Field || !strings.Contains(p.Detail, ve.Msg) {
			t.Errorf("%s: Enqueue refused %s (%s); POST /jobs answered %d %s", body, ve.Field, ve.Msg, code, answer)
		}
	}

	// An enqueued job runs; its idempotency key is honoured as the API's.
	req := wire.JobCreateRequest{Type: "greet", Payload: json.RawMessage(`{"name": "Ada"}`), IdempotencyKey: "order-7"}
	job, created, err := s.Enqueue(context.Background(), req)
	if err != nil || !created || job.MaxAttempts != db.DefaultMaxAttempts || string(job.Payload) != `{"name":"Ada"}` {
		t.Fatalf("Enqueue: %+v created=%v, %v", job, created, err)
	}
	waitUntil(t, "the enqueued job to run", func() bool { return r.count(job.ID) == 1 })
	again, created, err := s.Enqueue(context.Background(), req)
	if err != nil || created || again.ID != job.ID {
		t.Errorf("Enqueue with the same key: %s created=%v, %v; want %s", again.ID, created, err, job.ID)
	}
	waitUntil(t, "the three jobs to have run", func() bool { return r.total() == 3 })
	if _, _, err := s.EnqueueTx(context.Background(), nil, req); err == nil || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Errorf("EnqueueTx on SQLite: %v, want a refusal naming PostgreSQL", err)
	}
}

// TestServer_EnqueueTx enqueues jobs inside transactions of the caller's on
// PostgreSQL: a rolled-back one leaves no job and nothing runs; a committed
// one runs on the Go handler; a refused request leaves the transaction
// usable.
func TestServer_EnqueueTx(t *testing.T) {
	dsn := postgrestest.URL(t)
	s, r := embed(t, server.Config{DB: dsn})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE orders (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}

	enqueue := func(order int, commit bool) db.Job {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES ($1)`, order); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.EnqueueTx(ctx, tx, wire.JobCreateRequest{Type: "greet", Timezone: "Mars/Olympus"}); !errors.Is(err, db.ErrInvalid) {
			t.Fatalf("EnqueueTx of a bad request: %v, want a *db.ValidationError", err)
		}
		j, created, err := s.EnqueueTx(ctx, tx, wire.JobCreateRequest{Type: "greet"})
		if err != nil || !created {
			t.Fatalf("EnqueueTx: %v created=%v", err, created)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return j
	}
	rolledBack := enqueue(1, false)
	committed := enqueue(2, true)
	waitUntil(t, "the committed job to run", func() bool { return r.count(committed.ID) == 1 })
	if r.total() != 1 || r.count(rolledBack.ID) != 0 {
		t.Errorf("the handler ran %d jobs (the rolled-back one %d times), want the committed one only", r.total(), r.count(rolledBack.ID))
	}
	api := httptest.NewServer(s.Handler())
	defer api.Close()
	code, body := call(t, http.MethodGet, api.URL+"/jobs/"+rolledBack.ID, "")
	if code != http.StatusNotFound {
		t.Errorf("GET the job of the rolled-back transaction: %d %s, want 404", code, body)
	}
	var orders int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders); err != nil || orders != 1 {
		t.Errorf("orders: %d, %v; want the committed one", orders, err)
	}

	// A transaction that has ended is refused: the job's statements would
	// commit on their own.
	for _, end := range []func(pgx.Tx) error{
		func(tx pgx.Tx) error { return tx.Commit(ctx) },
		func(tx pgx.Tx) error { return tx.Rollback(ctx) },
		func(tx pgx.Tx) error { _, err := tx.Exec(ctx, "COMMIT"); return err },
	} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := end(tx); err != nil {
			t.Fatal(err)
		}
		if j, _, err := s.EnqueueTx(ctx, tx, wire.JobCreateRequest{Type: "greet"}); !errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("EnqueueTx on an ended transaction: job %q, %v; want pgx.ErrTxClosed", j.ID, err)
		}
	}
	var never *pgxpool.Tx // a typed nil: a transaction never begun
	for _, tx := range []pgx.Tx{nil, never} {
		if _, _, err := s.EnqueueTx(ctx, tx, wire.JobCreateRequest{Type: "greet"}); err == nil || !strings.Contains(err.Error(), "no transaction") {
			t.Errorf("EnqueueTx without a transaction (%T): %v", tx, err)
		}
	}
	// A transaction on another schema (where sked has no tables) is told
	// the rule, not only PostgreSQL's "relation does not exist".
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS elsewhere`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL search_path TO elsewhere`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.EnqueueTx(ctx, tx, wire.JobCreateRequest{Type: "greet"}); err == nil || !strings.Contains(err.Error(), "not on sked's database and schema") {
		t.Errorf("EnqueueTx on another schema: %v", err)
	}
	tx.Rollback(ctx)
	var jobs int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&jobs); err != nil || jobs != 1 {
		t.Errorf("jobs: %d, %v; want the committed one only", jobs, err)
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestServer_StartRefusesConfig: Start refuses, naming the field and the
// fix, a Config the CLI's flags would refuse: a database setting that is
// not a SQLite path nor a postgres:// URL, no worker slot, a lease too short
// to renew, a negative grace, a public URL that is not one, a variable
// name that is not one, job defaults no job may have; and it leaves no
// file and no lock behind.
func TestServer_StartRefusesConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sked.db")
	for _, c := range []struct {
		cfg  server.Config
		want string
	}{
		{server.Config{DB: "host=127.0.0.1 user=sked password=hunter2 dbname=sked"}, "Config.DB reads as a PostgreSQL connection string"},
		{server.Config{DB: "postgress://sked:hunter2@127.0.0.1/sked"}, "Config.DB with a postgress: URL"},
		{server.Config{DB: dir}, "Config.DB " + dir + " is a directory"},
		{server.Config{DB: "postgres:/sked:hunter2@127.0.0.1/sked"}, "Config.DB begins like a PostgreSQL URL but is not one"},
		{server.Config{DB: "postgrse:/sked:hunter2@127.0.0.1/sked"}, "Config.DB …@127.0.0.1/sked: the directory of this path does not exist"},
		{server.Config{DB: ":memory:"}, "Config.DB :memory: is a database in memory"},
		{server.Config{DB: "postgres://sked:hunter2@127.0.0.1:1/sked?pool_max_conns=0"}, "Config.DB: pool_max_conns too small; mend the URL"},
		{server.Config{DB: file, Workers: -1}, "Config.Workers -1: must be at least 1"},
		{server.Config{DB: file, NotifyWorkers: -1}, "Config.NotifyWorkers -1: must be at least 1 (0: the default, 4)"},
		{server.Config{DB: file, Lease: time.Millisecond}, "Config.Lease 1ms: must be from 300ms to 24h0m0s"},
		{server.Config{DB: file, Lease: 25 * time.Hour}, "Config.Lease 25h0m0s: must be from 300ms to 24h0m0s"},
		{server.Config{DB: file, Grace: -time.Second}, "Config.Grace -1s: must be above zero"},
		{server.Config{DB: file, Addr: "nonsense"}, `Config.Addr "nonsense": give a host and a port`}, // it was refused as reaching beyond loopback
		{server.Config{DB: file, Lease: 4 * time.Second, ClaimAhead: 2 * time.Second}, "Config.ClaimAhead 2s: must be at most a quarter of the lease (1s)"},
		{server.Config{DB: file, TestClock: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}, "Config.TestClock 9999-01-01T00:00:00Z is out of range"},
		{server.Config{DB: file, PublicURL: "sked.example.com"}, `Config.PublicURL "sked.example.com": give the dashboard's absolute address`},
		{server.Config{DB: file, ExecEnv: []string{"AWS_PROFILE=prod"}}, `Config.ExecEnv "AWS_PROFILE=prod": give the name of a variable`},
		{server.Config{DB: file, JobDefaults: map[string]db.Defaults{"http": {MaxAttempts: 5000}}}, `Config.JobDefaults["http"]`},
		{server.Config{DB: file, JobDefaults: map[string]db.Defaults{"*": {Backoff: -time.Second}}}, `Config.JobDefaults["*"]`},
		{server.Config{DB: file, JobDefaults: map[string]db.Defaults{"*": {Backoff: 500 * time.Microsecond}}}, "backoff must be 1ms or more"},
	} {
		s := server.New(c.cfg)
		err := s.Start(context.Background())
		if err == nil {
			s.Close()
			t.Errorf("Start(%+v) started", c.cfg)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Start: %v; want %q, without the password", err, c.want)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("refused starts left %v", left)
	}
	if left, _ := filepath.Glob("host=*"); len(left) != 0 {
		t.Errorf("a refused start made %v", left)
	}
}

// TestServer_StartTwiceOnOneFile starts a second server on the SQLite file
// a started one holds: it is refused, saying who holds the file, and once
// the first is closed a third starts.
func TestServer_StartTwiceOnOneFile(t *testing.T) {
	ctx := context.Background()
	cfg := server.Config{DB: filepath.Join(t.TempDir(), "sked.db")}
	first := server.New(cfg)
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Start(ctx); err == nil {
		t.Error("a second Start of one server succeeded")
	}
	if err := server.New(cfg).Start(ctx); err == nil || !strings.Contains(err.Error(), "holds") {
		t.Errorf("Start on a file another server holds: %v, want a refusal naming the holder", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Start(ctx); !errors.Is(err, server.ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
	third := server.New(cfg)
	if err := third.Start(ctx); err != nil {
		t.Fatalf("Start after the holder closed: %v", err)
	}
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestServer_HandleAfterStart checks that a handler registered after Start,
// which the pool would never run, is refused loudly.
func TestServer_HandleAfterStart(t *testing.T) {
	s := server.New(server.Config{DB: filepath.Join(t.TempDir(), "sked.db")})
	s.Handle("early", func(context.Context, *worker.Job) error { return nil })
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "before Start") {
			t.Errorf("Handle after Start: recovered %v, want a panic saying to register before Start", r)
		}
	}()
	s.Handle("late", func(context.Context, *worker.Job) error { return nil })
}

// TestServer_HandleAfterClose: Handle on a server closed before it started
// says so; it said "called after Start".
func TestServer_HandleAfterClose(t *testing.T) {
	s := server.New(server.Config{DB: filepath.Join(t.TempDir(), "sked.db")})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "after Close") {
			t.Errorf("Handle after Close: recovered %v, want a panic saying the server is closed", r)
		}
	}()
	s.Handle("late", func(context.Context, *worker.Job) error { return nil })
}

// TestServer_HandleRefuses: a type no job may have, or a nil handler, whose
// jobs would wait or fail for ever, and a type of sked's own deliveries,
// which would run in the user jobs' slots, are refused loudly.
func TestServer_HandleRefuses(t *testing.T) {
	s := server.New(server.Config{DB: filepath.Join(t.TempDir(), "sked.db")})
	for _, c := range []struct {
		typ  string
		h    worker.HandlerFunc
		want string
	}{
		{"", func(context.Context, *worker.Job) error { return nil }, "not a job type"},
		{"thumb nail", func(context.Context, *worker.Job) error { return nil }, "not a job type"},
		{"thumbnail", nil, "nil): give the function"},
		{notify.TypeHTTP, func(context.Context, *worker.Job) error { return nil }, "sked's own notification deliveries"},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Errorf("Handle(%q, …): recovered %v, want a panic saying %q", c.typ, r, c.want)
				}
			}()
			s.Handle(c.typ, c.h)
		}()
	}
}

// TestServer_Put: a program that declares a recurring job at every start
// puts it by name: the first put creates it, the same put again changes
// nothing, a changed definition changes the job in place, and Enqueue of
// the name is refused.
func TestServer_Put(t *testing.T) {
	s, _ := embed(t, server.Config{DB: filepath.Join(t.TempDir(), "sked.db")})
	ctx := context.Background()
	req := wire.JobCreateRequest{Type: "greet", Schedule: "@every 1h"}
	first, err := s.Put(ctx, "nightly", req)
	if err != nil || !first.Created || first.Job.Name != "nightly" {
		t.Fatalf("first Put: %+v, %v; want nightly created", first, err)
	}
	again, err := s.Put(ctx, "nightly", req)
	if err != nil || again.Changed() || again.Job.ID != first.Job.ID {
		t.Fatalf("the same Put again: %+v, %v; want job %s unchanged", again, err, first.Job.ID)
	}
	req.Schedule = "@every 2h"
	changed, err := s.Put(ctx, "nightly", req)
	if err != nil || changed.Created || changed.Job.ID != first.Job.ID || changed.Job.Schedule != "@every 2h" {
		t.Fatalf("Put of a new schedule: %+v, %v; want job %s at @every 2h", changed, err, first.Job.ID)
	}
	if _, ok := changed.Changes["schedule"]; !ok {
		t.Errorf("Put of a new schedule says changes %v; want schedule among them", changed.Changes)
	}
	if _, _, err := s.Enqueue(ctx, wire.JobCreateRequest{Name: "nightly", Type: "greet", Schedule: "@every 1h"}); !errors.Is(err, db.ErrConflict) {
		t.Errorf("Enqueue of a name in use: %v, want a conflict", err)
	}
	req.Name = "other"
	if _, err := s.Put(ctx, "nightly", req); !errors.Is(err, db.ErrInvalid) {
		t.Errorf("Put with another name in the request: %v, want a *db.ValidationError", err)
	}
}

// TestServer_StartListens: Start listens on Config.Addr, so that an address
// in use fails Start (not Run, after the program went on), opening nothing;
// the server then serves on it, and Close lets it go.
func TestServer_StartListens(t *testing.T) {
	ctx := context.Background()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	if err := server.New(server.Config{DB: filepath.Join(dir, "sked.db"), Addr: taken.Addr().String()}).Start(ctx); err == nil ||
		!strings.Contains(err.Error(), "listen on "+taken.Addr().String()) {
		t.Fatalf("Start on an address in use: %v; want it refused", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the refused Start left %v", left)
	}
	addr := taken.Addr().String()
	taken.Close()
	s := server.New(server.Config{DB: filepath.Join(dir, "sked.db"), Addr: addr})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.Dial("tcp", addr); err != nil {
		t.Errorf("after Start, nothing listens on %s: %v", addr, err)
	} else {
		conn.Close()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("after Close the address is still held: %v", err)
	}
	again.Close()
}
