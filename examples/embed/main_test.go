package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestRun runs the example on SQLite and, with $SKED_TEST_POSTGRES, on
// PostgreSQL (see postgrestest.ServerURL): its own page and sked's dashboard are served, the jobs it
// enqueues at start run on its Go handler, and so does one created through
// the API it mounts under /sked/; it stops when its context ends.
func TestRun(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		check(t, filepath.Join(t.TempDir(), "embed.db"), "greet-grace")
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		dsn := postgrestest.URL(t)
		check(t, dsn, "greet-grace", "welcome-Ada")
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var users int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM users`).Scan(&users); err != nil || users != 1 {
			t.Errorf("users: %d, %v; want Ada, written with her job", users, err)
		}
	})
}

// check runs the example on dsn and waits for the jobs of keys, and one
// created through its API, to succeed.
func check(t *testing.T, dsn string, keys ...string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, ln, dsn, slog.New(slog.DiscardHandler)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	base := "http://" + ln.Addr().String()

	for path, want := range map[string]string{"/": "the program's own page", "/sked/": "<title>sked</title>"} {
		if code, body := get(t, base+path); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d %.100q, want %q", path, code, body, want)
		}
	}
	res, err := http.Post(base+"/sked/jobs", "application/json", strings.NewReader(`{"type": "greet", "payload": {"name": "Ada"}, "idempotencyKey": "api"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST /sked/jobs: %d", res.StatusCode)
	}
	for _, key := range append(keys, "api") {
		deadline := time.Now().Add(30 * time.Second)
		for {
			var list struct{ Jobs []db.Job }
			_, body := get(t, base+"/sked/jobs?state=done")
			if err := json.Unmarshal([]byte(body), &list); err != nil {
				t.Fatalf("GET /sked/jobs: %v %s", err, body)
			}
			if hasKey(list.Jobs, key) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the job of key %s did not run within 30 s; done: %s", key, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func hasKey(jobs []db.Job, key string) bool {
	for _, j := range jobs {
		if j.IdempotencyKey == key {
			return true
		}
	}
	return false
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
