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
		"postgres://sked@db/sked?sslmode=require&password=hunter2": "postgres://sked@db/sked?sslmode=require&password=xxxxx",
		"postgresql://db/sked?sslpassword=hunter2&sslcert=/c.pem":  "postgresql://db/sked?sslpassword=xxxxx&sslcert=/c.pem",
		"postgres://sked@db/sked":                                  "postgres://sked@db/sked",
		"postgres://db/sked?application_name=n1":                   "postgres://db/sked?application_name=n1",
		"/var/lib/sked/sked.db":                                    "/var/lib/sked/sked.db",
		"my jobs?password=not-a-url.db":                            "my jobs?password=not-a-url.db",
		// Passwords that pgx takes unencoded (as libpq does) and Go's URL
		// parser refuses or reads otherwise.
		"postgres://sked:hun|ter2{x}@db:5432/sked":                     "postgres://sked:xxxxx@db:5432/sked",
		"postgres://sked:hun#ter2@db:5432/sked":                        "postgres://sked:xxxxx@db:5432/sked",
		"postgres://sked:hun?ter2@db:5432/sked":                        "postgres://sked:xxxxx@db:5432/sked",
		"postgres://sked:hun ter2@db/sked":                             "postgres://sked:xxxxx@db/sked",
		"postgres://sked:hun%zzter2@db/sked":                           "postgres://sked:xxxxx@db/sked",
		"postgres://sked:hun@ter2@db/sked?sslmode=disable":             "postgres://sked:xxxxx@db/sked?sslmode=disable",
		"postgres://sked:hun/ter2@db/sked":                             "postgres://sked:xxxxx@db/sked",
		"postgres://sked:p|w@db/sked?sslmode=disable&password=hunter2": "postgres://sked:xxxxx@db/sked?sslmode=disable&password=xxxxx",
		"postgres://db/sked?application_name=a@b":                      "postgres://xxxxx@b", // over-hidden, as the @ might end a user info
	} {
		got := postgres.Redacted(dsn)
		if got != want || strings.Contains(got, "hunter2") || strings.Contains(got, "ter2") {
			t.Errorf("Redacted(%q) = %q, want %q", dsn, got, want)
		}
	}
}
