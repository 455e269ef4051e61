// Package postgrestest opens real, migrated PostgreSQL stores for tests, each
// in a schema of its own so that tests run in parallel on one server.
package postgrestest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/internal/testneeds"
	"github.com/sked-dev/sked/internal/testpg"
)

// EnvURL names the variable that holds the test server's URL.
const EnvURL = "SKED_TEST_POSTGRES"

// ServerURL returns the URL of the test server: $SKED_TEST_POSTGRES, else a
// throwaway server that the first call in this process starts from the
// PostgreSQL installed here and that is stopped when the process exits. It
// skips the test when neither is there (testneeds.Postgres).
func ServerURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	u, err := testpg.URL()
	if missing, ok := errors.AsType[*testpg.MissingError](err); ok {
		testneeds.Skip(t, testneeds.Postgres, EnvURL+" is unset and "+missing.Reason)
	}
	if err != nil {
		t.Fatalf("%s is unset and the throwaway server did not start: %v", EnvURL, err)
	}
	return u
}

// URL returns a connection URL to a new, empty schema on the test server
// (see ServerURL); the schema is dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	u, drop, err := postgres.NewSchema(context.Background(), ServerURL(t), "sked_test_")
	if err != nil {
		t.Fatalf("test schema: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return u
}

// Open returns a migrated store in a new schema (see URL), closed when the
// test ends. It skips the test when $SKED_TEST_POSTGRES is empty.
func Open(t testing.TB) *postgres.Store {
	t.Helper()
	return OpenURL(t, URL(t))
}

// OpenURL returns a migrated store on url (from URL, for a test that also
// connects to the schema itself), closed when the test ends.
func OpenURL(t testing.TB, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}

// AwaitListening returns once wakes, a store's Wakeups channel, hears a
// notification: it creates jobs of typ due now through writer (on the
// same database and schema) until one wakes it, which shows that the
// listener's LISTEN is in place. It fails t after 30 s.
func AwaitListening(t testing.TB, writer *postgres.Store, wakes <-chan struct{}, typ string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if _, _, err := writer.JobCreate(context.Background(), db.JobCreateParams{Type: typ}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wakes:
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no wake-up for jobs created due now: the listener does not hear them")
		}
	}
}

// Supersede records in the migrated schema at url (from URL) a migration
// newer than any this binary knows, version 99, as a newer sked's migration
// leaves the database for the nodes of this version.
func Supersede(t testing.TB, url string) {
	t.Helper()
	Exec(t, url, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (99, true)`)
}

// Exec runs stmts, one after another, on a connection of its own to the
// database at url (from URL), such as an ANALYZE before a plan is checked.
func Exec(t testing.TB, url string, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := postgres.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
