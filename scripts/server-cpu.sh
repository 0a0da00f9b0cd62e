#!/usr/bin/env bash
# The server's own CPU per 1,000 checkout+release cycles, measured apart
# from the load clients: `clasp bench`'s in-process figure counts the
# server and its HTTP clients together, so a cheaper client lowers it too.
#
# Usage: scripts/server-cpu.sh SERVER_BIN CLIENT_BIN [DATABASE_URL]
#   SERVER_BIN    the clasp binary whose `serve` is measured
#   CLIENT_BIN    the clasp binary whose `bench --server` drives it; keep it
#                 the same when comparing two servers
#   DATABASE_URL  postgres://... of an EMPTY database the server may migrate
#                 (it is left with clasp's schema); omitted: SQLite in a
#                 fresh temporary data directory
# Environment: CLIENTS (default 32), DURATION (default 10s).
#
# It starts `SERVER_BIN serve` on a free loopback port with the rate limits
# off (the bench's clients stand for agents on many machines), runs
# `CLIENT_BIN bench --server ... --workload cycle --no-raw` against it, and
# reads the server process's user+system CPU from /proc/PID/stat when the
# phase starts and when it ends (from the bench's progress lines), so that
# setup (company, agents, issues) is not counted. It prints one line:
# ops/s, errors, the server's CPU seconds per 1,000 cycles, and the load
# average at the start. Exit 1 if the bench failed. Linux only (/proc).
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
server=$1 client=$2 url=${3:-}
clients=${CLIENTS:-32} duration=${DURATION:-10s}

dir=$(mktemp -d "${TMPDIR:-/tmp}/clasp-server-cpu.XXXXXX")
spid=""
cleanup() {
	if [ -n "$spid" ]; then kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; fi
	rm -rf "$dir"
}
trap cleanup EXIT

args=(serve --data-dir "$dir/data" --listen 127.0.0.1:0 --rate-address -1 --rate-credential -1)
[ -n "$url" ] && args+=(--database-url "$url")
"$server" "${args[@]}" >"$dir/serve.log" 2>&1 &
spid=$!
addr=""
for _ in $(seq 300); do
	addr=$(sed -n 's/^clasp listening on \(http:[^ ]*\).*/\1/p' "$dir/serve.log" | head -1)
	[ -n "$addr" ] && break
	kill -0 "$spid" 2>/dev/null || { cat "$dir/serve.log" >&2; exit 1; }
	sleep 0.1
done
[ -n "$addr" ] || { echo "server-cpu: the server did not start listening in 30 s" >&2; cat "$dir/serve.log" >&2; exit 1; }

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$spid/stat"; }
load=$(cut -d' ' -f1 /proc/loadavg)

"$client" bench --server "$addr" --token-file "$dir/data/board-token" --workload cycle \
	--clients "$clients" --duration "$duration" --no-raw --json >"$dir/bench.json" 2>"$dir/bench.err" &
bpid=$!
# Written to a file, the bench's progress is one "running for" line when
# the phase starts and one summary line when it ends.
until grep -q "running for" "$dir/bench.err" 2>/dev/null; do
	kill -0 "$bpid" 2>/dev/null || break
	sleep 0.02
done
c0=$(cpu)
until grep -A1 "running for" "$dir/bench.err" 2>/dev/null | grep -q "ops/s"; do
	kill -0 "$bpid" 2>/dev/null || break
	sleep 0.02
done
c1=$(cpu)
rc=0
wait "$bpid" || rc=$?
if [ "$rc" -ne 0 ]; then
	cat "$dir/bench.err" >&2
	exit 1
fi

python3 - "$dir/bench.json" "$c0" "$c1" "$ticks" "$load" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = next(x for x in d["results"] if x["target"] == "http")
cpu = (float(sys.argv[3]) - float(sys.argv[2])) / float(sys.argv[4])
print(f"server CPU {cpu / r['ops'] * 1000:.3f} s per 1,000 cycles ({cpu:.2f} s over {r['ops']} cycles), "
      f"{r['opsPerSecond']:.0f} cycles/s, errors {r.get('errors', 0)}, load {sys.argv[5]} at the start")
PY
