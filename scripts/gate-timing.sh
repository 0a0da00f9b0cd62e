#!/usr/bin/env bash
# How long `clasp gate check` takes over a range of N stamped commits, each
# stamped with another issue held at epoch 1: git reads the range, and the
# server answers every stamp in one request (one statement).
#
# Usage: scripts/gate-timing.sh CLASP_BIN [DATABASE_URL]
#   DATABASE_URL  postgres://... of an EMPTY database the server may migrate;
#                 omitted: SQLite in a fresh temporary data directory
# Environment: N (default 1000, at most 1000: one request).
#
# It starts `CLASP_BIN serve` on a free loopback port, creates company GT,
# an agent with a run, N todo issues checked out by that run, a git
# repository of N commits (git fast-import) stamped Clasp-Issue: GT-i@1,
# and a gate token; then times `clasp gate check --range HEAD` three times
# and prints the times, the server's store and the load average.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
bin=$1 url=${2:-} n=${N:-1000}
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
args=(serve --data-dir "$dir/data" --listen 127.0.0.1:0 --rate-address -1 --rate-credential -1)
[ -n "$url" ] && args+=(--database-url "$url")
"$bin" "${args[@]}" >"$dir/serve.out" 2>"$dir/serve.err" &
pid=$!
for _ in $(seq 100); do
	base=$(sed -n 's/^clasp listening on //p' "$dir/serve.out")
	[ -n "$base" ] && break
	sleep 0.1
done
[ -n "$base" ] || { cat "$dir/serve.err" >&2; exit 1; }
board=$(cat "$dir/data/board-token")
api() { curl -sf -X "$1" "$base$2" -H "Authorization: Bearer $3" -H 'Content-Type: application/json' ${4:+-d "$4"}; }
co=$(api POST /api/companies "$board" '{"name":"Gate timing","issuePrefix":"GT"}' | jq -r .id)
ag=$(api POST "/api/companies/$co/agents" "$board" '{"name":"builder"}' | jq -r .id)
key=$(api POST "/api/agents/$ag/keys" "$board" '{}' | jq -r .token)
rt=$(api POST /api/agents/me/runs "$key" '{}' | jq -r .runToken)
for i in $(seq "$n"); do
	api POST "/api/companies/$co/issues" "$board" '{"title":"t","status":"todo"}' >/dev/null
	api POST "/api/issues/GT-$i/checkout" "$rt" "{\"agentId\":\"$ag\",\"expectedStatuses\":[\"todo\"]}" >/dev/null
done
git init -q -b main "$dir/repo"
{
	for i in $(seq "$n"); do
		msg=$(printf 'work on GT-%d\n\nClasp-Issue: GT-%d@1\n' "$i" "$i")
		printf 'commit refs/heads/main\ncommitter t <t@example.com> %d +0000\ndata %d\n%s\n' "$((1700000000 + i))" "${#msg}" "$msg"
	done
} | git -C "$dir/repo" fast-import --quiet
gt=$(api POST "/api/companies/$co/gate-tokens" "$board" '{"name":"timing"}' | jq -r .token)
store=sqlite; [ -n "$url" ] && store=postgres
echo "commits: $(git -C "$dir/repo" rev-list --count HEAD), store: $store"
for k in 1 2 3; do
	start=$(date +%s.%N)
	CLASP_URL=$base CLASP_TOKEN=$gt "$bin" gate check --repo "$dir/repo" --range HEAD
	end=$(date +%s.%N)
	echo "gate check $k: $(echo "$end - $start" | bc) s"
done
uptime
