// Package buildinfo says which sked this is: its version, the commit it was
// built from, that commit's date and the Go version. `sked version`, the
// sked_build_info metric and the OpenAPI document's info.version all read
// it here.
//
// The values come from the module's build information
// (runtime/debug.ReadBuildInfo): `go install github.com/sked-dev/sked@v1.2.0`
// records v1.2.0; a build inside a git clone records a pseudo-version, the
// commit and its date; a program that embeds sked reports the version of the
// sked module it requires. A release build stamps them instead, and a stamp
// wins over the build information:
//
//	go build -ldflags "-X github.com/sked-dev/sked/internal/buildinfo.version=v1.2.0
//	    -X github.com/sked-dev/sked/internal/buildinfo.commit=<sha>
//	    -X github.com/sked-dev/sked/internal/buildinfo.date=2026-11-30T10:27:10Z"
//
// scripts/build.sh does that from git.
package buildinfo

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// modulePath is sked's module, looked up among the dependencies when sked
// is embedded in another program.
const modulePath = "github.com/sked-dev/sked"

// Stamped by release builds with -ldflags -X (see the package doc); empty
// means "read the build information".
var version, commit, date string

// Info is which sked a binary is.
type Info struct {
	Version   string // "v1.2.0", a Go pseudo-version, or "dev" when unknown
	Commit    string // the VCS revision; empty when unknown
	Date      string // the commit's time, RFC 3339; empty when unknown
	GoVersion string // the toolchain that built the binary, e.g. "go1.26.8"
}

// Read returns this binary's Info: the stamped values where there are any,
// else the build information's.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return merge(Info{Version: version, Commit: commit, Date: date}, bi)
}

// merge fills the fields stamp leaves empty from bi (which may be nil).
func merge(stamp Info, bi *debug.BuildInfo) Info {
	var found Info
	if bi != nil {
		found.GoVersion = bi.GoVersion
		if bi.Main.Path == modulePath {
			found.Version = bi.Main.Version
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					found.Commit = s.Value
				case "vcs.time":
					found.Date = s.Value
				}
			}
		} else if m := dependency(bi); m != nil {
			found.Version = m.Version
		}
	}
	if found.Version == "(devel)" { // built outside a module version and VCS
		found.Version = ""
	}
	return Info{
		Version:   cmp.Or(stamp.Version, found.Version, "dev"),
		Commit:    cmp.Or(stamp.Commit, found.Commit),
		Date:      cmp.Or(stamp.Date, found.Date),
		GoVersion: cmp.Or(found.GoVersion, runtime.Version()),
	}
}

// dependency returns the sked module among bi's dependencies, following a
// replace directive; nil when sked is not one of them.
func dependency(bi *debug.BuildInfo) *debug.Module {
	for _, m := range bi.Deps {
		if m.Path == modulePath {
			if m.Replace != nil {
				return m.Replace
			}
			return m
		}
	}
	return nil
}

// String is what `sked version` prints, on one line:
//
//	sked v1.2.0 (commit 7b7448a902ce, 2026-11-30T10:27:10Z) go1.26.8 linux/amd64
//
// Unknown parts are left out.
func (i Info) String() string {
	var from []string
	if i.Commit != "" {
		from = append(from, "commit "+i.Commit[:min(len(i.Commit), 12)])
	}
	if i.Date != "" {
		from = append(from, i.Date)
	}
	s := "sked " + i.Version
	if len(from) > 0 {
		s += " (" + strings.Join(from, ", ") + ")"
	}
	return fmt.Sprintf("%s %s %s/%s", s, i.GoVersion, runtime.GOOS, runtime.GOARCH)
}
