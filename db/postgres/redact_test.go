package postgres_test

import (
	"strings"
	"testing"

	"github.com/sked-dev/sked/db/postgres"
)

// TestRedacted: a DSN as sked logs and prints it keeps no password, whether in the
// URL's user info or in its query, as pgx takes it from either.
func TestRedacted(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://sked:hunter2@db:5432/sked":                     "postgres://sked:xxxxx@db:5432/sked",
		"postgres://sked@db/sked?sslmode=require&password=hunter2": "postgres://sked@db/sked?password=xxxxx&sslmode=require",
		"postgresql://db/sked?sslpassword=hunter2&sslcert=/c.pem":  "postgresql://db/sked?sslcert=%2Fc.pem&sslpassword=xxxxx",
		"/var/lib/sked/sked.db":                                    "/var/lib/sked/sked.db",
		"my jobs?password=not-a-url.db":                            "my jobs?password=not-a-url.db",
	} {
		got := postgres.Redacted(dsn)
		if got != want || strings.Contains(got, "hunter2") {
			t.Errorf("Redacted(%q) = %q, want %q", dsn, got, want)
		}
	}
}
