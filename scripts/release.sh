#!/usr/bin/env bash
# Builds the release binaries of clasp into dist/: static (CGO_ENABLED=0)
# binaries for linux and darwin on amd64 and arm64, each stamped with the
# version and commit (-ldflags -X, read by `clasp version` and /healthz), the
# Python wheel and npm package of the clients in sdk/ with the same version,
# and dist/SHA256SUMS with the SHA-256 checksum of each (check with
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

# The clients in sdk/ are versioned with the server: the Python wheel and the
# npm package of a release carry its version (for a build that is not a tag,
# 0.0.0 with a development suffix naming the commit).
sdkversion=${version#v}
case "$sdkversion" in
*[!0-9.]*) pyversion="0.0.0.dev0+g${commit:0:12}"; npmversion="0.0.0-dev.${commit:0:12}" ;;
*) pyversion=$sdkversion; npmversion=$sdkversion ;;
esac
sdktmp=$(mktemp -d)
trap 'rm -rf "$sdktmp"' EXIT
cp -r sdk/python "$sdktmp/python"
sed -i "s/^version = \".*\"/version = \"$pyversion\"/" "$sdktmp/python/pyproject.toml"
sed -i "s/^NAME, DIST, VERSION = \(.*\), \".*\"$/NAME, DIST, VERSION = \1, \"$pyversion\"/" "$sdktmp/python/_build/clasp_build.py"
sed -i "s/^__version__ = \".*\"/__version__ = \"$pyversion\"/" "$sdktmp/python/clasp/__init__.py"
python3 -m pip wheel --quiet --no-index --no-deps --no-build-isolation -w dist "$sdktmp/python"
if command -v npm >/dev/null 2>&1; then
	cp -r sdk/typescript "$sdktmp/typescript"
	(cd "$sdktmp/typescript" && export CLASP_OPENAPI="$OLDPWD/internal/httpapi/openapi.json" && rm -rf node_modules dist && npm version --no-git-tag-version --allow-same-version "$npmversion" >/dev/null &&
		npm ci --no-audit --no-fund --loglevel=error && npm run --silent build && npm pack --silent --pack-destination "$OLDPWD/dist" >/dev/null)
else
	echo "release: npm not found: no TypeScript package in dist/" >&2
fi
(cd dist && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%P\n' | sort | xargs sha256sum >SHA256SUMS)
ls dist/*.whl dist/*.tgz 2>/dev/null

echo
cat dist/SHA256SUMS
