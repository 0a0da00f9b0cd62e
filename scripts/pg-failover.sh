#!/usr/bin/env bash
# A PostgreSQL primary with a streaming synchronous standby on loopback, for
# failover tests (`clasp verify --failover-cmd`, CI):
#
#   scripts/pg-failover.sh start DIR     two clusters in DIR/a and DIR/b on free
#                                        ports: a primary and a standby made with
#                                        pg_basebackup -R, streaming, synchronous
#                                        (synchronous_standby_names='*',
#                                        synchronous_commit=on); prints the
#                                        multi-host URL (also in DIR/url)
#   scripts/pg-failover.sh failover DIR  SIGKILLs every process of the primary
#                                        (a host that died), promotes the standby
#                                        (pg_ctl promote), then re-seeds the old
#                                        primary's directory from the new primary
#                                        (pg_basebackup -R) as its synchronous
#                                        standby, ready for the next failover;
#                                        prints killed_at_unix_ns=N (the kill)
#   scripts/pg-failover.sh restart DIR   restarts the primary in place (-m immediate)
#                                        (`clasp verify --db-restart-cmd`)
#   scripts/pg-failover.sh stop DIR      stops both clusters and removes DIR
#
# The URL names both hosts with target_session_attrs=read-write, so a client
# connects to whichever is the primary. Between the promotion and the moment
# the re-seeded standby has caught up, the new primary runs alone
# (synchronous_standby_names='', as Patroni does without synchronous_mode_strict):
# commits acknowledged then are on one server only, and `failover` returns only
# once the standby is streaming synchronously and has replayed everything, so
# the next failover loses nothing acknowledged. As root the clusters run as user
# claspci (initdb refuses root), like .ci/run.
set -Eeuo pipefail

pgbin=""
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && pgbin="$d"; done
[ -n "$pgbin" ] || { echo "pg-failover: no PostgreSQL (initdb) under /usr/lib/postgresql" >&2; exit 1; }

pguser=$(id -un)
runpg() { "$@"; }
if [ "$(id -u)" = 0 ]; then
  pguser=claspci
  id "$pguser" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$pguser"
  runpg() { runuser -u "$pguser" -- "$@"; }
fi

log() { printf '[pg-failover %s] %s\n' "$(date -u +%H:%M:%S.%3N)" "$*" >&2; }

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# port NODE: the node's port (fixed at start, kept across re-seeds).
port() { cat "$dir/$1.port"; }

# pgctl NODE ARGS...: pg_ctl on the node's data directory, on its own port and socket directory.
pgstart() {
  runpg "$pgbin/pg_ctl" -D "$dir/$1" -l "$dir/$1.log" -w -t 60 \
    -o "-p $(port "$1") -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
}

psql_on() { # psql_on NODE SQL
  runpg "$pgbin/psql" -X -q -At -h 127.0.0.1 -p "$(port "$1")" -U clasp -d postgres -v ON_ERROR_STOP=1 -c "$2"
}

# waitdead PID...: returns once every PID has exited (gone, or a zombie
# that only its parent's wait still holds); fails after 10 s.
waitdead() {
  local p i st
  for p in "$@"; do
    for i in $(seq 1 100); do
      st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || true)
      [ -z "$st" ] || [ "$st" = Z ] && break
      sleep 0.1
    done
    [ -z "$st" ] || [ "$st" = Z ] || { log "process $p still alive (state $st) 10 s after SIGKILL"; return 1; }
  done
}

other() { if [ "$1" = a ]; then echo b; else echo a; fi; }

# seed STANDBY FROM: a fresh standby of FROM in STANDBY's directory, started
# and streaming; then FROM waits for it synchronously, and seed returns
# once the standby has replayed all of FROM's WAL written before that.
seed() {
  local sb=$1 from=$2
  rm -rf "${dir:?}/$sb"
  runpg "$pgbin/pg_basebackup" -h 127.0.0.1 -p "$(port "$from")" -U clasp -D "$dir/$sb" -R -X stream -c fast \
    -d "application_name=clasp_standby_$sb"
  pgstart "$sb"
  local i
  for i in $(seq 1 600); do
    [ "$(psql_on "$from" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" -ge 1 ] && break
    sleep 0.1
  done
  psql_on "$from" "ALTER SYSTEM SET synchronous_standby_names = '*'"
  psql_on "$from" "SELECT pg_reload_conf()" >/dev/null
  local lsn
  lsn=$(psql_on "$from" "SELECT pg_current_wal_lsn()")
  for i in $(seq 1 600); do
    [ "$(psql_on "$from" "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync' AND replay_lsn >= '$lsn'")" -ge 1 ] && return 0
    sleep 0.1
  done
  log "standby $sb did not catch up with $from within 60 s"
  return 1
}

# A failing step names itself on stderr (clasp verify reports the end of it).
trap 'log "failed: line $LINENO: $BASH_COMMAND (exit $?)"' ERR

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|failover|restart|stop DIR" >&2; exit 2; }

case "$cmd" in
start)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  chown "$pguser" "$dir"
  chmod 0755 "$dir"
  freeport >"$dir/a.port"
  freeport >"$dir/b.port"
  runpg "$pgbin/initdb" -D "$dir/a" -U clasp --auth=trust -E UTF8 >/dev/null
  pgstart a
  echo a >"$dir/primary"
  seed b a
  echo "postgres://clasp@127.0.0.1:$(port a),127.0.0.1:$(port b)/postgres?sslmode=disable&target_session_attrs=read-write" >"$dir/url"
  log "primary a on $(port a), synchronous standby b on $(port b)"
  cat "$dir/url"
  ;;
failover)
  dir=$(cd "$dir" && pwd)
  old=$(cat "$dir/primary")
  new=$(other "$old")
  pid=$(head -1 "$dir/$old/postmaster.pid")
  # The whole server dies at once, as with its host: the postmaster is
  # stopped first so that it forks nothing more, then it and every child die.
  kill -STOP "$pid"
  children=$(pgrep -P "$pid" || true)
  # shellcheck disable=SC2086 # one pid per word
  kill -KILL "$pid" $children
  # When the primary died, for the caller (clasp verify measures from it).
  echo "killed_at_unix_ns=$(date +%s%N)"
  log "SIGKILLed primary $old (postmaster $pid and $(echo $children | wc -w) children)"
  # shellcheck disable=SC2086 # one pid per word
  waitdead "$pid" $children
  runpg "$pgbin/pg_ctl" -D "$dir/$new" -w -t 60 promote >/dev/null
  # Alone until the re-seeded standby is back: commits must not wait for it.
  psql_on "$new" "ALTER SYSTEM SET synchronous_standby_names = ''"
  psql_on "$new" "SELECT pg_reload_conf()" >/dev/null
  echo "$new" >"$dir/primary"
  log "promoted $new; re-seeding $old as its standby"
  # A SIGKILLed postmaster leaves its lock files behind; the re-seed below
  # replaces the data directory (postmaster.pid) but the socket's lock file
  # in the shared socket directory names the dead postmaster's pid, and a
  # server started while that pid still exists (a zombie not yet reaped by
  # init) refuses to start. waitdead proved the process dead: its files go.
  rm -f "$dir/$old/postmaster.pid" "$dir/.s.PGSQL.$(port "$old")" "$dir/.s.PGSQL.$(port "$old").lock"
  seed "$old" "$new"
  log "failover done: primary $new, synchronous standby $old"
  ;;
restart)
  # The primary restarted in place (-m immediate: a crash and recovery), its standby kept.
  dir=$(cd "$dir" && pwd)
  p=$(cat "$dir/primary")
  runpg "$pgbin/pg_ctl" -D "$dir/$p" -m immediate -w -t 60 stop >/dev/null
  pgstart "$p"
  log "restarted primary $p"
  ;;
stop)
  [ -d "$dir" ] || exit 0
  for n in a b; do
    [ -f "$dir/$n/postmaster.pid" ] && runpg "$pgbin/pg_ctl" -D "$dir/$n" -m immediate -w stop >/dev/null 2>&1 || true
  done
  rm -rf "${dir:?}"
  ;;
*)
  echo "usage: $0 start|failover|restart|stop DIR" >&2
  exit 2
  ;;
esac
