#!/usr/bin/env bash
# A local Apache Kafka for tests and users: one KRaft node, or a 3-node cluster, on loopback.
#
#   scripts/kafka.sh start [-n 1|3] [-dir DIR] [-secure]   start the broker(s); print the bootstrap address
#   scripts/kafka.sh stop [-dir DIR] [-rm]       stop the brokers that start recorded in DIR
#   scripts/kafka.sh restart-node N [-dir DIR]   start node N of DIR again (after it died), on its storage
#   scripts/kafka.sh jars                        fetch the jars only; print their directory
#
# start fetches Kafka's runtime jars from Maven Central with Maven (pinned in
# scripts/kafka/pom.xml, copied once into ${CEPHEUS_CACHE:-~/.cache/cepheus}/kafka/<hash>/lib; the
# local Maven repository keeps the downloads), picks free loopback ports, formats fresh storage
# under DIR, starts each node in the background with its output in DIR/logs/node<N>.log, and
# returns once every node has logged "Kafka Server started". The last line of stdout is the
# bootstrap address (host:port, comma-separated for 3 nodes); everything else goes to stderr.
# The PIDs go to DIR/pids and the address to DIR/bootstrap. A start on a DIR whose brokers still
# run prints their address again. Broker settings: scripts/kafka/server.properties (unlimited
# retention, fast transactions).
#
# stop sends SIGTERM to exactly the PIDs in DIR/pids that are still the brokers started from
# DIR (never anything found by name), waits for them, and sends SIGKILL to any left after 30 s.
# -rm then removes what start wrote under DIR.
#
# -secure adds a SASL_SSL listener to every node (TLS with a CA made for DIR, SASL PLAIN and
# SCRAM-SHA-512 for user "cepheus" with a random password) and prints its address instead; the
# plaintext one goes to DIR/bootstrap-plain. DIR/tls holds the CA (ca.pem) and a client
# certificate (client.pem, client.key); DIR/client.properties holds the settings of cepheus'
# -kafka-config (tls, tls.ca, sasl.mechanism, sasl.username, sasl.password): a secret, mode 0600.
# The brokers ask for a client certificate but do not require one. Needs openssl.
#
# DIR defaults to $CEPHEUS_KAFKA_DIR, else build/kafka in the checkout.
# Environment: JAVA (default java, 17 or later), MVN (Maven command and options, default mvn),
#   CEPHEUS_CACHE (cache root), KAFKA_HEAP (default 512m), KAFKA_START_TIMEOUT (seconds, default 120),
#   KAFKA_LOG4J (the brokers' log4j2 properties, default scripts/kafka/log4j2.properties; it must log
#   "Kafka Server started", which start waits for, at INFO), KAFKA_EXTRA_PROPERTIES (lines added to
#   every node's server.properties), KAFKA_FORMAT_ARGS (options of the storage format, split on
#   spaces, e.g. "--feature transaction.version=1").
# Exit status: 0 on success, 1 when the brokers could not start (nothing is left running then),
#   2 for a usage error.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
conf="$root/scripts/kafka"
cache="${CEPHEUS_CACHE:-$HOME/.cache/cepheus}/kafka"
java="${JAVA:-java}"
# MVN may carry options (MVN="mvn -Dmaven.repo.local=/tmp/m2"), so it is split on spaces.
read -r -a mvn_cmd <<< "${MVN:-mvn}"

log() { echo "kafka.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() {
  log "$*"
  echo "usage: scripts/kafka.sh start [-n 1|3] [-dir DIR] [-secure] | stop [-dir DIR] [-rm] | restart-node N [-dir DIR] | jars" >&2
  exit 2
}

# fetch_jars prints the directory holding Kafka's runtime jars, copying them there first
# when this version of the pom has not been fetched yet.
fetch_jars() {
  local hash dir work start
  hash="$(sha256sum < "$conf/pom.xml" | cut -c1-16)"
  dir="$cache/$hash"
  if [[ -f "$dir/complete" ]]; then
    echo "$dir/lib"
    return
  fi
  command -v "${mvn_cmd[0]}" >/dev/null 2>&1 ||
    die "mvn (Maven) is not on PATH: install Java 17 and Maven (Debian, Ubuntu: sudo apt-get install openjdk-17-jdk-headless maven)"
  mkdir -p "$cache"
  # One fetch at a time per cache: a second caller waits, then finds the jars.
  exec 8>"$cache/.lock"
  if command -v flock >/dev/null 2>&1; then
    flock 8
  fi
  if [[ ! -f "$dir/complete" ]]; then
    log "fetching Kafka's jars with Maven into $dir (about 45 MB; the first time takes half a minute)"
    work="$(mktemp -d "$cache/fetch.XXXXXX")"
    cp "$conf/pom.xml" "$work/pom.xml"
    start=$(date +%s)
    if ! "${mvn_cmd[@]}" -B -q -Dstyle.color=never -f "$work/pom.xml" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$work/lib" \
      > "$work/mvn.log" 2>&1 < /dev/null; then
      cat "$work/mvn.log" >&2
      rm -rf "$work"
      die "Maven could not fetch the jars of scripts/kafka/pom.xml (is Maven Central reachable?)"
    fi
    rm -rf "$dir"
    mv "$work" "$dir"
    touch "$dir/complete"
    log "fetched in $(( $(date +%s) - start ))s"
  fi
  exec 8>&-
  echo "$dir/lib"
}

check_java() {
  command -v "$java" >/dev/null 2>&1 ||
    die "java is not on PATH: install Java 17 or later (Debian, Ubuntu: sudo apt-get install openjdk-17-jdk-headless maven)"
  local v
  v="$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)"
  if [[ -z "$v" || "$v" -lt 17 ]]; then
    die "Kafka 4 needs Java 17 or later (found: $("$java" -version 2>&1 | head -n 1))"
  fi
}

# is_ours PID NODE_CONF: whether PID is alive and runs the broker of NODE_CONF, so a PID the
# system reused for another process is never signalled.
is_ours() {
  local args
  kill -0 "$1" 2>/dev/null || return 1
  if [[ -r "/proc/$1/cmdline" ]]; then
    args="$(tr '\0' ' ' < "/proc/$1/cmdline")"
  else
    args="$(ps -o args= -p "$1" 2>/dev/null || true)"
  fi
  [[ "$args" == *"kafka.Kafka $2"* ]]
}

# started PID NODE_CONF: whether PID, a broker started a moment ago, still runs: it is ours,
# or it is the script's child that has not run java yet (until its exec its command line is
# this script's: a check right after the start, on a loaded machine, sees that).
started() {
  is_ours "$1" "$2" && return 0
  running "$1" || return 1
  [[ "$(tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null)" == *kafka.sh* ]]
}

# running PID: whether PID exists and has not exited (a zombie, exited but not yet reaped by
# its parent, does not run).
running() {
  local state
  if [[ -r "/proc/$1/stat" ]]; then
    state="$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)"
  else
    state="$(ps -o stat= -p "$1" 2>/dev/null || true)"
  fi
  [[ -n "$state" && "$state" != Z* ]]
}

# stop_pids DIR: stops the brokers recorded in DIR/pids ("<pid> <server.properties>" lines) and
# returns once they have exited.
stop_pids() {
  local dir="$1" pid props pids=() left i j
  [[ -f "$dir/pids" ]] || return 0
  while read -r pid props; do
    [[ -n "$pid" ]] || continue
    if is_ours "$pid" "$props"; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done < "$dir/pids"
  # A broker takes about 2 s to shut down; SIGKILL after 30 s.
  for ((i = 0; i < 300; i++)); do
    left=0
    for ((j = 0; j < ${#pids[@]}; j++)); do
      if running "${pids[j]}"; then left=1; fi
    done
    ((left)) || break
    sleep 0.1
  done
  for ((j = 0; j < ${#pids[@]}; j++)); do
    if running "${pids[j]}"; then
      log "broker ${pids[j]} did not stop within 30s: SIGKILL"
      kill -KILL "${pids[j]}" 2>/dev/null || true
    fi
  done
  # An exited broker stays a zombie until its parent (init, once start has returned) reaps it:
  # wait a little for that too, so that no recorded PID is left once stop returns.
  for ((i = 0; i < 50; i++)); do
    left=0
    for ((j = 0; j < ${#pids[@]}; j++)); do
      if kill -0 "${pids[j]}" 2>/dev/null; then left=1; fi
    done
    ((left)) || break
    sleep 0.1
  done
  rm -f "$dir/pids" "$dir/bootstrap"
}

# free_port prints a loopback port nothing listens on and that is not in the arguments. It
# picks below the kernel's ephemeral range, so an outgoing connection cannot take it meanwhile.
free_port() {
  local p taken
  while :; do
    p=$((10000 + RANDOM % 20000))
    taken=0
    for q in "$@"; do [[ "$q" == "$p" ]] && taken=1; done
    ((taken)) && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
}

# Settings added to server.properties when there are 3 nodes: every internal topic on all
# three, writes acknowledged by two, and a dead broker noticed within 3 s.
cluster_settings() {
  cat <<'EOF'
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
broker.session.timeout.ms=3000
broker.heartbeat.interval.ms=500
EOF
}

# make_tls DIR: a CA, a broker certificate for 127.0.0.1 and localhost (a PKCS12 keystore) and a
# client certificate under DIR/tls, and the SASL password in DIR/tls/password; kept if there.
make_tls() {
  local t="$1/tls" pw
  [[ -f "$t/complete" ]] && return 0
  command -v openssl >/dev/null 2>&1 || die "-secure needs openssl (Debian, Ubuntu: sudo apt-get install openssl)"
  rm -rf "$t"
  mkdir -p "$t"
  chmod 700 "$t"
  pw="$(head -c 18 /dev/urandom | base64 | tr -d '+/=' | cut -c1-20)"
  printf '%s' "$pw" > "$t/password"
  {
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$t/ca.key" -out "$t/ca.pem" -days 3650 -subj "/CN=cepheus test CA"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$t/san.ext"
    openssl req -newkey rsa:2048 -nodes -keyout "$t/broker.key" -out "$t/broker.csr" -subj "/CN=localhost"
    openssl x509 -req -in "$t/broker.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial -out "$t/broker.pem" -days 3650 -extfile "$t/san.ext"
    openssl pkcs12 -export -in "$t/broker.pem" -inkey "$t/broker.key" -out "$t/broker.p12" -passout "pass:$pw" -name broker
    openssl req -newkey rsa:2048 -nodes -keyout "$t/client.key" -out "$t/client.csr" -subj "/CN=cepheus client"
    openssl x509 -req -in "$t/client.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial -out "$t/client.pem" -days 3650
  } > "$t/openssl.log" 2>&1 || { cat "$t/openssl.log" >&2; die "openssl could not make the test certificates"; }
  touch "$t/complete"
}

# secure_settings DIR: the lines of a node's SASL_SSL listener.
secure_settings() {
  local t="$1/tls" pw
  pw="$(cat "$t/password")"
  cat <<SETTINGS
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_cepheus="$pw";
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PKCS12
ssl.keystore.location=$t/broker.p12
ssl.keystore.password=$pw
ssl.key.password=$pw
ssl.truststore.type=PEM
ssl.truststore.location=$t/ca.pem
ssl.client.auth=requested
SETTINGS
}

# launch DIR N LIB: formats fresh storage for N nodes on new ports and starts them. It returns
# 0 once all are ready, 3 when a port was taken meanwhile (the caller retries), 1 on another
# failure; the started brokers are recorded in DIR/pids either way.
launch() {
  local dir="$1" n="$2" lib="$3" ports=() voters="" bootstrap="" cid i pid props nodelog deadline
  local per=2 sbootstrap=""
  ((secure)) && per=3
  for ((i = 0; i < per * n; i++)); do
    ports+=("$(free_port "${ports[@]+"${ports[@]}"}")")
  done
  if ((secure)); then
    make_tls "$dir"
    for ((i = 1; i <= n; i++)); do
      sbootstrap+="${sbootstrap:+,}127.0.0.1:${ports[2 * n + i - 1]}"
    done
  fi
  for ((i = 1; i <= n; i++)); do
    voters+="${voters:+,}$i@127.0.0.1:${ports[2 * i - 1]}"
    bootstrap+="${bootstrap:+,}127.0.0.1:${ports[2 * i - 2]}"
  done
  # A cluster id is 16 random bytes in URL-safe base64 without padding: 22 characters. It may
  # start with "-", so format gets it as --cluster-id=ID (argparse would take "-t -x..." for a flag).
  cid="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | cut -c1-22)"
  rm -rf "$dir"/node* "$dir/logs"
  mkdir -p "$dir/logs"
  for ((i = 1; i <= n; i++)); do
    mkdir -p "$dir/node$i"
    props="$dir/node$i/server.properties"
    {
      cat "$conf/server.properties"
      echo
      echo "# Added by scripts/kafka.sh for node $i of $n."
      echo "node.id=$i"
      echo "controller.quorum.voters=$voters"
      if ((secure)); then
        echo "listeners=PLAINTEXT://127.0.0.1:${ports[2 * i - 2]},CONTROLLER://127.0.0.1:${ports[2 * i - 1]},SASL_SSL://127.0.0.1:${ports[2 * n + i - 1]}"
        echo "advertised.listeners=PLAINTEXT://127.0.0.1:${ports[2 * i - 2]},SASL_SSL://127.0.0.1:${ports[2 * n + i - 1]}"
        secure_settings "$dir"
      else
        echo "listeners=PLAINTEXT://127.0.0.1:${ports[2 * i - 2]},CONTROLLER://127.0.0.1:${ports[2 * i - 1]}"
        echo "advertised.listeners=PLAINTEXT://127.0.0.1:${ports[2 * i - 2]}"
      fi
      echo "log.dirs=$dir/node$i/data"
      ((n == 1)) || cluster_settings
      if [[ -n "${KAFKA_EXTRA_PROPERTIES:-}" ]]; then
        echo "# From KAFKA_EXTRA_PROPERTIES."
        printf '%s\n' "$KAFKA_EXTRA_PROPERTIES"
      fi
    } > "$props"
  done
  # With a static controller.quorum.voters, format takes the cluster id and the config only.
  local fmt_pids=() scram=() fmt_args=()
  if ((secure)); then
    scram=(--add-scram "SCRAM-SHA-512=[name=cepheus,password=$(cat "$dir/tls/password")]")
  fi
  # KAFKA_FORMAT_ARGS may carry format's options (split on spaces): --feature transaction.version=1.
  read -r -a fmt_args <<< "${KAFKA_FORMAT_ARGS:-}"
  scram+=("${fmt_args[@]+"${fmt_args[@]}"}")
  for ((i = 1; i <= n; i++)); do
    "$java" -Xmx256m -XX:+UseSerialGC -Dlog4j2.configurationFile="$conf/log4j2-tools.properties" \
      -cp "$lib/*" kafka.tools.StorageTool format --cluster-id="$cid" -c "$dir/node$i/server.properties" "${scram[@]+"${scram[@]}"}" \
      > "$dir/logs/format$i.log" 2>&1 < /dev/null &
    fmt_pids+=($!)
  done
  for ((i = 1; i <= n; i++)); do
    if ! wait "${fmt_pids[i - 1]}"; then
      cat "$dir/logs/format$i.log" >&2
      log "formatting node $i failed"
      return 1
    fi
  done
  : > "$dir/pids"
  for ((i = 1; i <= n; i++)); do
    props="$dir/node$i/server.properties"
    # The broker must not hold the caller's stdout or stderr (a caller reading the address
    # with $(...) would wait for it to exit) nor the cache lock.
    "$java" -Xmx"${KAFKA_HEAP:-512m}" -Xms32m -XX:+UseSerialGC -Djava.awt.headless=true \
      -Dlog4j2.configurationFile="${KAFKA_LOG4J:-$conf/log4j2.properties}" \
      -cp "$lib/*" kafka.Kafka "$props" > "$dir/logs/node$i.log" 2>&1 < /dev/null 8>&- &
    pid=$!
    echo "$pid $props" >> "$dir/pids"
  done
  deadline=$(( $(date +%s) + ${KAFKA_START_TIMEOUT:-120} ))
  for ((i = 1; i <= n; i++)); do
    nodelog="$dir/logs/node$i.log"
    pid="$(sed -n "${i}p" "$dir/pids" | cut -d' ' -f1)"
    props="$dir/node$i/server.properties"
    until grep -q "Kafka Server started" "$nodelog" 2>/dev/null; do
      if ! started "$pid" "$props"; then
        if grep -q "Address already in use" "$nodelog"; then
          log "node $i: a port was taken meanwhile; trying other ports"
          return 3
        fi
        tail -n 40 "$nodelog" >&2
        log "node $i (pid $pid) exited before it was ready; its log: $nodelog"
        return 1
      fi
      if (( $(date +%s) >= deadline )); then
        tail -n 40 "$nodelog" >&2
        log "node $i not ready after ${KAFKA_START_TIMEOUT:-120}s; its log: $nodelog"
        return 1
      fi
      sleep 0.1
    done
  done
  if ((secure)); then
    echo "$bootstrap" > "$dir/bootstrap-plain"
    (
      umask 077
      printf 'tls=true\ntls.ca=%s\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=cepheus\nsasl.password=%s\n' \
        "$dir/tls/ca.pem" "$(cat "$dir/tls/password")" > "$dir/client.properties"
    )
    bootstrap="$sbootstrap"
  fi
  echo "$bootstrap" > "$dir/bootstrap"
}

# restart_node DIR N: starts node N of the brokers recorded in DIR again, with its config and
# storage (no format), once its recorded process is gone (a test killed it); records the new PID
# and returns once it is ready.
restart_node() {
  local dir="$1" i="$2" lib pid props line nodelog deadline tmp
  [[ -f "$dir/pids" ]] || die "no brokers recorded in $dir"
  line="$(sed -n "${i}p" "$dir/pids")"
  [[ -n "$line" ]] || die "$dir has no node $i"
  read -r pid props <<< "$line"
  if is_ours "$pid" "$props" && running "$pid"; then
    die "node $i (pid $pid) still runs"
  fi
  check_java
  lib="$(fetch_jars)"
  nodelog="$dir/logs/node$i.log"
  mv "$nodelog" "$nodelog.$(date +%s)" 2>/dev/null || true
  "$java" -Xmx"${KAFKA_HEAP:-512m}" -Xms32m -XX:+UseSerialGC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="${KAFKA_LOG4J:-$conf/log4j2.properties}" \
    -cp "$lib/*" kafka.Kafka "$props" > "$nodelog" 2>&1 < /dev/null 8>&- &
  pid=$!
  tmp="$(mktemp "$dir/pids.XXXXXX")"
  awk -v n="$i" -v l="$pid $props" 'NR == n { print l; next } { print }' "$dir/pids" > "$tmp"
  mv "$tmp" "$dir/pids"
  deadline=$(( $(date +%s) + ${KAFKA_START_TIMEOUT:-120} ))
  until grep -q "Kafka Server started" "$nodelog" 2>/dev/null; do
    started "$pid" "$props" || { tail -n 40 "$nodelog" >&2; die "node $i exited before it was ready"; }
    (( $(date +%s) < deadline )) || die "node $i not ready after ${KAFKA_START_TIMEOUT:-120}s"
    sleep 0.1
  done
  log "node $i ready again (pid $pid)"
}

start() {
  local dir="$1" n="$2" lib begun rc attempt
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  if [[ -f "$dir/pids" ]]; then
    local pid props live=0 recorded=0
    while read -r pid props; do
      [[ -n "$pid" ]] || continue
      recorded=$((recorded + 1))
      if is_ours "$pid" "$props"; then live=$((live + 1)); fi
    done < "$dir/pids"
    if ((live > 0)); then
      if ((live == n && recorded == n)) && [[ -s "$dir/bootstrap" ]]; then
        log "already running from $dir (scripts/kafka.sh stop -dir $dir stops it)"
        cat "$dir/bootstrap"
        return 0
      fi
      die "$live of $recorded brokers started from $dir still run; scripts/kafka.sh stop -dir $dir first"
    fi
    rm -f "$dir/pids" "$dir/bootstrap"
  fi
  check_java
  lib="$(fetch_jars)"
  begun=$(date +%s.%N)
  # Whatever stops this script before the brokers are ready stops the ones it started.
  starting="$dir"
  trap 'stop_pids "$starting"' EXIT
  for attempt in 1 2 3; do
    rc=0
    launch "$dir" "$n" "$lib" || rc=$?
    ((rc == 0)) && break
    stop_pids "$dir"
    ((rc == 3 && attempt < 3)) || die "could not start Kafka ($n node(s)) in $dir"
  done
  trap - EXIT
  log "$n node(s) ready in $(awk -v a="$begun" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s; logs in $dir/logs; stop with: scripts/kafka.sh stop -dir $dir"
  cat "$dir/bootstrap"
}

cmd="${1:-}"
[[ -n "$cmd" ]] || usage "no command given"
shift
node=""
if [[ "$cmd" == restart-node ]]; then
  node="${1:-}"
  [[ "$node" =~ ^[1-9]$ ]] || usage "restart-node takes a node number"
  shift
fi
dir="${CEPHEUS_KAFKA_DIR:-$root/build/kafka}"
nodes=1
remove=0
secure=0
while (($# > 0)); do
  case "$1" in
    -n)
      [[ "$cmd" == start && $# -ge 2 ]] || usage "-n: start takes -n 1 or -n 3"
      nodes="$2"
      [[ "$nodes" == 1 || "$nodes" == 3 ]] || usage "-n $nodes: a cluster has 1 or 3 nodes"
      shift 2
      ;;
    -dir)
      [[ $# -ge 2 ]] || usage "-dir needs a directory"
      dir="$2"
      shift 2
      ;;
    -rm)
      [[ "$cmd" == stop ]] || usage "-rm: only stop takes -rm"
      remove=1
      shift
      ;;
    -secure)
      [[ "$cmd" == start ]] || usage "-secure: only start takes -secure"
      secure=1
      shift
      ;;
    *) usage "unknown argument $1" ;;
  esac
done

case "$cmd" in
  start) start "$dir" "$nodes" ;;
  stop)
    if [[ -d "$dir" ]]; then
      stop_pids "$dir"
      if ((remove)); then
        rm -rf "$dir"/node* "$dir/logs" "$dir/pids" "$dir/bootstrap" "$dir/bootstrap-plain" "$dir/tls" "$dir/client.properties"
        rmdir "$dir" 2>/dev/null || true
      fi
    fi
    ;;
  restart-node) restart_node "$(cd "$dir" && pwd)" "$node" ;;
  jars) fetch_jars ;;
  *) usage "unknown command $cmd" ;;
esac
