#!/usr/bin/env bash
# The project's test command (the README's second command, .ci/run, calls it). Expects Go 1.26 on
# PATH; uses CLASP_TEST_POSTGRES_URL when set (.ci/run starts a throwaway
# PostgreSQL and sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

step "go vet"
go vet ./...

step "unit, contract, scenario and end-to-end tests"
go test -count=1 -timeout 20m ./...

step "race detector on the store, HTTP and sweeper packages"
go test -count=1 -race -timeout 20m ./internal/store/... ./internal/httpapi/... ./internal/recovery/...

step "short fuzz of request decoding"
go test -run '^$' -fuzz '^FuzzDecodeJSON$' -fuzztime 20s -fuzzminimizetime 2s ./internal/httpapi/
step "short fuzz of the whole HTTP handler"
go test -run '^$' -fuzz '^FuzzHandler$' -fuzztime 20s -fuzzminimizetime 2s ./internal/httpapi/

step "ok"
