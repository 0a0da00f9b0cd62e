#!/usr/bin/env bash
# The security scanners (scripts/test.sh runs this; run it alone as well):
#   govulncheck  against the Go vulnerability database golang.org/x/vulndb at
#                the version tools/go.mod pins, fetched through the module
#                proxy like any module and indexed offline with that module's
#                own cmd/indexdb into the layout `govulncheck -db file://DIR`
#                reads (DIR/index/{db,modules,vulns}.json and DIR/ID/<id>.json);
#   staticcheck  all of its default checks;
#   gosec        all rules, on non-test code.
# The three tools are pinned in tools/go.mod (a module of its own, so that
# clasp's go.mod does not carry their dependencies). Exit 1 on any finding:
# a finding is fixed, or carries a justification where it is reported
# (`//lint:ignore CHECK reason` for staticcheck, `#nosec RULE -- reason` for
# gosec). Each step prints what it found.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
# Modules (the scanners, the vulnerability database, the toolchain) come only
# through the module proxy: a ",direct" fallback to version control is dropped.
GOPROXY=$(GOTOOLCHAIN=local go env GOPROXY | sed -E 's/[,|]direct$//')
case "$GOPROXY" in ""|direct|off) echo "scan: GOPROXY names no module proxy" >&2; exit 1 ;; esac
export GOPROXY
export GOTOOLCHAIN=go1.26.10 # the toolchain go.mod pins; the machine default is GOTOOLCHAIN=local

work=$(mktemp -d /tmp/clasp-scan.XXXXXX)
trap 'rm -rf "$work"' EXIT

step() { printf '\n== %s\n' "$*"; }

step "build the pinned scanners (tools/go.mod; about a minute idle, several on a busy machine, silent meanwhile)"
# tools/go.sum must be what go mod tidy writes, like the main module's.
(cd tools && go mod tidy -diff) || { echo "scan: tools/go.mod or tools/go.sum is not tidy: run (cd tools && go mod tidy)" >&2; exit 1; }
(cd tools && go build -o "$work/bin/" \
  golang.org/x/vuln/cmd/govulncheck \
  honnef.co/go/tools/cmd/staticcheck \
  github.com/securego/gosec/v2/cmd/gosec \
  golang.org/x/vulndb/cmd/indexdb)
vulndb_src=$(cd tools && go list -m -f '{{.Dir}}' golang.org/x/vulndb)
echo "vulnerability database: golang.org/x/vulndb $(cd tools && go list -m -f '{{.Version}}' golang.org/x/vulndb)"

step "index the vulnerability database offline"
"$work/bin/indexdb" -vulns "$vulndb_src/data/osv" -out "$work/vulndb"
echo "$(ls "$work/vulndb/ID" | wc -l) entries"

step "govulncheck (every package and test, against the offline database; a few minutes, silent meanwhile)"
"$work/bin/govulncheck" -db "file://$work/vulndb" -test ./...

step "staticcheck"
"$work/bin/staticcheck" -tests ./...

step "gosec"
# Non-test code (gosec's default). Every finding is fixed or carries a
# `#nosec RULE -- reason` at its site; any other finding fails the scan.
if ! "$work/bin/gosec" -quiet -fmt text ./... > "$work/gosec.txt" 2>&1; then
  sed 's/\x1b\[[0-9;]*m//g' "$work/gosec.txt"
  echo "gosec: findings above (fix each, or justify it at its site with #nosec RULE -- reason)" >&2
  exit 1
fi
echo "gosec: no findings"

step "scan ok"
