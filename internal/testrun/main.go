// Command testrun runs the test suite the way the README says and CI does:
//
//	go run ./internal/testrun [go test flags] [packages]
//
// It runs go test -json over the packages (./... when none are given),
// with -race where cgo works and a timeout of 20m, and prints what go test
// prints without -v: each package's result and the output of every failed
// test. It ends with
// a summary of what did not run here (the tests skipped for a missing
// need, see internal/testneeds, and the race detector when cgo is off) and
// how to run it, so that a green run never hides half the suite.
//
// $SKED_TEST_REQUIRE lists needs that must be met: a test that misses one
// fails, and "race" there makes a run without cgo fail before it starts.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/sked-dev/sked/internal/testneeds"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs go test with args, prints its results and the summary to
// stdout, and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	raceOff, err := race(args)
	if err != nil {
		fmt.Fprintln(stderr, "testrun:", err)
		return 1
	}
	goArgs := []string{"test", "-json"}
	if raceOff == "" && !slices.ContainsFunc(args, isFlag("race")) {
		goArgs = append(goArgs, "-race")
	}
	if !slices.ContainsFunc(args, isFlag("timeout")) {
		// The slowest packages take minutes under -race on two cores; go
		// test's default of 10m would cut them short on a slower machine.
		goArgs = append(goArgs, "-timeout=20m")
	}
	goArgs = append(goArgs, args...)
	if !slices.ContainsFunc(args, isPackage) {
		goArgs = append(goArgs, "./...")
	}
	fmt.Fprintln(stdout, "go", strings.Join(goArgs, " "))

	cmd := exec.Command("go", goArgs...)
	cmd.Stderr = stderr
	events, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintln(stderr, "testrun:", err)
		return 1
	}
	s := newSummary(stdout, modulePath())
	dec := json.NewDecoder(bufio.NewReader(events))
	for {
		var e event
		if err := dec.Decode(&e); err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintln(stderr, "testrun: reading go test -json:", err)
			}
			break
		}
		s.event(e)
	}
	status := 0
	if err := cmd.Wait(); err != nil {
		status = 1
		if _, exited := errors.AsType[*exec.ExitError](err); !exited {
			fmt.Fprintln(stderr, "testrun:", err)
		}
	}
	return s.print(raceOff, status)
}

// race returns why the race detector will be off, or "" when it will be
// on: args turn it on or off with -race, else it is on where cgo is. It is
// an error for it to be off when $SKED_TEST_REQUIRE lists race.
func race(args []string) (off string, err error) {
	required, err := testneeds.Required(testneeds.Race)
	if err != nil {
		return "", err
	}
	if i := slices.IndexFunc(args, isFlag("race")); i >= 0 {
		if _, v, ok := strings.Cut(args[i], "="); ok {
			if on, err := strconv.ParseBool(v); err == nil && !on {
				off = "the command line says " + args[i]
			}
		}
	} else {
		out, err := exec.Command("go", "env", "CGO_ENABLED").Output()
		if err != nil {
			return "", fmt.Errorf("go env CGO_ENABLED: %w", err)
		}
		if strings.TrimSpace(string(out)) != "1" {
			off = "cgo is off (CGO_ENABLED=0, or no C compiler on PATH)"
		}
	}
	if off != "" && required {
		return "", fmt.Errorf("%s (%s lists %s)", testneeds.Line(testneeds.Race, off), testneeds.Env, testneeds.Race)
	}
	return off, nil
}

// isFlag returns a function that reports whether an argument is the flag
// name: -name, --name, -name=value.
func isFlag(name string) func(arg string) bool {
	return func(arg string) bool {
		f := strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
		return strings.HasPrefix(arg, "-") && (f == name || strings.HasPrefix(f, name+"="))
	}
}

// isPackage reports whether arg names packages: a relative or absolute
// path or pattern (./worker, ./db/...), the form the README and the summary
// use; run adds ./... when no argument is one.
func isPackage(arg string) bool {
	return strings.HasPrefix(arg, ".") || strings.HasPrefix(arg, "/")
}

// modulePath returns the path of the module the tests are in, which the
// summary strips from package paths.
func modulePath() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		return info.Main.Path
	}
	return ""
}

// event is one line of go test -json (see go doc test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// skipped is a test that did not run: its need and why when it skipped
// through testneeds, else need is "" and why is its skip message.
type skipped struct {
	pkg, test string
	need      testneeds.Need
	why       string
}

// summary follows the events of a run and prints the results.
type summary struct {
	out     io.Writer
	module  string
	output  map[[2]string]*strings.Builder // a running test's output, by package and test
	passed  int
	failed  []string // package and test of each failed test
	skipped []skipped
	pkgs    map[string]bool // the packages that ran tests, and whether they failed
}

func newSummary(out io.Writer, module string) *summary {
	return &summary{out: out, module: module, output: map[[2]string]*strings.Builder{}, pkgs: map[string]bool{}}
}

// pkg returns a package path as a go test argument: "./worker", ".".
func (s *summary) pkg(path string) string {
	if rest, ok := strings.CutPrefix(path, s.module); ok && s.module != "" {
		return "." + rest
	}
	return path
}

// event takes one event of the run.
func (s *summary) event(e event) {
	if e.Test == "" {
		switch e.Action {
		case "build-output":
			fmt.Fprint(s.out, e.Output)
		case "output":
			// The package's result line and what its tests printed outside
			// any test; not the bare PASS line. Before a FAIL line, what
			// the tests that never ended (a timeout, a crash) printed.
			if strings.HasPrefix(e.Output, "FAIL\t") {
				for _, key := range slices.SortedFunc(maps.Keys(s.output), func(a, b [2]string) int { return cmp.Compare(a[1], b[1]) }) {
					if key[0] == e.Package {
						s.printFailed(key)
					}
				}
			}
			if e.Output != "PASS\n" && !strings.HasSuffix(e.Output, "[no test files]\n") {
				fmt.Fprint(s.out, e.Output)
			}
		case "pass":
			s.pkgs[e.Package] = false
		case "fail":
			s.pkgs[e.Package] = true
		}
		return
	}
	key := [2]string{e.Package, e.Test}
	switch e.Action {
	case "output":
		if s.output[key] == nil {
			s.output[key] = &strings.Builder{}
		}
		s.output[key].WriteString(e.Output)
		return
	case "pass":
		s.passed++
	case "fail":
		s.failed = append(s.failed, s.pkg(e.Package)+" "+e.Test)
		s.printFailed(key)
		return
	case "skip":
		s.skipped = append(s.skipped, s.skip(e.Package, e.Test, s.text(key)))
	default:
		return
	}
	delete(s.output, key)
}

// printFailed prints what the test at key printed, but the === lines of
// go test -v, and forgets it.
func (s *summary) printFailed(key [2]string) {
	for line := range strings.Lines(s.text(key)) {
		if !strings.HasPrefix(line, "=== ") {
			fmt.Fprint(s.out, line)
		}
	}
	delete(s.output, key)
}

// text returns the output of the test at key so far.
func (s *summary) text(key [2]string) string {
	if b := s.output[key]; b != nil {
		return b.String()
	}
	return ""
}

// skip reads why a test skipped from its output.
func (s *summary) skip(pkg, test, output string) skipped {
	sk := skipped{pkg: s.pkg(pkg), test: test}
	for line := range strings.Lines(output) {
		if need, why, ok := testneeds.Parse(line); ok {
			sk.need, sk.why = need, why
			return sk
		}
		if line = strings.TrimSpace(line); sk.why == "" && line != "" && !strings.HasPrefix(line, "=== ") && !strings.HasPrefix(line, "--- SKIP") {
			sk.why = line
		}
	}
	return sk
}

// everythingRan is the summary's first line when no test skipped for want
// of a need and the race detector was on, as .ci/run's required needs make
// sure.
const everythingRan = "Everything ran: no test skipped for want of what it needs, the race detector on."

// print prints the summary and returns the run's exit status: status, the
// exit status of go test, or 1 when a test failed.
func (s *summary) print(raceOff string, status int) int {
	byNeed := map[testneeds.Need][]skipped{}
	for _, sk := range s.skipped {
		byNeed[sk.need] = append(byNeed[sk.need], sk)
	}
	fmt.Fprintln(s.out)
	missing := raceOff != "" // a need not met here
	for need := range byNeed {
		missing = missing || need != ""
	}
	if missing {
		fmt.Fprintf(s.out, "Not run here (%s=NAME,… turns a missing NAME into a failure; .ci/run installs them all):\n", testneeds.Env)
	} else {
		fmt.Fprintln(s.out, everythingRan)
	}
	for _, need := range slices.Sorted(maps.Keys(byNeed)) {
		if need == "" {
			continue
		}
		sks := byNeed[need]
		fmt.Fprintf(s.out, "  %s: %s in %s skipped:\n", need, plural(len(sks), "test"), strings.Join(packages(sks), " "))
		whys := map[string]int{}
		for _, sk := range sks {
			whys[sk.why]++
		}
		for _, why := range slices.Sorted(maps.Keys(whys)) {
			fmt.Fprintf(s.out, "    %s (%d)\n", why, whys[why])
		}
		fmt.Fprintf(s.out, "    to run: %s\n", testneeds.How[need])
	}
	if raceOff != "" {
		fmt.Fprintf(s.out, "  race: the race detector was off: %s\n    to run: %s\n", raceOff, testneeds.How[testneeds.Race])
	}
	if other := byNeed[""]; len(other) > 0 {
		fmt.Fprintf(s.out, "Skipped by the tests' own choice (%s):\n", plural(len(other), "test"))
		for _, sk := range other {
			fmt.Fprintf(s.out, "  %s %s: %s\n", sk.pkg, sk.test, sk.why)
		}
	}
	var failedPkgs []string
	for pkg, failed := range s.pkgs {
		if failed {
			failedPkgs = append(failedPkgs, s.pkg(pkg))
		}
	}
	counts := fmt.Sprintf("%s passed, %d failed, %d skipped, in %s", plural(s.passed, "test"), len(s.failed), len(s.skipped), plural(len(s.pkgs), "package"))
	if status == 0 && len(s.failed) == 0 && len(failedPkgs) == 0 {
		fmt.Fprintln(s.out, "PASS:", counts)
		return 0
	}
	fmt.Fprintln(s.out, "FAIL:", counts)
	if len(s.failed) > 0 {
		fmt.Fprintf(s.out, "  failed: %s\n", strings.Join(s.failed, ", "))
	}
	if len(failedPkgs) > 0 {
		slices.Sort(failedPkgs)
		fmt.Fprintf(s.out, "  failed packages: %s\n", strings.Join(failedPkgs, " "))
	}
	return cmp.Or(status, 1)
}

// packages returns the distinct packages of sks, sorted.
func packages(sks []skipped) []string {
	var pkgs []string
	for _, sk := range sks {
		pkgs = append(pkgs, sk.pkg)
	}
	slices.Sort(pkgs)
	return slices.Compact(pkgs)
}

// plural returns "1 test", "2 tests".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
