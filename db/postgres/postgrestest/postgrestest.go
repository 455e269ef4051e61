// Package postgrestest opens real, migrated PostgreSQL stores for tests, each
// in a schema of its own so that tests run in parallel on one server.
package postgrestest

import (
	"context"
	"os"
	"testing"

	"github.com/sked-dev/sked/db/postgres"
)

// EnvURL names the variable that holds the test server's URL.
const EnvURL = "SKED_TEST_POSTGRES"

// URL returns a connection URL to a new, empty schema on the server named by
// $SKED_TEST_POSTGRES; the schema is dropped when the test ends. It skips the
// test when the variable is empty.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		t.Skip(EnvURL + " not set: these tests need a PostgreSQL server. Start a throwaway one with " +
			"`eval \"$(.ci/postgres.sh)\"` (as CI does), or set " + EnvURL + "=postgres://user@127.0.0.1:5432/db?sslmode=disable")
	}
	u, drop, err := postgres.NewSchema(context.Background(), base, "sked_test_")
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
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
	s, err := postgres.Open(context.Background(), URL(t))
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
