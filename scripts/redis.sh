#!/usr/bin/env bash
# A local Redis for tests and users: Debian's redis-server on a free loopback port.
#
#   scripts/redis.sh start [-dir DIR]   start it (installing the redis-server package when
#                                       missing); print host:port as the last line of stdout
#   scripts/redis.sh stop [-dir DIR]    stop exactly the process start recorded in DIR
#
# start picks a free loopback port below the kernel's ephemeral range (another one, up to five
# times, when the port is taken before the server binds it): after a stop, the port of DIR's
# server before when it is free, so that a client bound to its address (a lookup of a running
# cepheus) finds the new server. It runs redis-server without
# persistence (no RDB, no AOF) in the background with its log in DIR/redis.log, and returns once
# it answers PING. Its PID goes to DIR/pid and its address to DIR/address; everything but the
# address goes to stderr. A start on a DIR whose server still runs prints its address again.
#
# stop sends SIGTERM to the PID in DIR/pid if that process is still the redis-server started for
# DIR's port (never anything found by name), waits for it, and sends SIGKILL after 10 s. It keeps
# the address in DIR/last-address for the next start.
#
# DIR defaults to $CEPHEUS_REDIS_DIR, else build/redis in the checkout. REDIS_SH_FIRST_PORT (for
# tests) is the first port tried, unchecked, so that a test can hand it a taken one.
# Exit status: 0 on success, 1 when it could not start (nothing is left running then), 2 for a
# usage error.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { echo "redis.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() {
  log "$*"
  echo "usage: scripts/redis.sh start [-dir DIR] | stop [-dir DIR]" >&2
  exit 2
}

# ping reports whether a server answers PING on port $1 (through bash's /dev/tcp: no client
# needed).
ping() {
  local reply
  { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf 'PING\r\n' >&3
  IFS= read -r -t 2 reply <&3 || reply=""
  exec 3>&- 3<&-
  [[ "$reply" == "+PONG"* ]]
}

# free_port prints a loopback port nothing listens on, below the kernel's range of ephemeral
# ports: a port in that range may be the local end of a client's connection (the Kafka tests
# make many), which no connect finds but which makes the server's bind fail.
free_port() {
  local p lo=20000 hi=32768 first
  if read -r first _ < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && ((first > lo + 1000)); then
    hi=$first
  fi
  for _ in $(seq 50); do
    p=$((lo + RANDOM % (hi - lo)))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  die "no free loopback port found"
}

# ours reports whether PID $1 is the redis-server started on port $2.
ours() {
  [[ -r "/proc/$1/cmdline" ]] || return 1
  local cmd
  cmd="$(tr '\0' ' ' < "/proc/$1/cmdline")"
  [[ "$cmd" == *redis-server* && "$cmd" == *":$2"* ]]
}

install_server() {
  command -v redis-server >/dev/null && return
  log "redis-server is not installed: installing the Debian package"
  local sudo=()
  [[ "$(id -u)" == 0 ]] || sudo=(sudo)
  if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q redis-server >&2; then
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get update -q >&2 || true
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q redis-server >&2 ||
      die "could not install redis-server (apt-get install redis-server)"
  fi
  command -v redis-server >/dev/null || die "redis-server is still not on PATH after installing it"
}

start() {
  mkdir -p "$dir"
  if [[ -f "$dir/pid" && -f "$dir/address" ]]; then
    local pid addr
    pid="$(cat "$dir/pid")" addr="$(cat "$dir/address")"
    if ours "$pid" "${addr##*:}" && ping "${addr##*:}"; then
      log "already running (PID $pid)"
      echo "$addr"
      return
    fi
  fi
  install_server
  local port pid attempt last
  # A port taken between free_port and the server's bind (another process, or a client's local
  # end) makes the server exit at its start: another port is tried.
  for attempt in 1 2 3 4 5; do
    if ((attempt == 1)) && [[ -n "${REDIS_SH_FIRST_PORT:-}" ]]; then
      port=$REDIS_SH_FIRST_PORT
    elif ((attempt == 1)) && [[ -f "$dir/last-address" ]] && last="$(cat "$dir/last-address")" &&
      ! (exec 3<>"/dev/tcp/127.0.0.1/${last##*:}") 2>/dev/null; then
      port=${last##*:}
    else
      port="$(free_port)"
    fi
    # The address in the command line lets stop tell this server from any other.
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
      --dir "$dir" --logfile "$dir/redis.log" --protected-mode yes >/dev/null 2>&1 &
    pid=$!
    echo "$pid" > "$dir/pid"
    for _ in $(seq 100); do
      if ping "$port"; then
        echo "127.0.0.1:$port" > "$dir/address"
        log "redis-server $(redis-server --version | grep -o 'v=[0-9.]*' || true) PID $pid on 127.0.0.1:$port (log $dir/redis.log)"
        echo "127.0.0.1:$port"
        return
      fi
      if ! kill -0 "$pid" 2>/dev/null; then
        rm -f "$dir/pid"
        if grep -q 'Address already in use' "$dir/redis.log" 2>/dev/null && ((attempt < 5)); then
          log "port $port was taken at the server's start: trying another"
          mv -f "$dir/redis.log" "$dir/redis.log.$attempt"
          continue 2
        fi
        die "redis-server exited at its start: $(tail -5 "$dir/redis.log" 2>/dev/null || true)"
      fi
      sleep 0.1
    done
    kill -TERM "$pid" 2>/dev/null || true
    rm -f "$dir/pid"
    die "redis-server on port $port did not answer PING within 10 s"
  done
}

stop() {
  [[ -f "$dir/pid" ]] || { log "nothing recorded in $dir"; return; }
  local pid port
  pid="$(cat "$dir/pid")"
  port="$(cut -d: -f2 "$dir/address" 2>/dev/null || true)"
  if [[ -n "$port" ]] && ours "$pid" "$port"; then
    kill -TERM "$pid"
    for _ in $(seq 100); do
      ours "$pid" "$port" || break
      sleep 0.1
    done
    if ours "$pid" "$port"; then
      log "PID $pid still runs after 10 s: SIGKILL"
      kill -KILL "$pid" || true
    fi
    log "stopped PID $pid"
  else
    log "PID $pid is not the redis-server started in $dir any more: nothing to stop"
  fi
  [[ -f "$dir/address" ]] && mv -f "$dir/address" "$dir/last-address"
  rm -f "$dir/pid"
}

cmd="${1:-}"
[[ -n "$cmd" ]] || usage "a command is required"
shift
dir="${CEPHEUS_REDIS_DIR:-$root/build/redis}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    -dir) [[ $# -ge 2 ]] || usage "-dir needs a directory"; dir="$2"; shift 2 ;;
    *) usage "unknown argument $1" ;;
  esac
done
# redis-server changes into --dir before it opens --logfile, which would then name DIR/DIR/redis.log:
# a relative DIR is made absolute (it failed every start, with an empty log, before).
[[ "$dir" == /* ]] || dir="$PWD/$dir"
case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) usage "unknown command $cmd" ;;
esac
