package cli

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/spf13/cobra"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/handlers"
	"github.com/sked-dev/sked/server"
)

// parseServe runs `sked serve args` with the environment env up to the
// point where it would start, and returns the flags it would start with.
func parseServe(t *testing.T, args []string, env map[string]string) (*serveFlags, error) {
	t.Helper()
	e := Env{Getenv: func(k string) string { return env[k] }, Stdout: io.Discard, Stderr: io.Discard}
	var got *serveFlags
	root := bareRoot(e)
	root.AddCommand(serveCommand(e, func(_ *cobra.Command, s *serveFlags) error { got = s; return nil }))
	err := execute(context.Background(), root, append([]string{"serve"}, args...))
	return got, err
}

func TestServeFlags_Env(t *testing.T) {
	s, err := parseServe(t, nil, map[string]string{"SKED_WORKERS": "3", "SKED_ENABLE_EXEC": "true", "SKED_LEASE": "10s"})
	if err != nil || s.cfg.Workers != 3 || s.cfg.NotifyWorkers != server.DefaultNotifyWorkers || !s.cfg.EnableExec || s.cfg.Lease != 10*time.Second || s.cfg.Addr != "127.0.0.1:8080" || s.cfg.DB != "sked.db" {
		t.Fatalf("config from env = %+v, %v", s, err)
	}
	// Flags win over the environment; a bool takes its value as the next
	// argument too.
	s, err = parseServe(t, []string{"--enable-exec", "false", "--workers", "5", "--notify-workers", "2", "-lease=2s"},
		map[string]string{"SKED_WORKERS": "3", "SKED_NOTIFY_WORKERS": "7", "SKED_ENABLE_EXEC": "true"})
	if err != nil || s.cfg.Workers != 5 || s.cfg.NotifyWorkers != 2 || s.cfg.EnableExec || s.cfg.Lease != 2*time.Second {
		t.Fatalf("flags over env = %+v, %v", s.cfg, err)
	}
	s, err = parseServe(t, []string{"--test-clock", "2026-03-08T06:00:00Z", "--enable-exec"}, nil)
	if err != nil || !s.cfg.TestClock.Equal(time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC)) || !s.cfg.EnableExec {
		t.Fatalf("--test-clock TIME: %v, %v", s.cfg.TestClock, err)
	}
	if s, err = parseServe(t, []string{"--test-clock"}, nil); err != nil || s.cfg.TestClock.IsZero() {
		t.Fatalf("bare --test-clock: %v, %v", s.cfg.TestClock, err)
	}
	s, err = parseServe(t, []string{"--retention", "0", "--claim-ahead", "0", "--exec-env", "A", "--exec-env", "B"}, map[string]string{"SKED_EXEC_ENV": "C,D"})
	if err != nil || s.cfg.Retention != -1 || s.cfg.ClaimAhead != -1 || strings.Join(s.cfg.ExecEnv, " ") != "A B" {
		t.Fatalf("retention, claim-ahead 0, exec-env: %+v, %v", s.cfg, err)
	}
	// A short --lease lowers the default --claim-ahead to a quarter of it;
	// one given is checked against it.
	if s, err = parseServe(t, []string{"--lease", "500ms"}, nil); err != nil || s.cfg.ClaimAhead != 125*time.Millisecond {
		t.Fatalf("--lease 500ms: claim-ahead %v, %v", s, err)
	}
	if _, err = parseServe(t, []string{"--lease", "500ms"}, map[string]string{"SKED_CLAIM_AHEAD": "250ms"}); !strings.Contains(fmt.Sprint(err), "--claim-ahead 250ms (from SKED_CLAIM_AHEAD): must be between 0 and a quarter of --lease (125ms)") {
		t.Fatalf("--lease 500ms, SKED_CLAIM_AHEAD=250ms: %v", err)
	}
	if _, err = parseServe(t, []string{"--lease", "100ms"}, nil); strings.Contains(fmt.Sprint(err), "--claim-ahead") {
		t.Fatalf("--lease 100ms said more than the lease: %v", err)
	}
	if s, err = parseServe(t, nil, map[string]string{"SKED_EXEC_ENV": "C,D"}); err != nil || strings.Join(s.cfg.ExecEnv, " ") != "C D" {
		t.Fatalf("SKED_EXEC_ENV: %q, %v", s.cfg.ExecEnv, err)
	}
	s, err = parseServe(t, []string{"--default-max-attempts", "7"}, map[string]string{"SKED_JOB_DEFAULTS": "http=3/5s"})
	if err != nil || s.cfg.JobDefaults["*"].MaxAttempts != 7 || s.cfg.JobDefaults["http"].MaxAttempts != 3 {
		t.Fatalf("job defaults: %+v, %v", s.cfg.JobDefaults, err)
	}
	s, err = parseServe(t, []string{"--default-max-attempts", "1"}, map[string]string{"SKED_DEFAULT_BACKOFF": "2s"})
	if err != nil || s.cfg.JobDefaults["*"] != (db.Defaults{MaxAttempts: 1, Backoff: 2 * time.Second}) {
		t.Fatalf("--default-max-attempts 1, SKED_DEFAULT_BACKOFF=2s: %+v, %v", s.cfg.JobDefaults, err)
	}
	// Refused values name their flag alone, not --job-defaults too.
	_, err = parseServe(t, nil, map[string]string{"SKED_DEFAULT_MAX_ATTEMPTS": "0", "SKED_DEFAULT_BACKOFF": "-1s"})
	if msg := fmt.Sprint(err); ExitCode(err) != 2 || !strings.Contains(msg, "--default-max-attempts 0 (from SKED_DEFAULT_MAX_ATTEMPTS): must be at least 1") ||
		!strings.Contains(msg, "--default-backoff -1s (from SKED_DEFAULT_BACKOFF): must be above zero") || strings.Contains(msg, "--job-defaults") {
		t.Fatalf("SKED_DEFAULT_MAX_ATTEMPTS=0, SKED_DEFAULT_BACKOFF=-1s: %v", err)
	}
	if s, err = parseServe(t, nil, nil); err != nil || s.cfg.MaxClaimWaits != handlers.DefaultMaxClaimWaits {
		t.Fatalf("default --max-claim-waits: %d, %v", s.cfg.MaxClaimWaits, err)
	}
	if s, err = parseServe(t, nil, map[string]string{"SKED_MAX_CLAIM_WAITS": "40"}); err != nil || s.cfg.MaxClaimWaits != 40 {
		t.Fatalf("SKED_MAX_CLAIM_WAITS=40: %d, %v", s.cfg.MaxClaimWaits, err)
	}
	_, err = parseServe(t, []string{"--max-claim-waits", "0"}, nil)
	if msg := fmt.Sprint(err); ExitCode(err) != 2 || !strings.Contains(msg, "--max-claim-waits 0: must be at least 1") {
		t.Fatalf("--max-claim-waits 0: %v", err)
	}
	_, err = parseServe(t, []string{"--default-max-attempts", "1000000000"}, nil)
	if msg := fmt.Sprint(err); ExitCode(err) != 2 || !strings.Contains(msg, "--default-max-attempts 1000000000: attempts must be from 1 to 1000") {
		t.Fatalf("--default-max-attempts 1000000000: %v", err)
	}
}

func TestServeFlags_Tokens(t *testing.T) {
	s, err := parseServe(t, nil, map[string]string{"SKED_TOKEN": "one, two,", "SKED_RETENTION": "0", "SKED_INSECURE": "true"})
	if err != nil || strings.Join(s.cfg.Tokens, " ") != "one two" || s.cfg.Retention != -1 || !s.cfg.Insecure {
		t.Fatalf("SKED_TOKEN=%q: tokens %q retention %v insecure %v, %v", "one, two,", s.cfg.Tokens, s.cfg.Retention, s.cfg.Insecure, err)
	}
	// A list of blanks would turn authentication off: refused.
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, map[string]string{"SKED_TOKEN": " , "}, `--token " , " (from SKED_TOKEN): `},
		{[]string{"--read-token", " "}, nil, `--read-token " ": `},
		{nil, map[string]string{"SKED_WORKER_TOKEN": ","}, `--worker-token "," (from SKED_WORKER_TOKEN): `},
	} {
		_, err := parseServe(t, c.args, c.env)
		if ExitCode(err) != 2 || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "holds no token") {
			t.Errorf("%v %v: %v, want a refusal naming %s", c.args, c.env, err, c.want)
		}
	}
}

func TestServeFlags_NotifyAndPublicURL(t *testing.T) {
	s, err := parseServe(t, nil, map[string]string{
		"SKED_NOTIFY":     "slack:https://hooks.slack.com/services/T/B/x smtp://a:pw@mail.example.com?to=ops@example.com&from=sked@example.com",
		"SKED_PUBLIC_URL": "https://sked.example.com/ops/",
	})
	if err != nil || len(s.cfg.NotifySinks) != 2 || s.cfg.NotifySinks[1].SMTP == nil || s.cfg.PublicURL != "https://sked.example.com/ops/" {
		t.Fatalf("config from env = %+v, %v", s.cfg, err)
	}
	for _, bad := range []string{"sked.example.com", "ftp://sked.example.com", "https://sked.example.com/?x=1", "https://sked.example.com/#/jobs"} {
		_, err := parseServe(t, []string{"--public-url", bad}, nil)
		if ExitCode(err) != 2 || !strings.Contains(err.Error(), "--public-url") || !strings.Contains(err.Error(), "e.g. https://sked.example.com") {
			t.Errorf("--public-url %s: %v, want a refusal that says what to give", bad, err)
		}
	}
	_, err = parseServe(t, []string{"--notify", "smtp://a:pw@mail.example.com"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--notify") || !strings.Contains(err.Error(), "recipient") || strings.Contains(err.Error(), "pw") {
		t.Errorf("--notify smtp without recipients: %v", err)
	}
}

func TestServeFlags_AllowedHosts(t *testing.T) {
	env := map[string]string{"SKED_ALLOWED_HOSTS": "a.example,b.example"}
	s, err := parseServe(t, nil, env)
	if err != nil || strings.Join(s.cfg.AllowedHosts, " ") != "a.example b.example" {
		t.Errorf("SKED_ALLOWED_HOSTS: %v", err)
	}
	if s, err = parseServe(t, []string{"--allowed-hosts", "c.example"}, env); err != nil || strings.Join(s.cfg.AllowedHosts, " ") != "c.example" {
		t.Errorf("--allowed-hosts over SKED_ALLOWED_HOSTS: %v", err)
	}
	for _, bad := range []string{"sked.lan:8080", "https://sked.lan", "*.lan", "[::1]:80"} {
		_, err := parseServe(t, []string{"--allowed-hosts", bad}, nil)
		if ExitCode(err) != 2 || !strings.Contains(err.Error(), "without scheme, port or wildcard") {
			t.Errorf("--allowed-hosts %s: %v, want a refusal that says what to give", bad, err)
		}
	}
}

func TestServeFlags_TrustedProxies(t *testing.T) {
	s, err := parseServe(t, nil, map[string]string{"SKED_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8,::1,fd00::/8,::ffff:192.0.2.1,10.1.2.3/8"})
	if got := fmt.Sprint(s.cfg.TrustedProxies); err != nil || got != "[127.0.0.1/32 10.0.0.0/8 ::1/128 fd00::/8 192.0.2.1/32 10.0.0.0/8]" {
		t.Errorf("SKED_TRUSTED_PROXIES: %s, %v", got, err)
	}
	if s, err = parseServe(t, nil, nil); err != nil || s.cfg.TrustedProxies != nil {
		t.Errorf("no --trusted-proxies: %v, %v; want none", s.cfg.TrustedProxies, err)
	}
	for _, bad := range []string{"proxy.lan", "10.0.0.1:80", "10.0.0.0/33"} {
		_, err := parseServe(t, []string{"--trusted-proxies", bad}, nil)
		if ExitCode(err) != 2 || !strings.Contains(err.Error(), "give IP addresses or CIDR ranges") {
			t.Errorf("--trusted-proxies %s: %v, want a refusal that says what to give", bad, err)
		}
	}
}

// TestMigrate_Flags: sked migrate offers the one flag it reads, --db, and
// refuses sked serve's others instead of taking and ignoring them; both
// commands refuse a --db that would name a SQLite file by mistake.
func TestMigrate_Flags(t *testing.T) {
	code, help, _ := mainOf("migrate", "--help")
	if code != 0 || !strings.Contains(help, "--db string") {
		t.Fatalf("sked migrate --help: exit %d\n%s", code, help)
	}
	for _, serveOnly := range []string{"--addr", "--workers", "--token", "--enable-exec", "--log-format"} {
		if strings.Contains(help, serveOnly) {
			t.Errorf("sked migrate --help lists %s, which it does not read:\n%s", serveOnly, help)
		}
	}
	path := filepath.Join(t.TempDir(), "sked.db")
	if code, _, stderr := mainOf("migrate", "--db", path, "--addr", "127.0.0.1:9"); code != 2 || !strings.Contains(stderr, "unknown flag: --addr") {
		t.Errorf("sked migrate --addr: exit %d, %s", code, stderr)
	}
	dir := filepath.Dir(path)
	for _, args := range [][]string{{"migrate", "--db", dir}, {"serve", "--db", dir, "--addr", "127.0.0.1:0"}} {
		if code, _, stderr := mainOf(args...); code != 2 || !strings.Contains(stderr, "--db "+dir+" is a directory; give the path of the database file, such as "+path) {
			t.Errorf("sked %s --db DIR: exit %d, %s", args[0], code, stderr)
		}
	}
	for _, bad := range []struct{ db, want string }{
		{"postgress://u:secret@db/sked", "--db with a postgress: URL: only postgres:// (or postgresql://) URLs name a database"},
		{"mysql://u:secret@db/sked", "--db with a mysql: URL"},
		{"sqlite://" + path, "--db with a sqlite: URL"},
		{"file:" + path, "--db with a file: URL"},
		{filepath.Join(dir, "nope", "sked.db"), "directory " + filepath.Join(dir, "nope") + " does not exist; create it"},
	} {
		for _, args := range [][]string{{"migrate", "--db", bad.db}, {"serve", "--db", bad.db, "--addr", "127.0.0.1:0"}} {
			if code, _, stderr := mainOf(args...); code != 2 || !strings.Contains(stderr, bad.want) || strings.Contains(stderr, "secret") {
				t.Errorf("sked %s --db %s: exit %d, %s; want exit 2 and %q, no password", args[0], bad.db, code, stderr, bad.want)
			}
		}
	}
	if left, _ := os.ReadDir(filepath.Dir(dir)); len(left) != 1 {
		t.Errorf("a --db that is a directory left files beside it: %v", left)
	}
	for _, want := range []string{"created " + path + " at schema version ", path + ": schema is up to date at version "} {
		code, out, stderr := mainOf("migrate", "--db", path)
		if _, err := os.Stat(path); code != 0 || err != nil || !strings.HasPrefix(out, want) {
			t.Errorf("sked migrate --db %s: exit %d, %v\n%s%s; want %q", path, code, err, out, stderr, want)
		}
	}
}

// TestMigrate_SaysVersions: sked migrate says from which schema version to
// which it migrated a database, or that it was up to date, on SQLite (a
// file left at version 3) and on PostgreSQL (a new schema).
func TestMigrate_SaysVersions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sked.db")
	conn, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sqlite.Migrations(conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 3); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	sources := p.ListSources()
	last := sources[len(sources)-1].Version
	migrate := func(dsn, want string) {
		t.Helper()
		if code, out, stderr := mainOf("migrate", "--db", dsn); code != 0 || out != want {
			t.Errorf("sked migrate --db %s: exit %d\n%s%s; want %q", dsn, code, out, stderr, want)
		}
	}
	migrate(path, fmt.Sprintf("migrated %s: schema version 3 → %d\n", path, last))
	migrate(path, fmt.Sprintf("%s: schema is up to date at version %d\n", path, last))

	u := postgrestest.URL(t)
	code, out, stderr := mainOf("migrate", "--db", u)
	rest, ok := strings.CutPrefix(out, "migrated "+postgres.Redacted(u)+": schema version 0 → ")
	to, err := strconv.Atoi(strings.TrimSuffix(rest, "\n"))
	if code != 0 || !ok || err != nil || to < 1 {
		t.Fatalf("sked migrate --db %s (a new schema): exit %d\n%s%s; want it migrated from version 0", u, code, out, stderr)
	}
	migrate(u, fmt.Sprintf("%s: schema is up to date at version %d\n", postgres.Redacted(u), to))
}

// TestServe_RefusedStartLeavesNothing: sked serve on a port in use, or
// beyond loopback without a token, says why in its flags' terms and leaves
// no database file behind.
func TestServe_RefusedStartLeavesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, port, _ := net.SplitHostPort(busy.Addr().String())
	for _, c := range []struct {
		addr string
		code int
		want []string
	}{
		{busy.Addr().String(), 1, []string{"port " + port + " is in use", "--addr"}},
		{"0.0.0.0:0", 1, []string{"--addr 0.0.0.0:0 reaches beyond loopback", "--token or SKED_TOKEN", "--insecure"}},
		{port, 2, []string{"--addr " + port + ": give a host and a port, such as 127.0.0.1:" + port}},
	} {
		dir := t.TempDir()
		code, _, stderr := mainOf("serve", "--db", filepath.Join(dir, "sked.db"), "--addr", c.addr)
		if code != c.code || strings.Contains(stderr, "Config.") {
			t.Errorf("serve --addr %s: exit %d, want %d and no Go names:\n%s", c.addr, code, c.code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("serve --addr %s said no %q:\n%s", c.addr, w, stderr)
			}
		}
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Errorf("serve --addr %s refused to start but left %s behind", c.addr, left[0].Name())
		}
	}
}

// TestMigrate_RefusesAServedFile: sked migrate does not upgrade a SQLite
// file a sked serve holds (it would go on with a schema it does not know):
// it says which process holds it, and what to do.
func TestMigrate_RefusesAServedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sked.db")
	if code, out, stderr := mainOf("migrate", "--db", path); code != 0 {
		t.Fatalf("sked migrate --db %s: exit %d\n%s%s", path, code, out, stderr)
	}
	lock, err := server.LockStore(path) // as sked serve holds it
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := mainOf("migrate", "--db", path)
	lock.Close()
	if code == 0 || !strings.Contains(stderr, "holds "+path) || !strings.Contains(stderr, "stop it first") {
		t.Errorf("sked migrate of a held file: exit %d\n%s%s; want it refused, naming the holder", code, out, stderr)
	}
	if code, out, stderr := mainOf("migrate", "--db", path); code != 0 {
		t.Errorf("sked migrate once the file is free: exit %d\n%s%s", code, out, stderr)
	}
}

// TestMigrate_WarnsOfLiveNodes: sked migrate that upgrades a PostgreSQL
// database names the nodes seen claiming in the last minutes that did not
// say they stopped (they may run the older sked), and those that hold a
// lease, also past the first page of running jobs, and neither a node
// that stopped, one long silent, nor a remote worker.
func TestMigrate_WarnsOfLiveNodes(t *testing.T) {
	ctx := context.Background()
	u := postgrestest.URL(t)
	if code, out, stderr := mainOf("migrate", "--db", u); code != 0 {
		t.Fatalf("sked migrate --db %s: exit %d\n%s%s", u, code, out, stderr)
	}
	conn, err := postgres.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Node a/1 runs two pools, the jobs' and the deliveries', each
	// recorded under its own worker id: one node.
	if _, err := conn.Exec(ctx, `INSERT INTO workers (id, first_seen_at, last_seen_at, stopped_at) VALUES
		('serve:a/1', now(), now(), NULL),
		('serve:a/1`+db.DeliveriesPoolSuffix+`', now(), now(), NULL),
		('serve:b/2', now(), now(), now()),
		('serve:c/3', now() - interval '1 hour', now() - interval '1 hour', NULL),
		('remote/4', now(), now(), NULL)`); err != nil {
		t.Fatal(err)
	}
	// Node d/5 holds the oldest running job's lease, past the first page
	// of running jobs (newest first) that node e/6's fill.
	store, err := postgres.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	hold := func(node, typ string, n int) {
		t.Helper()
		ps := make([]db.JobCreateParams, n)
		for i := range ps {
			ps[i] = db.JobCreateParams{Type: typ, Payload: []byte(`{}`)}
		}
		if _, err := store.JobCreateBatch(ctx, ps); err != nil {
			t.Fatal(err)
		}
		if cs, err := store.RunClaim(ctx, db.RunClaimParams{WorkerID: node, Types: []string{typ}, Max: n, Lease: time.Hour}); err != nil || len(cs) != n {
			t.Fatalf("claim %d %s jobs for %s: %d claimed, %v", n, typ, node, len(cs), err)
		}
	}
	hold("serve:d/5", "old", 1)
	hold("serve:e/6", "new", handlers.MaxPageLimit)
	// As nodes of a sked too old to record their claims, only their leases
	// show them.
	if _, err := conn.Exec(ctx, `DELETE FROM workers WHERE id IN ('serve:d/5', 'serve:e/6')`); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := mainOf("migrate", "--db", u); code != 0 || stderr != "" {
		t.Errorf("sked migrate of a database up to date: exit %d, stderr %q; want no warning", code, stderr)
	}
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	sqlConn := stdlib.OpenDB(*cfg)
	defer sqlConn.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlConn, os.DirFS("../../db/postgres/migrations"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Down(ctx); err != nil { // one version behind
		t.Fatal(err)
	}
	code, out, stderr := mainOf("migrate", "--db", u)
	if code != 0 || !strings.Contains(out, "migrated ") {
		t.Fatalf("sked migrate --db %s (one version behind): exit %d\n%s%s", u, code, out, stderr)
	}
	if !strings.Contains(stderr, "3 node(s)") || !strings.Contains(stderr, ": a/1, e/6, d/5.") || !strings.Contains(stderr, "start it on this binary") {
		t.Errorf("sked migrate with live nodes: stderr %q; want a warning naming a/1, e/6 and d/5 alone", stderr)
	}
}
