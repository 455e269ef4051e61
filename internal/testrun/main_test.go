package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sked-dev/sked/internal/testneeds"
)

// TestRun runs go test through run on internal/testneeds' helper test,
// which skips for want of PostgreSQL or by its own choice, and checks the
// summary, the exit status and what SKED_TEST_REQUIRE does.
func TestRun(t *testing.T) {
	how := testneeds.How[testneeds.Postgres]
	for _, c := range []struct {
		helper, require string
		status          int
		want            []string // in stdout, in order
	}{
		{"postgres", "", 0, []string{
			"go test -json -timeout=20m -race=false -count=1 -run=^TestHelperNeedsPostgres$ ../testneeds\n",
			"ok  \tgithub.com/sked-dev/sked/internal/testneeds\t",
			"Not run here (SKED_TEST_REQUIRE=NAME,… turns a missing NAME into a failure; .ci/run installs them all):\n" +
				"  postgres: 1 test in ./internal/testneeds skipped:\n" +
				"    the test says so (1)\n" +
				"    to run: " + how + "\n" +
				"  race: the race detector was off: the command line says -race=false\n" +
				"    to run: " + testneeds.How[testneeds.Race] + "\n" +
				"PASS: 0 tests passed, 0 failed, 1 skipped, in 1 package\n",
		}},
		{"own", "postgres", 0, []string{
			"  race: the race detector was off",
			"Skipped by the tests' own choice (1 test):\n" +
				"  ./internal/testneeds TestHelperNeedsPostgres: testneeds_test.go:",
			": a skip of its own\n" +
				"PASS: 0 tests passed, 0 failed, 1 skipped, in 1 package\n",
		}},
		{"postgres", "postgres", 1, []string{
			"needs postgres: the test says so. To run it: " + how + " (SKED_TEST_REQUIRE lists postgres: it must run here)\n",
			"--- FAIL: TestHelperNeedsPostgres",
			"FAIL\tgithub.com/sked-dev/sked/internal/testneeds\t",
			"FAIL: 0 tests passed, 1 failed, 0 skipped, in 1 package\n" +
				"  failed: ./internal/testneeds TestHelperNeedsPostgres\n" +
				"  failed packages: ./internal/testneeds\n",
		}},
	} {
		t.Setenv("SKED_TESTNEEDS_HELPER", c.helper)
		t.Setenv(testneeds.Env, c.require)
		var stdout, stderr strings.Builder
		status := run([]string{"-race=false", "-count=1", "-run=^TestHelperNeedsPostgres$", "../testneeds"}, &stdout, &stderr)
		if status != c.status {
			t.Errorf("helper %s, %s=%s: status %d, want %d\nstdout:\n%s\nstderr:\n%s", c.helper, testneeds.Env, c.require, status, c.status, &stdout, &stderr)
		}
		rest := stdout.String()
		for _, want := range c.want {
			_, after, ok := strings.Cut(rest, want)
			if !ok {
				t.Errorf("helper %s, %s=%s: stdout lacks %q after what came before:\n%s", c.helper, testneeds.Env, c.require, want, &stdout)
				break
			}
			rest = after
		}
	}
}

// TestRun_RaceRequired fails before running anything when SKED_TEST_REQUIRE
// lists race and the race detector is off.
func TestRun_RaceRequired(t *testing.T) {
	t.Setenv(testneeds.Env, "race")
	var stdout, stderr strings.Builder
	if status := run([]string{"-race=false", "../testneeds"}, &stdout, &stderr); status != 1 {
		t.Errorf("status %d, want 1", status)
	}
	if stdout.Len() > 0 {
		t.Errorf("ran go test:\n%s", &stdout)
	}
	want := "testrun: needs race: the command line says -race=false. To run it: " + testneeds.How[testneeds.Race] + " (SKED_TEST_REQUIRE lists race)\n"
	if stderr.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", &stderr, want)
	}
}

// TestSummary_EverythingRan says so when no test skipped for want of a
// need (one skipped by its own choice is listed below) and the race
// detector was on: the line .ci/run looks for.
func TestSummary_EverythingRan(t *testing.T) {
	var out strings.Builder
	s := newSummary(&out, "example.com/m")
	s.event(event{Action: "pass", Package: "example.com/m/a", Test: "TestA"})
	s.event(event{Action: "output", Package: "example.com/m/a", Test: "TestB", Output: "    b_test.go:3: a helper process\n"})
	s.event(event{Action: "skip", Package: "example.com/m/a", Test: "TestB"})
	s.event(event{Action: "pass", Package: "example.com/m/a"})
	if status := s.print("", 0); status != 0 {
		t.Errorf("status %d, want 0", status)
	}
	want := "\n" + everythingRan + "\nSkipped by the tests' own choice (1 test):\n  ./a TestB: b_test.go:3: a helper process\n" +
		"PASS: 1 test passed, 0 failed, 1 skipped, in 1 package\n"
	if out.String() != want {
		t.Errorf("printed:\n%q\nwant:\n%q", out.String(), want)
	}
}

// TestCIRunsTheREADMECommand: .ci/run reads the command of the README's
// **Run the tests** block from the README and runs it as its last command,
// so that CI runs what a newcomer is told to run, and its exit status is
// CI's.
func TestCIRunsTheREADMECommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(readme), "**Run the tests**")
	_, block, ok := strings.Cut(block, "```sh\n")
	if !ok {
		t.Fatal("README.md has no sh block under **Run the tests**")
	}
	command, _, _ := strings.Cut(block, "\n```")
	// What .ci/run reads from the README is that block.
	out, err := exec.Command("bash", "../../.ci/run", "--print-test-command").Output()
	if err != nil {
		t.Fatalf(".ci/run --print-test-command: %v", err)
	}
	if got := strings.TrimSuffix(string(out), "\n"); got != command {
		t.Errorf(".ci/run reads %q from the README, not %q, its test command", got, command)
	}
	// And runs it last: its exit status is the script's.
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for line := range strings.Lines(string(ci)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			last = line
		}
	}
	if last != command {
		t.Errorf(".ci/run's last command is %q, not %q: it must run the README's test command as written, last, and let it decide", last, command)
	}
}

// TestRun_WithoutCompiler: on a machine with Go and no C compiler, as a
// newcomer's, the run goes on without the race detector and says so, and
// how to turn it on.
func TestRun_WithoutCompiler(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	t.Setenv("PATH", filepath.Dir(goBin)) // Go's own bin holds no C compiler
	t.Setenv("SKED_TESTNEEDS_HELPER", "own")
	t.Setenv(testneeds.Env, "")
	var stdout, stderr strings.Builder
	if status := run([]string{"-count=1", "-run=^TestHelperNeedsPostgres$", "../testneeds"}, &stdout, &stderr); status != 0 {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", status, &stdout, &stderr)
	}
	want := "  race: the race detector was off: cgo is off (CGO_ENABLED=0, or no C compiler on PATH)\n    to run: " + testneeds.How[testneeds.Race] + "\n"
	if !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, &stdout)
	}
}
