// Package testneeds is how a test says that this machine lacks something
// it needs (a PostgreSQL server, Chromium, root, Linux): one line naming what is
// missing and how to get it, and a skip; or a failure where
// $SKED_TEST_REQUIRE lists the need, so that a run on a machine that
// should have everything cannot pass with half the suite skipped.
//
// The line has a fixed form, "needs NAME: why. To run it: how", that
// Parse reads back: the test runner (internal/testrun) sums the skips up
// after a run.
package testneeds

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// A Need is something a test needs that a machine with only Go may lack.
type Need string

// The needs of the suite. Race is not a test's: the test runner turns the
// race detector on where cgo works and reports it off otherwise.
const (
	Postgres   Need = "postgres"   // a PostgreSQL server, or its binaries to start one
	PgBouncer  Need = "pgbouncer"  // PgBouncer's binary, to put in front of that server
	Chromium   Need = "chromium"   // headless Chromium, for the dashboard's end-to-end test
	Privileged Need = "privileged" // root with CAP_SYS_ADMIN: mount a tmpfs, chattr +i
	Linux      Need = "linux"      // what Linux has: /proc/self/fd, all of 127.0.0.0/8 on loopback
	Race       Need = "race"       // the race detector: cgo and a C compiler
)

// How says, for each need, how to get it.
var How = map[Need]string{
	Postgres: "install PostgreSQL (Debian: apt-get install postgresql) and the tests start a throwaway server " +
		"from its binaries, or point SKED_TEST_POSTGRES at one (postgres://user@127.0.0.1:5432/db?sslmode=disable)",
	PgBouncer:  "install PgBouncer (Debian: apt-get install pgbouncer) so that pgbouncer is on PATH or in /usr/sbin",
	Chromium:   "install Chromium (Debian: apt-get install chromium) so that chromium, chromium-browser or google-chrome is on PATH",
	Privileged: "run the tests as root with CAP_SYS_ADMIN and CAP_LINUX_IMMUTABLE (e.g. a privileged container) on a file system that takes chattr +i (ext4, xfs)",
	Linux:      "run the tests on Linux",
	Race:       "install a C compiler (Debian: apt-get install gcc): cgo turns on, and with it -race",
}

// Env names the variable that lists, comma-separated, the needs that must
// be met: a test that misses one of them fails instead of skipping.
const Env = "SKED_TEST_REQUIRE"

// prefix starts every line of Skip, so that Parse finds it in test output.
const prefix = "needs "

// Line is the one line Skip reports: "needs NAME: why. To run it: how".
func Line(need Need, why string) string {
	return prefix + string(need) + ": " + why + ". To run it: " + How[need]
}

// Parse reads a line of test output ("    file_test.go:12: needs …") back
// into its need and why; ok is false for any other line.
func Parse(line string) (need Need, why string, ok bool) {
	line = strings.TrimSpace(line)
	// Strip the "file.go:12: " that the testing package puts first.
	if i := strings.Index(line, ": "+prefix); i >= 0 && !strings.Contains(line[:i], " ") {
		line = line[i+2:]
	}
	rest, ok := strings.CutPrefix(line, prefix)
	if !ok {
		return "", "", false
	}
	name, rest, ok := strings.Cut(rest, ": ")
	if _, known := How[Need(name)]; !ok || !known {
		return "", "", false
	}
	why, _, ok = strings.Cut(rest, ". To run it: ")
	if !ok {
		return "", "", false
	}
	return Need(name), why, true
}

// Required reports whether $SKED_TEST_REQUIRE lists need. A name there
// that is not a Need is an error: a typo must not quietly require nothing.
func Required(need Need) (bool, error) {
	var names []Need
	for name := range strings.SplitSeq(os.Getenv(Env), ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if _, ok := How[Need(name)]; !ok {
			return false, fmt.Errorf("%s=%q: unknown need %q; the needs are %s", Env, os.Getenv(Env), name, strings.Join(known(), ", "))
		}
		names = append(names, Need(name))
	}
	return slices.Contains(names, need), nil
}

// known returns the names of the needs, sorted.
func known() []string {
	var names []string
	for n := range How {
		names = append(names, string(n))
	}
	slices.Sort(names)
	return names
}

// Skip skips t with Line(need, why), or fails it with that line when
// $SKED_TEST_REQUIRE lists need.
func Skip(t testing.TB, need Need, why string) {
	t.Helper()
	required, err := Required(need)
	if err != nil {
		t.Fatal(err)
	}
	if required {
		t.Fatalf("%s (%s lists %s: it must run here)", Line(need, why), Env, need)
	}
	t.Skip(Line(need, why))
}
