#!/bin/sh
# Build the release into dist/: static sked binaries for Linux on amd64,
# arm64 and 32-bit ARMv7 (a Raspberry Pi on a 32-bit system), and macOS on
# Apple silicon, each built by scripts/build.sh with the same stamps, and
# SHA256SUMS over them.
#
#   scripts/release.sh                    # version from git describe
#   VERSION=v1.2.0 scripts/release.sh
#
# Check a download with: sha256sum --ignore-missing -c SHA256SUMS
set -eu
cd "$(dirname "$0")/.."

# Stamp every binary alike, even if a commit lands while this runs.
VERSION=${VERSION:-$(git describe --tags --always --dirty)}
COMMIT=${COMMIT:-$(git rev-parse HEAD)}
DATE=${DATE:-$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)}
export VERSION COMMIT DATE

rm -rf dist
mkdir dist
for target in linux/amd64 linux/arm64 linux/arm/7 darwin/arm64; do
	IFS=/ read -r goos goarch goarm <<TARGET
$target
TARGET
	name=sked-$goos-$goarch${goarm:+v$goarm}
	GOOS=$goos GOARCH=$goarch GOARM=$goarm scripts/build.sh "dist/$name"
	echo "built dist/$name"
done

cd dist
if command -v sha256sum >/dev/null; then
	sha256sum sked-* >SHA256SUMS
else
	shasum -a 256 sked-* >SHA256SUMS # macOS
fi
cat SHA256SUMS
