package codecheck

import (
	"bytes"
	"go/format"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// root is the module's root, two levels up from this package.
const root = "../.."

// goTool runs the go command in the module's root and returns what it
// printed.
func goTool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestGofmt: every Go file is formatted as gofmt formats it.
func TestGofmt(t *testing.T) {
	t.Parallel()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go"):
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if formatted, err := format.Source(src); err != nil || !bytes.Equal(formatted, src) {
			t.Errorf("%s is not formatted as gofmt formats it (%v): run gofmt -w %s", path, err, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestVet: go vet finds nothing in any package.
func TestVet(t *testing.T) {
	t.Parallel()
	if out, err := goTool(t, "vet", "./..."); err != nil {
		t.Errorf("go vet ./...: %v\n%s", err, out)
	}
}

// TestModTidy: go.mod and go.sum say exactly what the code imports.
func TestModTidy(t *testing.T) {
	t.Parallel()
	if out, err := goTool(t, "mod", "tidy", "-diff"); err != nil {
		t.Errorf("go mod tidy -diff: %v (run go mod tidy and commit the result)\n%s", err, out)
	}
}

// TestStaticcheck: staticcheck, at a pinned version from the module proxy,
// finds nothing. Where the proxy cannot be reached (offline), it is
// skipped and says so. (govulncheck is not run: it needs the vulnerability
// database at vuln.go.dev, which CI cannot reach.)
func TestStaticcheck(t *testing.T) {
	t.Parallel()
	out, err := goTool(t, "run", "honnef.co/go/tools/cmd/staticcheck@v0.8.2", "./...")
	if err != nil && strings.Contains(out, "honnef.co/go/tools@v0.8.2") && !strings.Contains(out, ".go:") {
		t.Skipf("staticcheck could not be fetched (offline?): %s", out)
	}
	if err != nil {
		t.Errorf("staticcheck ./...: %v\n%s", err, out)
	}
}
