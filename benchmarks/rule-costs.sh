#!/usr/bin/env bash
# What each rule of a ruleset costs a backtest: the CPU time of the whole
# ruleset against that of the ruleset without the rule (backtest -rule with
# every other rule), on one core.
#
#   benchmarks/rule-costs.sh [rounds]
#
# RULES (default rulesets/cards.cep) is the ruleset, EVENTS the input
# (default: the default `cepheus gen` data as plain JSON lines in
# build/bench/, made once, as backtest-vs.sh does). Each round runs the
# whole ruleset, then the ruleset without each rule in turn, pinned to one
# core (CORE, default 1) when taskset exists; the figures are the least
# CPU time (user + sys) of the rounds. A rule's cost is the whole
# ruleset's time less the time without it: what leaving it out saves,
# including what it costs the others (its keys, the events it keeps
# alive). The costs need not add up to the whole: decoding and reading are
# everyone's.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
core=${CORE:-1}
rules=${RULES:-rulesets/cards.cep}
dir=build/bench
mkdir -p "$dir"
go build -o "$dir/cepheus-new" ./cmd/cepheus
bin=$dir/cepheus-new
events=${EVENTS:-$dir/events.jsonl}
if [ ! -s "$events" ]; then
	"$bin" gen -o "$dir/events.jsonl.gz"
	gzip -dc "$dir/events.jsonl.gz" >"$events"
fi
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c "$core"); fi

mapfile -t names < <(sed -n 's/^rule \([A-Za-z_][A-Za-z0-9_]*\) .*/\1/p' "$rules")
if [ "${#names[@]}" -lt 2 ]; then
	echo "rule-costs: $rules has fewer than two rules" >&2
	exit 1
fi

# cpu ARGS...: one backtest; prints its CPU time in seconds.
cpu() {
	/usr/bin/time -f '%U %S' -o "$dir/time.txt" "${pin[@]}" "$bin" backtest -q \
		-rules "$rules" -events "$events" -alerts /dev/null "$@" 2>/dev/null
	awk '{ printf "%.2f\n", $1 + $2 }' "$dir/time.txt"
}

# least A B: the smaller of two times.
least() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a < b) ? a : b }'; }

echo "backtest of $rules over $(wc -l <"$events") events, the whole ruleset and each rule left out, $rounds rounds, ${pin[*]:-no pinning}"
declare -A best
whole=""
for r in $(seq "$rounds"); do
	t=$(cpu)
	whole=$(least "$t" "$whole")
	echo "round $r: all rules ${t}s"
	for n in "${names[@]}"; do
		others=()
		for m in "${names[@]}"; do [ "$m" = "$n" ] || others+=("$m"); done
		t=$(cpu -rule "$(IFS=,; echo "${others[*]}")")
		best[$n]=$(least "$t" "${best[$n]:-}")
		echo "round $r: without $n ${t}s"
	done
done
echo
printf '%-24s %12s %10s %7s\n' rule "without (s)" "cost (s)" share
for n in "${names[@]}"; do
	awk -v n="$n" -v w="$whole" -v o="${best[$n]}" \
		'BEGIN { printf "%-24s %12.2f %10.2f %6.0f%%\n", n, o, w - o, 100 * (w - o) / w }'
done
printf '%-24s %12.2f\n' "(all rules)" "$whole"
