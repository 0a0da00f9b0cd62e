#!/usr/bin/env bash
# The project's test command (the README's second command, .ci/run, calls it). Expects Go 1.26 or newer on
# PATH (it fetches the pinned go1.26.10 through the module proxy); uses CLASP_TEST_POSTGRES_URL when set (.ci/run starts a throwaway
# PostgreSQL and sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
export GOTOOLCHAIN=go1.26.10 # the toolchain go.mod pins; the machine default is GOTOOLCHAIN=local

step() { printf '\n== %s\n' "$*"; }

step "go mod tidy -diff (go.mod lists exactly what the code imports)"
go mod tidy -diff

step "gofmt (the pinned toolchain's; lists files it would change)"
unformatted=$("$(go env GOROOT)/bin/gofmt" -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "$unformatted"; echo "gofmt would change the files above: run gofmt -w on them" >&2; exit 1; fi

step "go vet"
go vet ./...

step "the TypeScript client's API types match internal/httpapi/openapi.json (sdk/typescript/scripts/gen-types.mjs)"
if command -v node >/dev/null 2>&1; then
  node sdk/typescript/scripts/gen-types.mjs --check
elif [ -n "${CI:-}" ]; then
  echo "node is missing in CI: the TypeScript client's type check cannot run" >&2
  exit 1
else
  echo "node is missing: skipped"
fi

step "security scanners: govulncheck (offline database), staticcheck, gosec (scripts/scan.sh)"
timeout 20m scripts/scan.sh

step "unit, contract, scenario and end-to-end tests"
go test -count=1 -timeout 20m ./...

step "race detector on the store, HTTP and sweeper packages"
go test -count=1 -race -timeout 20m ./internal/store/... ./internal/httpapi/... ./internal/recovery/...

# Fuzz budgets are counts of executions, not durations: with a duration,
# Go 1.26's fuzz coordinator can report its own deadline as a failure
# ("context deadline exceeded", no failing input) when a starved worker is
# mid-call as the time runs out (golang/go#75804, fixed in Go 1.27). A count
# has no deadline to race; it is about 20 s of fuzzing on an idle machine,
# longer on a loaded one.
step "short fuzz of request decoding"
go test -run '^$' -fuzz '^FuzzDecodeJSON$' -fuzztime 25000x -fuzzminimizetime 2s ./internal/httpapi/
step "short fuzz of the whole HTTP handler"
go test -run '^$' -fuzz '^FuzzHandler$' -fuzztime 10000x -fuzzminimizetime 2s ./internal/httpapi/

# clasp verify: recorded histories checked for linearizability
# while replicas are killed and paused, database connections terminated and
# client connections delayed and dropped through a proxy. Exit 1 on a
# violation, an L7 break, a 5xx other than 503, or an undecided history
# (each issue's check normally takes seconds; 60 s is a 15x margin, so an
# undecided one is a regression of the checker, not noise). PostgreSQL is
# also restarted when $CLASP_TEST_PG_RESTART_CMD names a restart command.
step "clasp verify under faults, with blockers reopened and resolved: SQLite 30 s"
vdir=$(mktemp -d /tmp/clasp-verify-ci.XXXXXX) # kept when a run fails: the history is in $vdir/out
echo "verify files in $vdir"
go build -o "$vdir/clasp" ./cmd/clasp
vflags=(--duration 30s --clients 8 --issues 3 --check-timeout 60s --fail-undecided --out "$vdir/out")
"$vdir/clasp" verify --process --deps "${vflags[@]}"
if [ -n "${CLASP_TEST_POSTGRES_URL:-}" ]; then
  step "clasp verify under faults, with blockers reopened and resolved: PostgreSQL, 3 replicas, 30 s"
  "$vdir/clasp" verify --database-url "$CLASP_TEST_POSTGRES_URL" --replicas 3 --deps "${vflags[@]}"
elif [ -n "${CI:-}" ]; then
  echo "CLASP_TEST_POSTGRES_URL is not set in CI: the PostgreSQL verify cannot run" >&2
  exit 1
fi
# Failovers: a primary and a synchronous standby on loopback (scripts/pg-failover.sh);
# the primary is SIGKILLed mid-load, the standby promoted and the old primary
# re-seeded as the new standby, again about 4 s after the last failover ended; every acknowledged checkout
# must be in the promoted database and every history linearizable.
pgbin=""
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && pgbin="$d"; done
if [ -n "$pgbin" ]; then
  step "clasp verify with PostgreSQL failovers: primary + synchronous standby, 3 replicas, 30 s"
  fodir=$(mktemp -d /tmp/clasp-failover-ci.XXXXXX)
  trap 'scripts/pg-failover.sh stop "$fodir"' EXIT
  fourl=$(scripts/pg-failover.sh start "$fodir")
  "$vdir/clasp" verify --database-url "$fourl" --replicas 3 "${vflags[@]}" --db-restart-cmd '' \
    --failover-cmd "scripts/pg-failover.sh failover $fodir" --failover-every 4s
  scripts/pg-failover.sh stop "$fodir"
  trap - EXIT
elif [ -n "${CI:-}" ]; then
  echo "no PostgreSQL server binaries (initdb) in CI: the failover verify cannot run" >&2
  exit 1
fi
rm -rf "$vdir"

step "ok"
