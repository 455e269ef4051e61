package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/internal/syncbuf"
	"github.com/sked-dev/sked/internal/testnet"
	"github.com/sked-dev/sked/server"
)

// TestOpenStore_PostgresSetupMistakes opens PostgreSQL databases that a
// first setup gets wrong: each refusal says what is wrong and what to do,
// in one line, not pgx's "read current schema: failed to connect to …"
// over several.
func TestOpenStore_PostgresSetupMistakes(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nothing := ln.Addr().String()
	ln.Close()
	check := func(dsn string, want ...string) {
		t.Helper()
		s, err := server.OpenStore(ctx, dsn, -1, nil)
		if err == nil {
			s.Close()
			t.Fatalf("OpenStore(%s) opened it", dsn)
		}
		for _, w := range want {
			if msg := err.Error(); !strings.Contains(msg, w) || strings.Contains(msg, "\n") {
				t.Errorf("OpenStore(%s) = %q; want one line with %q", dsn, msg, w)
			}
		}
	}
	check("postgres://sked@"+nothing+"/sked?connect_timeout=5",
		"cannot connect to PostgreSQL at postgres://sked@"+nothing+"/sked", "connection refused; check that it runs there")

	base, err := url.Parse(postgrestest.ServerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	with := func(user, password, dbname string) string {
		u := *base
		u.User, u.Path = url.UserPassword(user, password), "/"+dbname
		if dbname == "" {
			u.Path = base.Path
		}
		return u.String()
	}
	check(with(base.User.Username(), "", "sked_no_such_database"), `database "sked_no_such_database" does not exist: create it, owned by sked's role`)
	check(with("sked_no_such_role", "x", ""), `the server refused the login`, "check the user and password in --db")
	noSchema := *base
	q := noSchema.Query()
	q.Set("search_path", "sked_no_such_schema")
	noSchema.RawQuery = q.Encode()
	check(noSchema.String(), "the search_path (sked_no_such_schema) names no existing schema", "fix search_path in the URL")
	misspelt := *base
	q = misspelt.Query()
	q.Set("sslmod", "disable")
	misspelt.RawQuery = q.Encode()
	check(misspelt.String(), `the server does not know a parameter of --db (unrecognized configuration parameter "sslmod")`, "check the names after ? in --db")

	// An @ of a password not percent-encoded ends the user name and
	// password early, and the rest is taken for the host.
	atTwice := "postgres://sked:p@ss@" + nothing + "/sked?connect_timeout=5"
	check(atTwice, "the host name read from --db holds an @", "@ as %40")
	if _, err := server.OpenStore(ctx, atTwice, -1, nil); strings.Contains(err.Error(), "ss@") {
		t.Errorf("the refusal of a password with @ shows part of it: %v", err)
	}
	// A port where something else answers, such as an HTTP server.
	check("postgres://sked@"+testnet.Answering(t, "HTTP/1.1 400 Bad Request\r\n\r\n")+"/sked?connect_timeout=5",
		"what answers there is not PostgreSQL", "check the host and port in --db")
	// TLS asked of a server without it.
	if !serverOffersTLS(t, base.String()) {
		u := *base
		q := u.Query()
		q.Set("sslmode", "require")
		u.RawQuery = q.Encode()
		check(u.String(), "what answers there refused TLS, which sslmode=require asks for", "check the host and port", "sslmode=disable")
	}

	// A role that does not own the database may not create tables in its
	// public schema (PostgreSQL 15 and later).
	conn, err := pgx.Connect(ctx, base.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	role := fmt.Sprintf("sked_test_guest_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD 'guest'"); err != nil {
		t.Fatal(err)
	}
	defer func() { // before conn closes
		if _, err := conn.Exec(context.Background(), "DROP ROLE "+role); err != nil {
			t.Errorf("drop the test role: %v", err)
		}
	}()
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 150000 {
		t.Skipf("PostgreSQL %d lets every role create tables in public", version)
	}
	check(with(role, "guest", ""), "sked's role may not create its tables (permission denied for schema public): make the role the database's owner")
}

// TestOpenStore_WaitsForPostgres: a node started before its PostgreSQL
// server (as containers started together are) tries again, saying so in
// its log, and opens the database once the server answers; a mistake that
// waiting cannot mend, a refused login, fails at its first try.
func TestOpenStore_WaitsForPostgres(t *testing.T) {
	t.Parallel()
	realURL := postgrestest.URL(t)
	real, err := url.Parse(realURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := postgrestest.NewProxy(t, realURL)
	dsn := proxy.URL(realURL)
	proxy.Cut() // nothing listens there until the server "starts"
	var log syncbuf.Buffer
	opened := make(chan error, 1)
	go func() {
		s, err := server.OpenStore(t.Context(), dsn, time.Minute, slog.New(slog.NewTextHandler(&log, nil)))
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	time.Sleep(time.Second)
	proxy.Restore()
	if err := <-opened; err != nil {
		t.Fatalf("OpenStore of a server that answers a second late: %v\nlog:\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "PostgreSQL does not answer yet; trying again") || !strings.Contains(log.String(), "connection refused") {
		t.Errorf("the wait was not logged with its cause:\n%s", log.String())
	}

	var refused syncbuf.Buffer
	wrong := *real
	wrong.User = url.UserPassword("sked_no_such_role", "x")
	if _, err := server.OpenStore(t.Context(), wrong.String(), time.Minute, slog.New(slog.NewTextHandler(&refused, nil))); err == nil ||
		!strings.Contains(err.Error(), "the server refused the login") {
		t.Errorf("OpenStore with a wrong login = %v; want the refusal", err)
	}
	if strings.Contains(refused.String(), "trying again") {
		t.Errorf("a refused login was tried again:\n%s", refused.String())
	}
}

// TestOpenStore_WrongPlaceIsNotWaitedFor: a URL that reaches something
// other than the PostgreSQL it means (an HTTP port, a server without the
// TLS that sslmode=require asks for) fails at its first try, as a refused
// login does, however long --db-wait is: waiting cannot mend it.
func TestOpenStore_WrongPlaceIsNotWaitedFor(t *testing.T) {
	t.Parallel()
	base, err := url.Parse(postgrestest.ServerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	dsns := map[string]string{
		"HTTP": "postgres://sked@" + testnet.Answering(t, "HTTP/1.1 400 Bad Request\r\n\r\n") + "/sked?connect_timeout=5",
	}
	if !serverOffersTLS(t, base.String()) {
		u := *base
		q := u.Query()
		q.Set("sslmode", "require")
		u.RawQuery = q.Encode()
		dsns["TLSRefused"] = u.String()
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			var log syncbuf.Buffer
			s, err := server.OpenStore(t.Context(), dsn, 20*time.Second, slog.New(slog.NewTextHandler(&log, nil)))
			if err == nil {
				s.Close()
				t.Fatal("opened it")
			}
			if strings.Contains(log.String(), "trying again") || strings.Contains(err.Error(), "gave up after") {
				t.Errorf("tried again: %v\nlog:\n%s", err, log.String())
			}
		})
	}
}

// TestOpenStore_WrongPlaceAmongHostsIsWaitedFor: a URL naming several
// hosts, one where something else than PostgreSQL answers and one where
// nothing listens yet, is a server to wait for, not a mistake to stop at:
// the node tries again and opens the database once the second host
// answers.
func TestOpenStore_WrongPlaceAmongHostsIsWaitedFor(t *testing.T) {
	t.Parallel()
	realURL := postgrestest.URL(t)
	proxy := postgrestest.NewProxy(t, realURL)
	u, err := url.Parse(proxy.URL(realURL))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = testnet.Answering(t, "HTTP/1.1 400 Bad Request\r\n\r\n") + "," + u.Host
	proxy.Cut() // nothing listens at the second host until it "starts"
	var log syncbuf.Buffer
	starts := &logWatch{w: &log, line: "trying again", then: proxy.Restore}
	s, err := server.OpenStore(t.Context(), u.String(), time.Minute, slog.New(slog.NewTextHandler(starts, nil)))
	if err != nil {
		t.Fatalf("OpenStore of %s: %v\nlog:\n%s", u.Redacted(), err, log.String())
	}
	s.Close()
}

// TestOpenStore_ConnectTimeoutIsWaitedFor: a server that accepts the
// connection and does not answer within the URL's connect_timeout (one
// that hangs, or is still starting behind a proxy) is not reached yet, so
// it is tried again for --db-wait, as one not listening is.
func TestOpenStore_ConnectTimeoutIsWaitedFor(t *testing.T) {
	t.Parallel()
	dsn := "postgres://sked@" + testnet.Silent(t) + "/sked?connect_timeout=1"
	// A wait shorter than the first try: it gives up after that try
	// when it would try again, and stops there when it would not.
	s, err := server.OpenStore(t.Context(), dsn, time.Millisecond, nil)
	if err == nil {
		s.Close()
		t.Fatal("opened it")
	}
	if msg := err.Error(); !strings.Contains(msg, "no answer within connect_timeout") || !strings.Contains(msg, "gave up after") {
		t.Errorf("OpenStore with no answer within connect_timeout = %q; want it said, after trying for --db-wait", msg)
	}
}

// logWatch passes what is written to w and calls then once, when a write
// holds line.
type logWatch struct {
	w    io.Writer
	line string
	then func()
	once sync.Once
}

func (l *logWatch) Write(p []byte) (int, error) {
	if strings.Contains(string(p), l.line) {
		l.once.Do(l.then)
	}
	return l.w.Write(p)
}

// serverOffersTLS reports whether the PostgreSQL server at dsn has ssl on.
func serverOffersTLS(t *testing.T, dsn string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var on string
	if err := conn.QueryRow(t.Context(), "SHOW ssl").Scan(&on); err != nil {
		t.Fatal(err)
	}
	return on == "on"
}

// TestServer_PostgresPoolOfOne: a node whose pool holds one connection
// (pool_max_conns=1) migrates, starts and runs jobs: the migration lock is
// held outside the pool, and no work holds the connection while it waits
// for another.
func TestServer_PostgresPoolOfOne(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(postgrestest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	r := start(t, server.Config{DB: u.String()})
	var ids []string
	for range 20 {
		status, body := call(t, "POST", r.base+"/jobs", `{"type": "noop"}`)
		var j db.Job
		if err := json.Unmarshal([]byte(body), &j); status != http.StatusCreated || err != nil {
			t.Fatalf("POST /jobs: %d %s", status, body)
		}
		ids = append(ids, j.ID)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			_, body := call(t, "GET", r.base+"/jobs/"+id, "")
			if strings.Contains(body, `"state":"done"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s not done after 30 s: %s", id, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := r.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
