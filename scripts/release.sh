#!/usr/bin/env bash
# Builds the release binaries of clasp into dist/: static (CGO_ENABLED=0)
# binaries for linux and darwin on amd64 and arm64, each stamped with the
# version and commit (-ldflags -X, read by `clasp version` and /healthz), and
# dist/SHA256SUMS with the SHA-256 checksum of each (check with
# `cd dist && sha256sum -c SHA256SUMS`).
#
# The version is $VERSION when set, else `git describe --tags --dirty` (a tag
# such as v0.1.0, or v0.1.0-3-gabc1234 after it), else v0.0.0-<short commit>
# when there is no tag yet. The build is reproducible: -trimpath, no VCS
# stamping beyond the -X values, and a fixed build id.
#
# Usage: scripts/release.sh            # all four targets
#        TARGETS="linux/amd64" scripts/release.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.26.10}" # the toolchain go.mod pins
[ "$GOTOOLCHAIN" = local ] && export GOTOOLCHAIN=go1.26.10

commit=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	dirty=-dirty
else
	dirty=
fi
version=${VERSION:-$(git describe --tags --match 'v*' --dirty 2>/dev/null || echo "v0.0.0-$(git rev-parse --short=12 HEAD)$dirty")}
targets=${TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
pkg=github.com/clasp-dev/clasp
ldflags="-s -w -buildid= -X $pkg.version=$version -X $pkg.commit=$commit"

rm -rf dist
mkdir -p dist
for t in $targets; do
	os=${t%/*} arch=${t#*/}
	out=dist/clasp-$version-$os-$arch
	echo "build $out"
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$out" ./cmd/clasp
done
(cd dist && sha256sum clasp-* >SHA256SUMS)

# What each binary says it is: the native one runs `clasp version`; every
# one must hold the stamped version string (-X writes it into the binary's
# data; the build information does not record -ldflags under -trimpath, so
# it cannot be read back from there).
echo
for f in dist/clasp-*; do
	[ "${f##*/}" = SHA256SUMS ] && continue
	if ! LC_ALL=C grep -qaF -- "$version" "$f"; then
		echo "release: $f does not carry the version $version" >&2
		exit 1
	fi
	printf '%s: %s (%s)\n' "$f" "$version" "$(go version -m "$f" | sed -n 's/^[[:space:]]*build[[:space:]]*GOOS=//p')/$(go version -m "$f" | sed -n 's/^[[:space:]]*build[[:space:]]*GOARCH=//p')"
done
native=dist/clasp-$version-$(go env GOOS)-$(go env GOARCH)
if [ -x "$native" ]; then
	echo
	got=$("$native" version)
	echo "$got"
	case "$got" in
	"clasp $version "*) ;;
	*) echo "release: $native version says '$got', want clasp $version" >&2; exit 1 ;;
	esac
fi
echo
cat dist/SHA256SUMS
