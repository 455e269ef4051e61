package buildinfo

import (
	debugbuildinfo "debug/buildinfo"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestMerge(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "7b7448a902ceba24883f584ab7953e1eaaf44841"},
		{Key: "vcs.time", Value: "2026-11-30T10:27:10Z"},
	}
	sked := debug.Module{Path: modulePath, Version: "v1.2.0"}
	for _, c := range []struct {
		name  string
		stamp Info
		bi    *debug.BuildInfo
		want  Info
	}{
		{"NoBuildInfo", Info{}, nil,
			Info{Version: "dev", GoVersion: runtime.Version()}},
		{"Devel", Info{}, &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: modulePath, Version: "(devel)"}},
			Info{Version: "dev", GoVersion: "go1.26.8"}},
		{"Installed", Info{}, &debug.BuildInfo{GoVersion: "go1.26.8", Main: sked},
			Info{Version: "v1.2.0", GoVersion: "go1.26.8"}},
		{"GitClone", Info{}, &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: modulePath, Version: "v0.0.0-20261130102710-7b7448a902ce"}, Settings: vcs},
			Info{Version: "v0.0.0-20261130102710-7b7448a902ce", Commit: "7b7448a902ceba24883f584ab7953e1eaaf44841",
				Date: "2026-11-30T10:27:10Z", GoVersion: "go1.26.8"}},
		// Embedded in another program: sked's version from its requirement;
		// the program's own commit is not sked's.
		{"Embedded", Info{}, &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "example.com/app", Version: "(devel)"}, Settings: vcs,
			Deps: []*debug.Module{{Path: "example.com/lib", Version: "v0.1.0"}, &sked}},
			Info{Version: "v1.2.0", GoVersion: "go1.26.8"}},
		{"EmbeddedReplaced", Info{}, &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.2.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.2.1"}}}},
			Info{Version: "v1.2.1", GoVersion: "go1.26.8"}},
		{"EmbeddedWithoutSked", Info{}, &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "example.com/app", Version: "v3.0.0"}},
			Info{Version: "dev", GoVersion: "go1.26.8"}},
		{"StampWins", Info{Version: "v2.0.0", Commit: "abc", Date: "2026-12-01T00:00:00Z"},
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: sked, Settings: vcs},
			Info{Version: "v2.0.0", Commit: "abc", Date: "2026-12-01T00:00:00Z", GoVersion: "go1.26.8"}},
		{"StampVersionOnly", Info{Version: "v2.0.0"},
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: sked, Settings: vcs},
			Info{Version: "v2.0.0", Commit: "7b7448a902ceba24883f584ab7953e1eaaf44841", Date: "2026-11-30T10:27:10Z", GoVersion: "go1.26.8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := merge(c.stamp, c.bi); got != c.want {
				t.Errorf("merge = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestInfo_String(t *testing.T) {
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH
	for _, c := range []struct {
		info Info
		want string
	}{
		{Info{Version: "v1.2.0", Commit: "7b7448a902ceba24883f584ab7953e1eaaf44841", Date: "2026-11-30T10:27:10Z", GoVersion: "go1.26.8"},
			"sked v1.2.0 (commit 7b7448a902ce, 2026-11-30T10:27:10Z) go1.26.8" + platform},
		{Info{Version: "v1.2.0", Commit: "abc", GoVersion: "go1.26.8"}, "sked v1.2.0 (commit abc) go1.26.8" + platform},
		{Info{Version: "dev", GoVersion: "go1.26.8"}, "sked dev go1.26.8" + platform},
	} {
		if got := c.info.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}

// TestBuildScript builds sked with scripts/build.sh, as the release and the
// image do, and checks that the binary is static and trimmed and that
// `sked version` and `sked --version` print the stamps it was given (a
// wrong -X path would silently stamp nothing).
func TestBuildScript(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sked")
	build := exec.Command("sh", "../../scripts/build.sh", bin)
	build.Env = append(build.Environ(), "VERSION=v9.8.7-test", "COMMIT=0123456789abcdef0123", "DATE=2026-12-24T18:00:00Z")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build.sh: %v\n%s", err, out)
	}
	bi, err := debugbuildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings CGO_ENABLED=%q -trimpath=%q, want 0 and true", settings["CGO_ENABLED"], settings["-trimpath"])
	}
	want := "sked v9.8.7-test (commit 0123456789ab, 2026-12-24T18:00:00Z) " + bi.GoVersion
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), want+" ") {
			t.Errorf("sked %s: %v\n%s\nwant %q", arg, err, out, want+" …")
		}
	}
}
