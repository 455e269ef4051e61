package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

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
	waitFor(t, "sked serve to be ready", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
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
