#!/usr/bin/env bash
# Stress entry: runs the test packages that start processes, servers or
# timers (and both stores) many times with -race and -cpu 1,2 while a
# bounded CPU burner keeps the machine busy, then the unmanaged and the
# managed swarm many times, and prints how many runs failed and which tests.
# A test that fails here is a defect to fix at its cause (never a retry or a
# longer sleep).
#
# Usage: scripts/stress.sh [--reps N] [--swarm-reps N] [--burners N]
#                          [--max-time DURATION] [--packages "PKG ..."]
#                          [--no-swarm] [--no-tests] [--keep]
# Each flag has an environment default: STRESS_REPS (20 repetitions of each
# test package), STRESS_SWARM_REPS (25 runs of each swarm mode),
# STRESS_BURNERS (CPU burner processes, default the number of CPUs),
# STRESS_MAX_TIME (overall budget, default 8h: no run starts after it and
# the one in flight is stopped), STRESS_PACKAGES (space-separated package
# patterns). Needs CLASP_TEST_POSTGRES_URL (the PostgreSQL store's tests;
# without it they would skip, so the script refuses to start).
#
# Exit status: 0 every run passed; 1 some run failed; 2 bad usage or setup;
# 3 no failure, but the time budget ended before every run was done.
# Logs of failed runs are kept (their directory is printed); everything
# else, the burners and the built binary included, is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
export GOTOOLCHAIN=go1.26.10 # the toolchain go.mod pins; the machine default is GOTOOLCHAIN=local

reps=${STRESS_REPS:-20}
swarm_reps=${STRESS_SWARM_REPS:-25}
burners=${STRESS_BURNERS:-$(nproc)}
max_time=${STRESS_MAX_TIME:-8h}
packages=${STRESS_PACKAGES:-"./internal/recovery ./internal/heartbeat ./internal/httpapi ./internal/store/sqlite ./internal/store/postgres ./internal/cli ./internal/crashtest ./internal/server ./internal/securitytest ./internal/bench ./internal/mcp ./internal/verify ./internal/swarm ./client"}
run_tests=1 run_swarm=1 keep=0

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --swarm-reps) swarm_reps=$2; shift 2 ;;
    --burners) burners=$2; shift 2 ;;
    --max-time) max_time=$2; shift 2 ;;
    --packages) packages=$2; shift 2 ;;
    --no-swarm) run_swarm=0; shift ;;
    --no-tests) run_tests=0; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) usage ;;
    *) echo "stress: unknown argument $1" >&2; usage ;;
  esac
done
for v in "$reps" "$swarm_reps" "$burners"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "stress: $v is not a count" >&2; exit 2; }
done
# The budget in seconds: a number with an optional s, m or h.
case "$max_time" in
  *h) budget=$(( ${max_time%h} * 3600 )) ;;
  *m) budget=$(( ${max_time%m} * 60 )) ;;
  *s) budget=${max_time%s} ;;
  *) budget=$max_time ;;
esac
[[ "$budget" =~ ^[0-9]+$ ]] && [ "$budget" -gt 0 ] || { echo "stress: --max-time $max_time: want e.g. 90m, 8h, 600s" >&2; exit 2; }
if [ "$run_tests" = 1 ] && [ -z "${CLASP_TEST_POSTGRES_URL:-}" ]; then
  echo "stress: CLASP_TEST_POSTGRES_URL is not set: the PostgreSQL store's tests would skip (start one as .ci/run does)" >&2
  exit 2
fi

work=$(mktemp -d /tmp/clasp-stress.XXXXXX)
failed_dir="$work/failed"
mkdir -p "$failed_dir"
burner_pids=()
child="" # the run in flight: the leader of its own process group
cleanup() {
  local pid
  if [ -n "$child" ]; then
    kill -TERM -- "-$child" 2>/dev/null || true
    sleep 2
    kill -KILL -- "-$child" 2>/dev/null || true
  fi
  for pid in "${burner_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${burner_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$keep" = 0 ] && [ -z "$(ls -A "$failed_dir")" ]; then
    rm -rf "$work"
  else
    rm -rf "$work/bin" "$work/tree" "$work/run"
    echo "stress: logs kept in $work" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
deadline=$(( start + budget ))
left() { echo $(( deadline - $(date +%s) )); }
log() { printf 'stress: %s\n' "$*" >&2; }

# The CPU burners: one busy process per slot, each stopped by the budget
# even if this script were killed without its trap.
for _ in $(seq 1 "$burners"); do
  timeout "$budget" sha256sum /dev/zero >/dev/null 2>&1 &
  burner_pids+=($!)
done
log "$burners CPU burner(s) running beside the runs; budget ${max_time}"

runs=0 failures=0 skipped=0
summary="$work/summary"
failed_tests="$work/failed-tests" # "package test" per failed test of a failed run
: >"$summary"
: >"$failed_tests"

# run_child LOG CMD...: runs CMD in its own process group (so that an
# interrupted script stops all of it, test binaries and agents included),
# output to LOG; returns its exit status.
run_child() {
  local logf=$1 status=0
  shift
  setsid "$@" >"$logf" 2>&1 &
  child=$!
  wait "$child" || status=$?
  child=""
  return "$status"
}

# record KIND NAME REP LOG STATUS: counts one run; a failed run keeps its log
# and adds its failing tests (or the reason) to the summary.
record() {
  local kind=$1 name=$2 rep=$3 logf=$4 status=$5 what
  runs=$((runs + 1))
  if [ "$status" = 0 ]; then
    rm -f "$logf"
    return
  fi
  failures=$((failures + 1))
  local kept="$failed_dir/$(echo "$kind-${name#./}" | tr '/' '_')-rep$rep.log"
  mv "$logf" "$kept"
  if [ "$kind" = test ]; then
    grep -E '^\s*--- FAIL: ' "$kept" | sed -E "s|^\s*--- FAIL: ([^ ]+).*|$name \1|" | sort -u >>"$failed_tests" || true
    what=$(grep -E '^\s*--- FAIL: ' "$kept" | sed -E 's/^\s*--- FAIL: ([^ ]+).*/\1/' | sort -u | tr '\n' ' ' || true)
    if [ -z "$what" ]; then
      what=$(grep -m1 -E '^(panic:|fatal error:|.*test timed out|FAIL.*\[build failed\]|# )' "$kept" || echo "exit $status")
    fi
  else
    what=$(grep -m3 -E 'violation|TIMED OUT|agent failure|Error|error' "$kept" | tr '\n' ' ' | cut -c1-300 || true)
    [ -n "$what" ] || what="exit $status"
  fi
  printf '%s %s rep %s: %s\n' "$kind" "$name" "$rep" "$what" >>"$summary"
  log "FAILED $kind $name rep $rep: $what (log $kept)"
}

# --- go test, -race, -cpu 1,2, under the burners -----------------------------
if [ "$run_tests" = 1 ]; then
  for rep in $(seq 1 "$reps"); do
    for pkg in $packages; do
      t=$(left)
      if [ "$t" -le 60 ]; then skipped=$((skipped + 1)); continue; fi
      # The package's own deadline stays inside the budget (go test then
      # prints the stuck tests' stacks).
      to=$(( t - 30 < 1800 ? t - 30 : 1800 ))
      logf="$work/test.log"
      status=0
      t0=$(date +%s)
      run_child "$logf" go test -race -cpu 1,2 -count 1 -timeout "${to}s" "$pkg" || status=$?
      if [ "$status" != 0 ] && [ "$to" -lt 1800 ] && grep -q '^panic: test timed out' "$logf"; then
        # Stopped by what was left of the budget, not by its own deadline.
        log "rep $rep/$reps $pkg: stopped at the end of the time budget (not counted)"
        skipped=$((skipped + 1))
        rm -f "$logf"
        continue
      fi
      log "rep $rep/$reps $pkg: $( [ "$status" = 0 ] && echo ok || echo FAIL ) ($(( $(date +%s) - t0 ))s, load $(cut -d' ' -f1 /proc/loadavg))"
      record test "$pkg" "$rep" "$logf" "$status"
    done
  done
fi

# --- the swarms: unmanaged and managed, as the swarm tests run them ----------
if [ "$run_swarm" = 1 ] && [ "$swarm_reps" -gt 0 ]; then
  mkdir -p "$work/bin" "$work/tree"
  go build -o "$work/bin/clasp" ./cmd/clasp
  # A tree of 60 files of random content for the swarm to file issues for.
  for i in $(seq 0 59); do
    d="$work/tree/d$((i % 5))/e$((i % 3))"
    mkdir -p "$d"
    head -c $(( 1 + i * 67 % 4096 )) /dev/urandom >"$d/f$i.bin"
  done
  unmanaged=(--dir "$work/tree" --agents 4 --kill-rate 0.3 --slow 20ms --lease-ttl 1s --sweep-interval 200ms --timeout 4m)
  managed=(--managed --dir "$work/tree" --max-files 20 --agents 3 --kill-rate 0.3 --lease-ttl 2s --sweep-interval 200ms --timeout 4m)
  for rep in $(seq 1 "$swarm_reps"); do
    for mode in unmanaged managed; do
      t=$(left)
      if [ "$t" -le 300 ]; then skipped=$((skipped + 1)); continue; fi
      if [ "$mode" = managed ]; then args=("${managed[@]}"); else args=("${unmanaged[@]}"); fi
      logf="$work/swarm.log"
      mkdir -p "$work/run"
      status=0
      t0=$(date +%s)
      # The swarm stops itself after --timeout; the outer timeout is a
      # backstop (SIGTERM lets it stop its server and agents).
      run_child "$logf" timeout -k 30s 300s "$work/bin/clasp" swarm "${args[@]}" --data-dir "$work/run/data" || status=$?
      log "swarm $mode rep $rep/$swarm_reps: $( [ "$status" = 0 ] && echo ok || echo FAIL ) ($(grep -m1 -E '^  issues ' "$logf" | sed 's/^ *//'); $(( $(date +%s) - t0 ))s)"
      record swarm "$mode" "$rep" "$logf" "$status"
      if [ "$status" != 0 ] && [ -d "$work/run/data" ]; then
        mv "$work/run/data" "$failed_dir/swarm-$mode-rep$rep-data" # the database and the agents' logs
      fi
      rm -rf "$work/run"
    done
  done
fi

# --- summary --------------------------------------------------------------
elapsed=$(( $(date +%s) - start ))
echo
echo "stress summary: $runs runs, $failures failed, $skipped not run (time budget), $((elapsed / 60))m$((elapsed % 60))s"
echo "  test packages: $( [ "$run_tests" = 1 ] && echo "$reps repetition(s) of: $packages (-race -cpu 1,2)" || echo "not run" )"
echo "  swarms:        $( [ "$run_swarm" = 1 ] && echo "$swarm_reps run(s) each of unmanaged and managed" || echo "not run" )"
echo "  burners:       $burners"
if [ "$failures" -gt 0 ]; then
  echo "failed runs (kind, package or mode, repetition: failing tests or reason):"
  sed 's/^/  /' "$summary"
  if [ -s "$failed_tests" ]; then
    echo "failing tests, by how many runs they failed in:"
    sort "$failed_tests" | uniq -c | sort -rn | sed 's/^/  /'
  fi
  exit 1
fi
[ "$skipped" = 0 ] || exit 3
exit 0
