package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/pressly/goose/v3"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/internal/syncbuf"
	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/worker"
)

// receiver is a notification receiver on loopback that records the paths
// it was sent and, until released, hangs on every request: a sink whose
// server accepts connections and never answers.
type receiver struct {
	*httptest.Server
	release func()

	mu       sync.Mutex
	paths    []string
	inFlight int
	most     int // the most requests in flight at once
}

// newReceiver starts a receiver that hangs when hang is set, and answers
// 200 at once otherwise; it is released and closed when the test ends.
func newReceiver(t *testing.T, hang bool) *receiver {
	t.Helper()
	released := make(chan struct{})
	r := &receiver{release: sync.OnceFunc(func() { close(released) })}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.paths = append(r.paths, req.URL.Path)
		r.inFlight++
		r.most = max(r.most, r.inFlight)
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.inFlight--
			r.mu.Unlock()
		}()
		if hang {
			select {
			case <-released:
			case <-req.Context().Done():
			}
		}
	}))
	t.Cleanup(r.Close)
	t.Cleanup(r.release) // first: a hanging request holds Close
	return r
}

// state returns the paths sent so far, and the requests in flight now and
// at most.
func (r *receiver) state() (paths []string, inFlight, most int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...), r.inFlight, r.most
}

// createJob creates a job through the API and returns its id.
func createJob(t *testing.T, base, body string) string {
	t.Helper()
	status, resp := call(t, "POST", base+"/jobs", body)
	if status != http.StatusCreated {
		t.Fatalf("POST /jobs %s: %d %s", body, status, resp)
	}
	var job struct{ JobID string }
	if err := json.Unmarshal([]byte(resp), &job); err != nil {
		t.Fatal(err)
	}
	return job.JobID
}

// listJobs returns the jobs of type typ the API lists (at most 500).
func listJobs(t *testing.T, base, typ string) []db.Job {
	t.Helper()
	status, body := call(t, "GET", base+"/jobs?limit=500&type="+typ, "")
	if status != http.StatusOK {
		t.Fatalf("GET /jobs?type=%s: %d %s", typ, status, body)
	}
	var page struct{ Jobs []db.Job }
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	return page.Jobs
}

// jobState returns the state of job id.
func jobState(t *testing.T, base, id string) db.JobState {
	t.Helper()
	status, body := call(t, "GET", base+"/jobs/"+id, "")
	if status != http.StatusOK {
		t.Fatalf("GET /jobs/%s: %d %s", id, status, body)
	}
	var j db.Job
	if err := json.Unmarshal([]byte(body), &j); err != nil {
		t.Fatal(err)
	}
	return j.State
}

// TestServer_HangingReceiverHoldsOnlyDeliverySlots: notifications to a
// receiver that never answers wait in the deliveries' own slots, as many
// at once as --notify-workers, while the user jobs created after them run
// in theirs. Before deliveries had slots of their own, the hanging
// deliveries held every worker slot until their 30 s timeout, and the
// user jobs waited behind them.
func TestServer_HangingReceiverHoldsOnlyDeliverySlots(t *testing.T) {
	t.Parallel()
	hook := newReceiver(t, true)
	sink, err := notify.ParseSink("webhook:" + hook.URL + "/hook")
	if err != nil {
		t.Fatal(err)
	}
	fail := func(context.Context, *worker.Job) error { return worker.Permanent(fmt.Errorf("boom")) }
	r := startWith(t, server.Config{Workers: 2, NotifyWorkers: 2, Grace: time.Second, NotifySinks: []notify.Sink{sink}},
		map[string]worker.HandlerFunc{"fail": fail})

	// Six jobs go dead: six job_dead notifications to the hanging receiver.
	const dead = 6
	for range dead {
		createJob(t, r.base, `{"type": "fail", "maxAttempts": 1}`)
	}
	waitUntil(t, "the delivery slots to fill", func() bool { _, n, _ := hook.state(); return n == 2 })

	var ids []string
	for range 4 {
		ids = append(ids, createJob(t, r.base, `{"type": "noop"}`))
	}
	waitUntil(t, "the user jobs to run", func() bool {
		for _, id := range ids {
			if jobState(t, r.base, id) != db.StateDone {
				return false
			}
		}
		return true
	})
	waitUntil(t, "the notifications of the dead jobs to be enqueued", func() bool { return len(listJobs(t, r.base, notify.TypeHTTP)) == dead })

	paths, inFlight, most := hook.state()
	if len(paths) != 2 || inFlight != 2 || most != 2 {
		t.Errorf("receiver was sent %v, %d in flight, at most %d at once; want the 2 delivery slots' requests, still hanging", paths, inFlight, most)
	}
	running, ready := 0, 0
	for _, j := range listJobs(t, r.base, notify.TypeHTTP) {
		switch j.State {
		case db.StateRunning:
			running++
		case db.StateReady:
			ready++
		}
		if want := map[db.JobState]int{db.StateRunning: 1}[j.State]; j.Attempt != want {
			t.Errorf("delivery %s is %s at attempt %d, want %d: an attempt ended while the user jobs ran", j.ID, j.State, j.Attempt, want)
		}
	}
	if running != 2 || ready != dead-2 {
		t.Errorf("deliveries: %d running, %d ready; want 2 running (the delivery slots) and %d waiting for them", running, ready, dead-2)
	}
}

// TestServer_DeliveriesGoOutWhileUserSlotsAreBusy: with every worker slot
// held by a long job, and more user jobs waiting for one, the pings that
// say the long jobs started still go out, in the deliveries' own slots.
// Before, they waited for a worker slot that none of the long jobs gave
// back.
func TestServer_DeliveriesGoOutWhileUserSlotsAreBusy(t *testing.T) {
	t.Parallel()
	hc := newReceiver(t, false)
	release := make(chan struct{})
	defer close(release)
	var mu sync.Mutex
	started := map[string]bool{}
	long := func(ctx context.Context, j *worker.Job) error {
		mu.Lock()
		started[j.ID] = true
		mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	r := startWith(t, server.Config{Workers: 2, AllowPrivateTargets: true, Grace: time.Second}, map[string]worker.HandlerFunc{"long": long})

	ids := map[string]string{} // path of its check by job id
	for i := range 4 {
		check := fmt.Sprintf("/check/%d", i)
		ids[createJob(t, r.base, `{"type": "long", "notify": {"on": ["none"], "ping": "`+hc.URL+check+`"}}`)] = check
	}
	waitUntil(t, "two long jobs to start", func() bool { mu.Lock(); defer mu.Unlock(); return len(started) == 2 })
	mu.Lock()
	var want []string
	for id := range started {
		want = append(want, ids[id]+"/start")
	}
	mu.Unlock()
	waitUntil(t, "the start pings of the running long jobs", func() bool {
		paths, _, _ := hc.state()
		for _, w := range want {
			if !strings.Contains(strings.Join(paths, " "), w) {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	if len(started) != 2 {
		t.Errorf("%d long jobs started; want 2, the worker slots, still running", len(started))
	}
}

// TestServer_DeliversAfterUpgrade: the deliveries that a database written
// before deliveries had types of their own holds (http jobs keyed notify:
// or ping:) are given their types by the upgrade and delivered, on SQLite
// and on PostgreSQL; a user's http job keeps its type.
func TestServer_DeliversAfterUpgrade(t *testing.T) {
	t.Parallel()
	// before is each store's schema version before the migration that
	// gives deliveries their types.
	type schema struct {
		dsn                func(t testing.TB) string
		driver, migrations string
		dialect            goose.Dialect
		before             int64
	}
	for name, sc := range map[string]schema{
		"sqlite":   {func(t testing.TB) string { return filepath.Join(t.TempDir(), "sked.db") }, "sqlite", "../db/sqlite/migrations", goose.DialectSQLite3, 11},
		"postgres": {postgrestest.URL, "pgx", "../db/postgres/migrations", goose.DialectPostgres, 13},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := sc.dsn(t)
			hook := newReceiver(t, false)
			ctx := context.Background()
			store, err := server.OpenStore(ctx, dsn, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			for key, path := range map[string]string{"notify:abc:job_dead:1": "/notification", "ping:success:j1:1": "/ping", "": "/user"} {
				payload, _ := json.Marshal(map[string]string{"url": hook.URL + path, "method": "POST"})
				if _, _, err := store.JobCreate(ctx, db.JobCreateParams{Type: "http", Payload: payload, IdempotencyKey: key, MaxAttempts: 1}); err != nil {
					t.Fatal(err)
				}
			}
			if err := store.Close(); err != nil {
				t.Fatal(err)
			}
			// Back to the schema before delivery types, through the
			// migrations' own down steps: the rows above are as that
			// version wrote them.
			conn, err := sql.Open(sc.driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			migrations, err := goose.NewProvider(sc.dialect, conn, os.DirFS(sc.migrations))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := migrations.DownTo(ctx, sc.before); err != nil {
				t.Fatalf("migrate down to %d: %v", sc.before, err)
			}
			conn.Close()

			r := start(t, server.Config{DB: dsn, AllowPrivateTargets: true})
			waitUntil(t, "the three jobs to be sent", func() bool { paths, _, _ := hook.state(); return len(paths) == 3 })
			types := map[string]string{}
			for _, typ := range []string{"http", notify.TypeHTTP} {
				for _, j := range listJobs(t, r.base, typ) {
					types[j.IdempotencyKey] = j.Type
				}
			}
			if want := map[string]string{"notify:abc:job_dead:1": notify.TypeHTTP, "ping:success:j1:1": notify.TypeHTTP, "": "http"}; fmt.Sprint(types) != fmt.Sprint(want) {
				t.Errorf("types by key after the upgrade: %v, want %v", types, want)
			}
		})
	}
}

// TestServer_DeliveryTypesRefusedAtCreate: the deliveries' types are
// sked's own; a client that creates a job of one is told what to use.
func TestServer_DeliveryTypesRefusedAtCreate(t *testing.T) {
	t.Parallel()
	r := start(t, server.Config{})
	for _, typ := range notify.Types() {
		status, body := call(t, "POST", r.base+"/jobs", `{"type": "`+typ+`", "payload": {"url": "https://example.com"}}`)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, "sked's own notification and ping deliveries") || !strings.Contains(body, "type http") {
			t.Errorf("POST /jobs of type %s: %d %s; want 422 saying what to use", typ, status, body)
		}
	}
}

// TestServer_WarnsOfWaitingEmailDeliveries: started without an SMTP sink on
// a database that holds email notifications still to deliver (the sink
// was dropped from --notify), sked serve says at start that they wait and
// why, as it does for email jobs.
func TestServer_WarnsOfWaitingEmailDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "sked.db")
	store, err := server.OpenStore(ctx, dbPath, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	payload := `{"sink": "smtp://alerts:xxxxx@mail.example.com:587?to=ops@example.com", "subject": "job_dead", "body": "…"}`
	if _, _, err := store.JobCreate(ctx, db.JobCreateParams{Type: notify.TypeEmail, Payload: json.RawMessage(payload), IdempotencyKey: "notify:abc:job_dead:1", MaxAttempts: 8}); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	r := start(t, server.Config{DB: dbPath, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); !strings.Contains(out, "jobs of a type this server does not run are waiting") || !strings.Contains(out, "type="+notify.TypeEmail) ||
		!strings.Contains(out, "--notify smtp://") {
		t.Errorf("the log says:\n%s\nwant a warning that notify.email jobs wait for an SMTP sink", out)
	}
}
