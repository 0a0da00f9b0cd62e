#!/usr/bin/env bash
# The overhead of the Python and TypeScript clients per checkout+release
# cycle, next to raw HTTP from the same language: builds clasp, starts
# `clasp serve` on a fresh SQLite directory on loopback, files an issue for
# a fresh agent, and runs sdk/python/tests/bench.py and
# sdk/typescript/test/bench.mjs (built with npm ci and npm run build) with
# CYCLES cycles each (default 200). Prints one JSON line per client and the
# machine's load.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH" GOTOOLCHAIN="${GOTOOLCHAIN:-go1.26.10}"
cycles="${1:-200}"
tmp=$(mktemp -d /tmp/clasp-sdk-bench.XXXXXX)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
go build -o "$tmp/clasp" ./cmd/clasp
"$tmp/clasp" serve --listen 127.0.0.1:0 --data-dir "$tmp/data" >"$tmp/serve.out" 2>"$tmp/serve.log" &
pid=$!
until grep -q "clasp listening on" "$tmp/serve.out"; do
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log" >&2; exit 1; }
  sleep 0.1
done
export CLASP_URL=$(sed -n 's/^clasp listening on //p' "$tmp/serve.out")
export CLASP_TOKEN=$(cat "$tmp/data/board-token")
co=$("$tmp/clasp" company create bench --prefix BENCH --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
ag=$("$tmp/clasp" agent create bencher --company "$co" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
key=$("$tmp/clasp" agent key create "$ag" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
"$tmp/clasp" issue create "bench" --company "$co" --status todo >/dev/null
export CLASP_API_KEY="$key" SCN_ISSUE=BENCH-1
unset CLASP_TOKEN
python3 sdk/python/tests/bench.py "$cycles"
spec="$PWD/internal/httpapi/openapi.json"
cp -R sdk/typescript "$tmp/ts" && rm -rf "$tmp/ts/node_modules" "$tmp/ts/dist"
(cd "$tmp/ts" && npm ci --no-audit --no-fund --loglevel=error >/dev/null && CLASP_OPENAPI="$spec" npm run build >/dev/null)
node "$tmp/ts/test/bench.mjs" "$cycles"
uptime
