package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sked-dev/sked/internal/syncbuf"
	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/wire"
	"github.com/sked-dev/sked/worker"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// running is a server under test, on 127.0.0.1 and a temporary SQLite file.
type running struct {
	base string
	stop func() error // cancels Run and returns its error
}

// start runs server.New(cfg) until stop is called (or the test ends), with
// a no-op handler for type "noop".
func start(t *testing.T, cfg server.Config) *running {
	t.Helper()
	return startWith(t, cfg, nil)
}

// startWith is start with the handlers kinds (by type) registered too.
func startWith(t *testing.T, cfg server.Config, kinds map[string]worker.HandlerFunc) *running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = ln
	if cfg.DB == "" {
		cfg.DB = filepath.Join(t.TempDir(), "sked.db")
	}
	s := server.New(cfg)
	s.Handle("noop", func(ctx context.Context, j *worker.Job) error { return nil })
	for typ, h := range kinds {
		s.Handle(typ, h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	r := &running{base: "http://" + ln.Addr().String()}
	var stopped bool
	var runErr error
	r.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() { r.stop() })
	waitUp(t, r.base)
	return r
}

// waitUp polls GET /healthz until it answers 200; it fails after 30 s.
func waitUp(t *testing.T, base string) {
	t.Helper()
	c := &http.Client{Timeout: time.Second}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := c.Get(base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server at %s not healthy: %v", base, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client that sends its request headers a byte at a time (slowloris) is
// cut off by ReadHeaderTimeout: the server closes the connection (with a
// 400, without calling a handler), long before the client would have
// finished.
func TestServer_Slowloris(t *testing.T) {
	const limit = 500 * time.Millisecond
	r := start(t, server.Config{ReadHeaderTimeout: limit})
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(conn) // returns when the server closes
		closed <- b
	}()
	req := "GET /healthz HTTP/1.1\r\nHost: sked\r\n" + strings.Repeat("X-Slow: 1\r\n", 200) + "\r\n"
	begun := time.Now()
	var cutAt time.Duration
	for i := 0; i < len(req); i++ {
		if _, err := conn.Write([]byte{req[i]}); err != nil {
			break // the server closed the connection
		}
		select {
		case b := <-closed:
			// Go answers 400 and closes; the handler never runs.
			if len(b) > 0 && !strings.HasPrefix(string(b), "HTTP/1.1 400 ") {
				t.Fatalf("server answered a request whose headers never ended: %q", b)
			}
			cutAt = time.Since(begun)
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	if cutAt == 0 {
		t.Fatalf("connection still open after the whole request was trickled (%d bytes over %s)", len(req), time.Since(begun))
	}
	t.Logf("slow client cut off after %s (ReadHeaderTimeout %s)", cutAt.Round(time.Millisecond), limit)
}

// Request headers past MaxHeaderBytes are refused with 431 before any
// handler runs: by net/http, in plain text, as docs/api.md says.
func TestServer_MaxHeaderBytes(t *testing.T) {
	r := start(t, server.Config{})
	req, err := http.NewRequest(http.MethodGet, r.base+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("a", 2*server.DefaultMaxHeaderBytes))
	c := &http.Client{}
	defer c.CloseIdleConnections()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("status %d, %s; want 431 in text/plain", res.StatusCode, res.Header.Get("Content-Type"))
	}
	// A request within the limit still works.
	req.Header.Set("X-Big", strings.Repeat("a", server.DefaultMaxHeaderBytes/2))
	if res, err = c.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d for a header within the limit, want 200", res.StatusCode)
	}
}

// Run returns nil after a clean shutdown.
func TestServer_Stop(t *testing.T) {
	r := start(t, server.Config{})
	if err := r.stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after shutdown: %v", err)
	}
}

// TestServer_PrivateTargetRefusedAtCreate: without --allow-private-targets,
// an http job whose URL is a loopback or private address, which the http
// kind would refuse to call, is refused when it is created (422 naming the
// flag) instead of going dead at its first attempt, in the numeric forms
// browsers and C resolvers read too (127.1, 2130706433); a host name is let
// through to be judged when it runs; with the flag, all are created.
func TestServer_PrivateTargetRefusedAtCreate(t *testing.T) {
	t.Parallel()
	job := func(u string) string {
		return `{"type": "http", "payload": {"url": "` + u + `"}, "runAt": "2030-01-01T00:00:00Z"}`
	}
	refused := []string{"http://127.0.0.1:9/hook", "http://localhost:8080/", "https://[::1]/", "http://10.1.2.3/", "http://192.168.1.20:8123/api", "http://[::ffff:169.254.169.254]/",
		"http://127.1/", "http://0x7f.0.0.1/", "http://2130706433/", "http://0251.0376.0251.0376/"}
	strict := start(t, server.Config{})
	for _, u := range refused {
		status, body := call(t, "POST", strict.base+"/jobs", job(u))
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, "--allow-private-targets") || !strings.Contains(body, "payload.url") {
			t.Errorf("POST /jobs with url %s: %d %s; want 422 on payload.url naming --allow-private-targets", u, status, body)
		}
	}
	for _, u := range []string{"https://example.com/hook", "http://nas.home.arpa/hook", "http://93.184.215.14/", "http://1.1/", "http://0x5d.0xb8.0xd7.0x0e/", "http://123.example/"} {
		if status, body := call(t, "POST", strict.base+"/jobs", job(u)); status != http.StatusCreated {
			t.Errorf("POST /jobs with url %s: %d %s; want 201", u, status, body)
		}
	}
	lenient := start(t, server.Config{AllowPrivateTargets: true})
	for _, u := range refused {
		if status, body := call(t, "POST", lenient.base+"/jobs", job(u)); status != http.StatusCreated {
			t.Errorf("with --allow-private-targets, POST /jobs with url %s: %d %s; want 201", u, status, body)
		}
	}
}

// TestServer_PrivateSinkRefusedAtCreate: without --allow-private-targets, a
// job's own notification sink or ping URL at a loopback or private address
// is refused when the job is created (422 on the field, naming the flag),
// since every notification or ping sent there would fail; the server's own
// sinks' origins are trusted, and public ones and email sinks are taken.
// With the flag, all are created.
func TestServer_PrivateSinkRefusedAtCreate(t *testing.T) {
	t.Parallel()
	job := func(notify string) string {
		return `{"type": "noop", "runAt": "2030-01-01T00:00:00Z", "notify": ` + notify + `}`
	}
	own, err := notify.ParseSink("webhook:http://127.0.0.1:9/hooks/ops")
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]string{
		`{"sinks": ["webhook:http://192.168.1.20:8123/hook"]}`:                    "notify.sinks",
		`{"sinks": ["ntfy:http://localhost:2586/alerts"]}`:                        "notify.sinks",
		`{"sinks": ["webhook:https://example.com/h", "slack:http://10.0.0.7/x"]}`: "notify.sinks",
		`{"ping": "http://127.1:8000/ping/abc"}`:                                  "notify.ping",
	}
	taken := []string{
		`{"sinks": ["webhook:https://example.com/h"], "ping": "https://hc-ping.com/5b1c"}`,
		`{"sinks": ["webhook:http://127.0.0.1:9/other-path"]}`, // the server's own sink's origin
		`{"sinks": ["webhook:http://nas.home.arpa/hook"]}`,     // a name: judged when sent
	}
	strict := start(t, server.Config{NotifySinks: []notify.Sink{own}})
	for n, field := range refused {
		status, body := call(t, "POST", strict.base+"/jobs", job(n))
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, "--allow-private-targets") || !strings.Contains(body, `"field":"`+field+`"`) {
			t.Errorf("POST /jobs with notify %s: %d %s; want 422 on %s naming --allow-private-targets", n, status, body, field)
		}
	}
	for _, n := range taken {
		if status, body := call(t, "POST", strict.base+"/jobs", job(n)); status != http.StatusCreated {
			t.Errorf("POST /jobs with notify %s: %d %s; want 201", n, status, body)
		}
	}
	lenient := start(t, server.Config{AllowPrivateTargets: true})
	for n := range refused {
		if status, body := call(t, "POST", lenient.base+"/jobs", job(n)); status != http.StatusCreated {
			t.Errorf("with --allow-private-targets, POST /jobs with notify %s: %d %s; want 201", n, status, body)
		}
	}
}

// TestServer_AuthFailureMetrics: /metrics counts the wrong bearer tokens
// and the requests refused (429) for an address's too many.
func TestServer_AuthFailureMetrics(t *testing.T) {
	t.Parallel()
	r := start(t, server.Config{Tokens: []string{"right"}})
	get := func(token string) (int, string) {
		req, err := http.NewRequest("GET", r.base+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	var status int
	for n := 0; status != http.StatusTooManyRequests; n++ {
		if n > 1000 {
			t.Fatalf("1000 wrong tokens from one address, and none refused 429")
		}
		status, _ = get("guess")
	}
	// The right token, from the same address, waits out the limit too: one
	// guess grows back each few seconds.
	var body string
	waitUntil(t, "the right token served once the address may try again", func() bool {
		status, body = get("right")
		return status == http.StatusOK
	})
	for _, name := range []string{"sked_auth_failures_total", "sked_auth_refused_total"} {
		if !regexp.MustCompile(`(?m)^` + name + ` [1-9]`).MatchString(body) {
			t.Errorf("/metrics has no %s above 0:\n%s", name, body)
		}
	}
}

// TestServer_BuiltinTypesNotClaimed: a remote worker cannot claim the types
// sked serve runs itself (an http job's headers, an exec job's env, a
// delivery's sink are the server's to use); its own types it can.
func TestServer_BuiltinTypesNotClaimed(t *testing.T) {
	t.Parallel()
	r := start(t, server.Config{})
	for _, typ := range []string{"http", "email", "exec", notify.TypeHTTP, notify.TypeEmail} {
		status, body := call(t, "POST", r.base+"/claims", `{"workerId": "w", "types": ["thumbnail", "`+typ+`"], "wait": "0s"}`)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, `type \"`+typ+`\" is run by this server's own pools`) {
			t.Errorf("claim of type %s: %d %s; want 422 saying sked serve runs it", typ, status, body)
		}
	}
	if status, body := call(t, "POST", r.base+"/claims", `{"workerId": "w", "types": ["thumbnail"], "wait": "0s"}`); status != http.StatusOK {
		t.Errorf("claim of a type of its own: %d %s; want 200", status, body)
	}
}

// TestServer_HandledTypesNotClaimed: a type the embedding program runs
// with a Go handler is this server's own too: a remote worker's claim of
// it is refused, and the job is left to the handler (Run is not called,
// so that no pool takes it first).
func TestServer_HandledTypesNotClaimed(t *testing.T) {
	t.Parallel()
	s := server.New(server.Config{DB: filepath.Join(t.TempDir(), "sked.db")})
	s.Handle("greet", func(context.Context, *worker.Job) error { return nil })
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	api := httptest.NewServer(s.Handler())
	t.Cleanup(api.Close)
	j, _, err := s.Enqueue(context.Background(), wire.JobCreateRequest{Type: "greet"})
	if err != nil {
		t.Fatal(err)
	}
	status, body := call(t, "POST", api.URL+"/claims", `{"workerId": "w", "types": ["greet"], "wait": "0s"}`)
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, `type \"greet\" is run by this server's own pools`) {
		t.Errorf("remote claim of a type with a Go handler: %d %s; want 422 saying this server runs it", status, body)
	}
	if _, body := call(t, "GET", api.URL+"/jobs/"+j.ID, ""); !strings.Contains(body, `"state":"ready"`) {
		t.Errorf("the job after the refused claim: %s; want it ready, for the Go handler", body)
	}
}

// TestServer_ClaimWaitMetrics: /metrics tells how many remote workers'
// claims wait and how many were refused for --max-claim-waits.
func TestServer_ClaimWaitMetrics(t *testing.T) {
	t.Parallel()
	r := start(t, server.Config{MaxClaimWaits: 1})
	metric := func(name string) string {
		_, body := call(t, "GET", r.base+"/metrics", "")
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				return v
			}
		}
		return "absent"
	}
	if w, n := metric("sked_claims_waiting"), metric("sked_claims_refused_total"); w != "0" || n != "0" {
		t.Fatalf("before any claim: waiting %s, refused %s; want 0 and 0", w, n)
	}
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	req, err := http.NewRequestWithContext(ctx, "POST", r.base+"/claims", strings.NewReader(`{"workerId": "w1", "types": ["remote"], "wait": "50s"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	go func() {
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	waitUntil(t, "sked_claims_waiting 1 with one claim waiting", func() bool { return metric("sked_claims_waiting") == "1" })
	if status, body := call(t, "POST", r.base+"/claims", `{"workerId": "w2", "types": ["remote"], "wait": "50s"}`); status != http.StatusServiceUnavailable {
		t.Fatalf("a second waiting claim past --max-claim-waits 1: %d %s; want 503", status, body)
	}
	if n := metric("sked_claims_refused_total"); n != "1" {
		t.Errorf("sked_claims_refused_total = %s after one refusal; want 1", n)
	}
}

// TestServer_WarnsOfWaitingDisabledJobs: started without --enable-exec on a
// database that holds exec jobs, sked serve says at start that they wait
// and why; without such jobs it says nothing of them. It logs that it
// created a new database, and nothing of a current one.
func TestServer_WarnsOfWaitingDisabledJobs(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "sked.db")
	startLogged := func(exec bool) string {
		var logs syncbuf.Buffer
		r := start(t, server.Config{DB: dbPath, EnableExec: exec, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if exec {
			job := `{"type": "exec", "schedule": "0 3 * * *", "payload": {"command": ["true"]}}`
			if status, body := call(t, "POST", r.base+"/jobs", job); status != http.StatusCreated {
				t.Fatalf("POST /jobs: %d %s", status, body)
			}
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		return logs.String()
	}
	const warning = "jobs of a type this server does not run are waiting"
	if logs := startLogged(true); strings.Contains(logs, warning) || !strings.Contains(logs, `msg="created the database's schema"`) {
		t.Errorf("with exec on, on a new database, the log says:\n%s\nwant no warning, and that it created the database", logs)
	}
	logs := startLogged(false)
	if !strings.Contains(logs, warning) || !strings.Contains(logs, "type=exec") || !strings.Contains(logs, "--enable-exec") {
		t.Errorf("with exec off and an exec job waiting, the log says:\n%s\nwant a warning naming exec and --enable-exec", logs)
	}
	if strings.Contains(logs, "created the database's schema") || strings.Contains(logs, "migrated") {
		t.Errorf("on a current database the log says it created or migrated it:\n%s", logs)
	}
}
