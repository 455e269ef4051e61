package main

import (
	"bytes"
	"context"
	"database/sql"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver of database/sql, for goose
	"github.com/pressly/goose/v3"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestServe_SupersededSchemaStops: a node on PostgreSQL whose database a
// node of a newer sked migrates (a rolling upgrade) shuts down, saying why,
// rather than go on claiming and finishing jobs under rules it does not
// know (a pause asked for during a run, kept in a column it never reads,
// was lost so). It needs PostgreSQL (postgrestest.URL skips without one).
func TestServe_SupersededSchemaStops(t *testing.T) {
	url := postgrestest.URL(t)
	addr := freeAddr(t)
	p := startServe(t, url, addr)
	waitReady(t, addr)
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()

	// What a newer sked's migration leaves: a version this binary does not know.
	postgrestest.Supersede(t, url)
	var err error
	select {
	case err = <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("sked serve still runs a minute after a newer sked migrated its database:\n%s", p.logs)
	}
	if p.cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("sked serve exited with %v, want status 1:\n%s", err, p.logs)
	}
	logs := p.logs.String()
	for _, want := range []string{"a newer sked migrated the database past this binary", "the database is at version 99", "msg=stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
}

// waitReady waits for the sked serve at addr to answer /readyz 200: it
// listens before it has migrated its database.
func waitReady(t *testing.T, addr string) {
	t.Helper()
	waitFor(t, "sked serve to be ready", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// TestMigrate_WarnsOfOldNodes: sked migrate that upgrades a PostgreSQL
// database names the nodes still running on it, also one of a sked too
// old to record its claims (schema 9, before the workers table), which
// only its job's lease shows. It needs PostgreSQL.
func TestMigrate_WarnsOfOldNodes(t *testing.T) {
	url := postgrestest.URL(t)
	addr := freeAddr(t)
	p := startServe(t, url, addr, "--enable-exec", "--lease", "2m")
	waitReady(t, addr)
	c := client{t, "http://" + addr}
	j := c.create(map[string]any{"type": "exec", "payload": map[string]any{"command": []string{"sleep", "20"}}})
	c.waitState(j.ID, db.StateRunning)
	p.cmd.Process.Kill() // its lease holds for 2m, as a live node's would
	p.cmd.Wait()

	// The schema of the sked before the workers table (9), through the
	// migrations' own down steps.
	ctx := context.Background()
	conn, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	migrations, err := goose.NewProvider(goose.DialectPostgres, conn, os.DirFS("db/postgres/migrations"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.DownTo(ctx, 9); err != nil {
		t.Fatalf("migrate down to 9: %v", err)
	}

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(skedBin, "migrate", "--db", url)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sked migrate: %v\n%s%s", err, &stdout, &stderr)
	}
	node := "/" + strconv.Itoa(p.cmd.Process.Pid) // serve:HOST/PID…
	if !strings.Contains(stdout.String(), "schema version 9 → ") ||
		!strings.Contains(stderr.String(), "warning: 1 node(s)") || !strings.Contains(stderr.String(), node) {
		t.Errorf("sked migrate said\n%s%s\nwant the migration from 9 and a warning naming the node (…%s)", &stdout, &stderr, node)
	}
}
