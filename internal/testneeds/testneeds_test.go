package testneeds_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sked-dev/sked/internal/testneeds"
)

// helperEnv makes TestHelperNeedsPostgres skip: through Skip, or by itself
// when it says "own". TestSkip here and internal/testrun's test run it in
// a child process to see what a skip does.
const helperEnv = "SKED_TESTNEEDS_HELPER"

func TestHelperNeedsPostgres(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "":
		return // run only as the child of another test
	case "own":
		t.Skip("a skip of its own")
	}
	testneeds.Skip(t, testneeds.Postgres, "the test says so")
	t.Log("ran on after Skip")
}

// TestSkip runs a test that misses PostgreSQL with each SKED_TEST_REQUIRE:
// it skips with the line unless the variable lists postgres, and then fails
// with the same line; an unknown name there fails too.
func TestSkip(t *testing.T) {
	line := "needs postgres: the test says so. To run it: " + testneeds.How[testneeds.Postgres]
	for _, c := range []struct {
		require string
		want    []string // in the child's output
		fails   bool
	}{
		{"", []string{"--- SKIP: TestHelperNeedsPostgres", line}, false},
		{"chromium,privileged", []string{"--- SKIP: TestHelperNeedsPostgres", line}, false},
		{"chromium, postgres", []string{"--- FAIL: TestHelperNeedsPostgres", line, "(SKED_TEST_REQUIRE lists postgres: it must run here)"}, true},
		{"postgress", []string{"--- FAIL: TestHelperNeedsPostgres", `SKED_TEST_REQUIRE="postgress": unknown need "postgress"; the needs are chromium, linux, pgbouncer, postgres, privileged, race`}, true},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNeedsPostgres$", "-test.v")
		cmd.Env = append(os.Environ(), helperEnv+"=1", testneeds.Env+"="+c.require)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != c.fails {
			t.Errorf("%s=%q: the test failed: %v, want %v (%v):\n%s", testneeds.Env, c.require, failed, c.fails, err, out)
		}
		for _, want := range c.want {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s=%q: output lacks %q:\n%s", testneeds.Env, c.require, want, out)
			}
		}
		if strings.Contains(string(out), "ran on after Skip") {
			t.Errorf("%s=%q: the test ran on after Skip:\n%s", testneeds.Env, c.require, out)
		}
	}
}

// TestParse reads back the line Skip reports, as the testing package
// prints it, and nothing else.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		line string
		need testneeds.Need
		why  string
	}{
		{"    e2e_test.go:232: " + testneeds.Line(testneeds.Chromium, "no chromium on PATH") + "\n", testneeds.Chromium, "no chromium on PATH"},
		{testneeds.Line(testneeds.Privileged, "cannot mount a tmpfs (exit status 32: mount: /x: permission denied.)"), testneeds.Privileged, "cannot mount a tmpfs (exit status 32: mount: /x: permission denied.)"},
		{"    x_test.go:1: needs postgres: a line from elsewhere", "", ""},
		{"    x_test.go:1: needs water: none. To run it: rain", "", ""},
		{"    x_test.go:1: the job needs postgres: to run. To run it: x", "", ""},
		{"--- SKIP: TestX (0.00s)", "", ""},
	} {
		need, why, ok := testneeds.Parse(c.line)
		if need != c.need || why != c.why || ok != (c.need != "") {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q", c.line, need, why, ok, c.need, c.why)
		}
	}
}
