#!/bin/sh
# Build one static sked binary, stamped with its version, commit and commit
# date (read by internal/buildinfo: `sked version`, the sked_build_info
# metric, /openapi.json), with flags under which the same source and Go
# toolchain give the same bytes wherever they are built: no cgo, no file
# system paths (-trimpath), no VCS status of the directory (-buildvcs=false;
# the stamps say what the VCS would), no symbol tables (-s -w).
#
#   scripts/build.sh OUTPUT
#   GOOS=linux GOARCH=arm GOARM=7 VERSION=v1.2.0 scripts/build.sh dist/sked
#
# GOOS, GOARCH and GOARM choose the target (default: this machine). VERSION,
# COMMIT and DATE default to what git says of the checkout (git describe,
# the HEAD commit, its commit time in UTC); outside a git checkout, such as
# a Docker build context, what is not given is left to the module's build
# information.
set -eu

out=${1:?usage: scripts/build.sh OUTPUT}
case $out in
/*) ;;
*) out=$PWD/$out ;;
esac
cd "$(dirname "$0")/.."

if git rev-parse --git-dir >/dev/null 2>&1; then
	: "${VERSION:=$(git describe --tags --always --dirty)}"
	: "${COMMIT:=$(git rev-parse HEAD)}"
	: "${DATE:=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)}"
fi

pkg=github.com/sked-dev/sked/internal/buildinfo
CGO_ENABLED=0 exec go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X $pkg.version=${VERSION:-} -X $pkg.commit=${COMMIT:-} -X $pkg.date=${DATE:-}" \
	-o "$out" .
