#!/usr/bin/env bash
# Backtest throughput and peak memory on generated data, one core.
#
#   benchmarks/backtest.sh [rounds]
#
# Generates the default `cepheus gen` data (60 days of history and a busy day,
# about 325,000 events) once into build/bench/, then backtests
# rulesets/cards.cep over it, pinned to one core (taskset -c 0) when taskset
# exists: JSON lines in (gzip), alerts out (to a file). It prints, per round,
# wall and CPU seconds, events/s over wall time and over CPU time, and the
# peak RSS, then the best round.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
mkdir -p build/bench
go build -o build/bench/cepheus ./cmd/cepheus
events=build/bench/events.jsonl.gz
if [ ! -s "$events" ]; then
	build/bench/cepheus gen -o "$events"
fi
lines=$(gzip -dc "$events" | wc -l)
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c 0); fi
echo "backtest of rulesets/cards.cep over $lines events ($events), ${pin[*]:-no pinning}"
best=""
for r in $(seq "$rounds"); do
	out=$( { /usr/bin/time -f '%e %U %S %M' "${pin[@]}" build/bench/cepheus backtest -q \
		-rules rulesets/cards.cep -events "$events" -alerts build/bench/alerts.jsonl \
		-late build/bench/late.jsonl -dead-letter build/bench/dead.jsonl; } 2>&1 | tail -1)
	read -r wall user sys rss <<<"$out"
	cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
	line=$(awk -v n="$lines" -v w="$wall" -v c="$cpu" -v m="$rss" \
		'BEGIN { printf "wall %.2fs cpu %.2fs  %.0f events/s (wall)  %.0f events/s (cpu)  peak RSS %.0f MiB", w, c, n / w, n / c, m / 1024 }')
	echo "round $r: $line"
	if [ -z "$best" ] || awk -v a="$cpu" -v b="$bestcpu" 'BEGIN { exit !(a < b) }'; then
		best=$line
		bestcpu=$cpu
	fi
done
echo "best: $best"
echo "alerts: $(wc -l <build/bench/alerts.jsonl)"
