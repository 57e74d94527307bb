#!/usr/bin/env bash
# Cepheus against Flink CEP on the benchmark workloads (make bench-compare;
# benchmarks/README.md, "Cepheus and Flink CEP side by side").
#
#   scripts/bench-compare.sh
#
# Builds the Flink runner's jar (scripts/flinkcep-jar.sh: cached, Maven
# downloads on first use) and the Go runner (benchmarks/cmd/cepbench),
# generates every workload's data once into $BENCH_DIR, then runs, per
# workload and round, Cepheus and then Flink (A B A B ...), each pinned to
# one core with taskset -c 0. Each run is capped at $BENCH_TIMEOUT seconds
# and then reports how far it got; an engine that did not finish a workload
# is not run on it again in later rounds. Finally it prints the table
# (medians over the finished rounds) and, when every workload ran on both
# engines, writes benchmarks/RESULTS.md. It fails (status 1) when the
# engines disagree on a workload's match count or signature hash, or when a
# round disagrees with another round, and then writes no results file.
#
# Environment:
#   ROUNDS (3)            rounds per workload
#   BENCH_TIMEOUT (120)   cap per engine run, seconds (a workload with a
#                         longer cap of its own, W4-F, gets that one)
#   BENCH_DIR (build/bench)  data files, runner binary, run log (runs.jsonl)
#   WORKLOADS ("")        space-separated subset (W1 W2-3 W2-5 W2-7 W3 W4
#                         W4-F); a subset does not write RESULTS.md. W4 (100
#                         rules, 1M keys) runs on Cepheus only; W4-F, the
#                         same rules at Flink's size, on both (cepbench list
#                         says which engines run each workload)
#   ENGINES ("cepheus flink")  "cepheus" alone runs only the Go side (make
#                         bench-cepheus) and writes no RESULTS.md
#   JAVA_OPTS ("")        extra JVM options for the Flink runs
#   MVN, CEPHEUS_CACHE, FLINKCEP_SKIP_TESTS   passed to scripts/flinkcep-jar.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
rounds=${ROUNDS:-3}
default_timeout=${BENCH_TIMEOUT:-120}
dir=${BENCH_DIR:-build/bench}
engines=${ENGINES:-cepheus flink}
only=${WORKLOADS:-}
read -r -a java_opts <<< "${JAVA_OPTS:-}"

log() { echo "bench-compare: $*" >&2; }
start=$(date +%s)

pin=()
if command -v taskset >/dev/null 2>&1; then
  pin=(taskset -c 0)
else
  log "taskset not found: the engines run unpinned"
fi

jar=""
if [[ " $engines " == *" flink "* ]]; then
  log "Flink runner jar (scripts/flinkcep-jar.sh)"
  jar="$(scripts/flinkcep-jar.sh)"
fi
mkdir -p "$dir"
go build -o "$dir/cepbench" ./benchmarks/cmd/cepbench
cepbench="$dir/cepbench"

log "generating the data into $dir"
if [[ -n "$only" ]]; then
  for w in $only; do "$cepbench" gen -dir "$dir" -workload "$w"; done
else
  "$cepbench" gen -dir "$dir"
fi

runs="$dir/runs.jsonl"
: > "$runs"

# run_one ENGINE NAME WARMUP OOO ROUND: one run, its JSON line appended to
# $runs; returns 3 when the run did not finish (hit the cap).
run_one() {
  local engine=$1 name=$2 warmup=$3 ooo=$4 round=$5 line errlog
  errlog="$dir/$engine-$name-$round.log"
  local t0=$SECONDS
  if [[ $engine == cepheus ]]; then
    if ! line=$("${pin[@]}" "$cepbench" run -workload "$name" -data "$dir/$name.csv" -timeout "${timeout}s" 2>"$errlog"); then
      log "Cepheus failed on $name (round $round):"; tail -n 20 "$errlog" >&2; exit 1
    fi
  else
    if ! line=$("${pin[@]}" java "${java_opts[@]}" -jar "$jar" bench --workload "$name" --data "$dir/$name.csv" \
        --warmup "$warmup" --out-of-orderness-ms "$ooo" --timeout-s "$timeout" 2>"$errlog"); then
      log "Flink failed on $name (round $round):"; tail -n 40 "$errlog" >&2; exit 1
    fi
  fi
  if [[ -z "$line" ]]; then
    log "$engine printed no result on $name (round $round):"; tail -n 20 "$errlog" >&2; exit 1
  fi
  echo "$line" >> "$runs"
  log "$name round $round $engine: $(grep -v WARN "$errlog" | tail -n 1) [$((SECONDS - t0)) s with start-up]"
  if [[ $line == *'"finished":false'* ]]; then
    return 3
  fi
}

while read -r name events warmup ooo on cap; do
  if [[ -n "$only" && " $only " != *" $name "* ]]; then
    continue
  fi
  timeout=$default_timeout
  if (( cap > timeout )); then
    timeout=$cap # the workload's own cap (W4-F)
  fi
  log "$name: $events events, warm-up $warmup, out-of-orderness ${ooo} ms, engines $on, cap ${timeout} s"
  declare -A dnf=()
  for round in $(seq "$rounds"); do
    for engine in $engines; do
      if [[ -n "${dnf[$engine]:-}" || ",$on," != *",$engine,"* ]]; then
        continue # did not finish before, or not run on this workload (W4: Cepheus only)
      fi
      status=0
      run_one "$engine" "$name" "$warmup" "$ooo" "$round" || status=$?
      if [[ $status == 3 ]]; then
        dnf[$engine]=1
        log "$name: $engine did not finish within ${timeout} s; no more rounds of it"
      elif [[ $status != 0 ]]; then
        exit "$status"
      fi
    done
  done
  unset dnf
done < <("$cepbench" list)

results=()
if [[ -z "$only" && " $engines " == *" cepheus "* && " $engines " == *" flink "* ]]; then
  results=(-results benchmarks/RESULTS.md)
fi
echo
status=0
"$cepbench" report -runs "$runs" -rounds "$rounds" "${results[@]}" || status=$?
echo
log "runs in $runs; total $(( $(date +%s) - start )) s"
if [[ $status != 0 ]]; then
  log "FAILED: the engines disagree (see above)"
fi
exit "$status"
