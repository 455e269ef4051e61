// Package skedbin builds the sked command for tests that run it as a
// process (kill -9, SIGSTOP, several nodes).
package skedbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build builds the sked command into a temporary directory and returns the
// binary's path and a function that removes it.
func Build() (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "sked-bin")
	if err != nil {
		return "", nil, fmt.Errorf("build sked: %w", err)
	}
	path = filepath.Join(dir, "sked")
	if out, err := exec.Command("go", "build", "-o", path, "github.com/sked-dev/sked").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build sked: %v\n%s", err, out)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// Main builds the sked command into *bin, runs the tests and exits with
// their code; it is the whole of a TestMain.
func Main(m *testing.M, bin *string) {
	path, remove, err := Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = path
	code := m.Run()
	remove()
	os.Exit(code)
}
