#!/usr/bin/env bash
# The cards backtest of two builds side by side, on the same data, one core.
#
#   benchmarks/backtest-vs.sh [base-rev] [rounds]
#
# Builds cepheus at base-rev (default 26b8a76, the start of the engine-core
# issue) in a temporary git worktree and at the working tree, generates the
# default `cepheus gen` data as plain JSON lines into build/bench/ (once),
# then runs `backtest -rules rulesets/cards.cep` with both binaries in turn,
# rounds times each (A B A B ...), pinned to one core (CORE, default 1) when
# taskset exists, alerts to a file. It prints each build's least CPU time
# (user + sys) and largest peak RSS, their ratio, and fails unless both
# builds wrote the same set of alert ids (or, when the base's rule hashes
# differ, the same alerts but for their ids and hashes). Both builds run the base
# revision's rulesets/cards.cep (copied to build/bench/cards-BASE.cep), so
# that they do the same work and a ruleset grown since (a lookup, a rule)
# neither breaks the base's parser nor changes the ids; RULES=FILE runs
# another ruleset on both.
#
# INSTR=N also runs both builds once under valgrind's callgrind over the
# first N events and prints their instructions per event: a figure that
# does not drift with the machine's speed, as CPU time does here (it does
# not see cache misses, so it is not the CPU time's ratio; 0 rounds and
# INSTR=N gives it alone).
#
# PAIR=N also runs the two builds at once, one per core (0 and 1, swapped
# each round), N times, and prints the median and mean of the rounds'
# ratios of CPU time: the two runs of a pair see the same state of the
# machine, which runs one after the other do not (on this shared machine
# the same binary's CPU time moves by half within minutes), so small
# differences between builds show that alternating rounds hide. It needs
# taskset and two idle cores.
#
# BIG=1 runs the working tree only, on the 20-day, 200,000-customer input
# (`cepheus gen -days 20 -customers 200000`, about 4.2M events, 1.4 GB)
# and on the default data in turn, rounds times, for the input's peak RSS
# and its events per CPU-second against the default data's (both with
# the same ruleset, RULES or rulesets/cards.cep). With PAIR=N it also runs
# the 4M input N times on one core while the default data runs again and
# again on the other (cores swapped each time), and compares each 4M run
# with the median of the default runs that ended within it: the same
# state of the machine for both, which runs a minute apart do not see.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-26b8a76}
rounds=${2:-3}
core=${CORE:-1}
dir=build/bench
mkdir -p "$dir"
go build -o "$dir/cepheus-new" ./cmd/cepheus
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c "$core"); fi

rules=${RULES:-rulesets/cards.cep}

# run BIN EVENTS OUT: one backtest; prints "cpu rss_kib"
run() {
	/usr/bin/time -f '%U %S %M' -o "$dir/time.txt" "${pin[@]}" "$1" backtest -q \
		-rules "$rules" -events "$2" -alerts "$3"
	awk '{ printf "%.2f %d\n", $1 + $2, $3 }' "$dir/time.txt"
}

if [ "${BIG:-}" = 1 ]; then
	big=$dir/big.jsonl
	if [ ! -s "$big" ]; then
		"$dir/cepheus-new" gen -days 20 -customers 200000 -o "$big"
	fi
	events=$dir/events.jsonl
	if [ ! -s "$events" ]; then
		"$dir/cepheus-new" gen -o "$dir/events.jsonl.gz"
		gzip -dc "$dir/events.jsonl.gz" >"$events"
	fi
	nbig=$(wc -l <"$big")
	ndef=$(wc -l <"$events")
	echo "backtest of $rules over $nbig events ($big) and $ndef ($events) in turn, $rounds rounds, ${pin[*]:-no pinning}"
	# Each round runs the default data, then the big input: the ratio of
	# one round compares runs a minute apart, as alike in the machine's
	# state as this machine allows.
	ratios=() best_def="" best_big="" rss_big=0
	for r in $(seq "$rounds"); do
		read -r cdef _ < <(run "$dir/cepheus-new" "$events" "$dir/alerts-new.jsonl")
		read -r cbig rss < <(run "$dir/cepheus-new" "$big" "$dir/big-alerts.jsonl")
		ratio=$(awk -v d="$cdef" -v b="$cbig" -v nd="$ndef" -v nb="$nbig" 'BEGIN { printf "%.3f", (nb / b) / (nd / d) }')
		echo "round $r: default ${cdef}s, 4M ${cbig}s, peak RSS $((rss / 1024)) MiB: events per CPU-second ratio $ratio"
		ratios+=("$ratio")
		if [ -z "$best_def" ] || awk -v a="$cdef" -v b="$best_def" 'BEGIN { exit !(a < b) }'; then best_def=$cdef; fi
		if [ -z "$best_big" ] || awk -v a="$cbig" -v b="$best_big" 'BEGIN { exit !(a < b) }'; then best_big=$cbig; fi
		((rss > rss_big)) && rss_big=$rss
	done
	median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
	if [ -n "${PAIR:-}" ]; then
		command -v taskset >/dev/null || { echo "PAIR needs taskset" >&2; exit 1; }
		# The 4M input on one core while the default data runs again and
		# again on the other; the default runs that end before the 4M run
		# does are its pair (cores swapped each round).
		pratios=()
		for r in $(seq "$PAIR"); do
			cb=$((r % 2))
			/usr/bin/time -f '%U %S' -o "$dir/pair-big.txt" taskset -c "$cb" "$dir/cepheus-new" backtest -q \
				-rules "$rules" -events "$big" -alerts "$dir/pair-big-alerts.jsonl" &
			bigpid=$!
			defs=()
			while kill -0 "$bigpid" 2>/dev/null; do
				/usr/bin/time -f '%U %S' -o "$dir/pair-def.txt" taskset -c $((1 - cb)) "$dir/cepheus-new" backtest -q \
					-rules "$rules" -events "$events" -alerts "$dir/pair-def-alerts.jsonl"
				if kill -0 "$bigpid" 2>/dev/null; then
					defs+=("$(awk '{ print $1 + $2 }' "$dir/pair-def.txt")")
				fi
			done
			wait "$bigpid"
			cbig=$(awk '{ print $1 + $2 }' "$dir/pair-big.txt")
			if [ "${#defs[@]}" -eq 0 ]; then
				echo "pair $r: no default run ended within the 4M run's" >&2
				exit 1
			fi
			cdef=$(printf '%s\n' "${defs[@]}" | median)
			ratio=$(awk -v d="$cdef" -v b="$cbig" -v nd="$ndef" -v nb="$nbig" 'BEGIN { printf "%.3f", (nb / b) / (nd / d) }')
			echo "pair $r: 4M ${cbig}s on core $cb; default median ${cdef}s of ${#defs[@]} runs at once (${defs[*]}): ratio $ratio"
			pratios+=("$ratio")
		done
		echo "at once: events per CPU-second ratio $(printf '%s\n' "${pratios[@]}" | median) (median of $PAIR pairs)"
	fi
	[ "$rounds" -gt 0 ] || exit 0
	median=$(printf '%s\n' "${ratios[@]}" | median)
	awk -v nb="$nbig" -v nd="$ndef" -v b="$best_big" -v d="$best_def" -v m="$rss_big" -v med="$median" 'BEGIN {
		printf "4M input: least cpu %.2fs, %.0f events per CPU-second, largest peak RSS %.0f MiB\n", b, nb / b, m / 1024
		printf "default:  least cpu %.2fs, %.0f events per CPU-second\n", d, nd / d
		printf "ratio of the least times %.3f; median of the rounds %s\n", (nb / b) / (nd / d), med }'
	exit 0
fi

wt=$(mktemp -d)
trap 'git worktree remove --force "$wt" >/dev/null 2>&1 || true' EXIT
git worktree add --detach "$wt" "$base" >/dev/null 2>&1
(cd "$wt" && go build -o "$OLDPWD/$dir/cepheus-base" ./cmd/cepheus)
if [ -z "${RULES:-}" ]; then
	rules=$dir/cards-$base.cep
	git show "$base:rulesets/cards.cep" >"$rules"
fi

events=$dir/events.jsonl
if [ ! -s "$events" ]; then
	"$dir/cepheus-new" gen -o "$dir/events.jsonl.gz"
	gzip -dc "$dir/events.jsonl.gz" >"$events"
fi
lines=$(wc -l <"$events")
echo "backtest of $rules over $lines events ($events), ${pin[*]:-no pinning}; base $base"
best_base="" best_new="" rss_base=0 rss_new=0
for r in $(seq "$rounds"); do
	for b in base new; do
		read -r cpu rss < <(run "$dir/cepheus-$b" "$events" "$dir/alerts-$b.jsonl")
		echo "round $r $b: cpu ${cpu}s peak RSS $((rss / 1024)) MiB"
		if [ "$b" = base ]; then
			if [ -z "$best_base" ] || awk -v a="$cpu" -v b="$best_base" 'BEGIN { exit !(a < b) }'; then best_base=$cpu; fi
			((rss > rss_base)) && rss_base=$rss
		else
			if [ -z "$best_new" ] || awk -v a="$cpu" -v b="$best_new" 'BEGIN { exit !(a < b) }'; then best_new=$cpu; fi
			((rss > rss_new)) && rss_new=$rss
		fi
	done
done
ids() { grep -o '"alert_id":"[0-9a-f]*"' "$1" | sort; }
# bodies: the alerts without their ids and rule hashes, sorted (a build
# whose rule hash formula differs, docs/decisions.md "Rule hash", writes
# other ids for the same matches).
bodies() { sed -e 's/"alert_id":"[0-9a-f]*",//' -e 's/"rule_hash":"[0-9a-f]*",//' "$1" | sort; }
# same A B: how the alerts of the two builds compare; fails when they differ.
same() {
	if cmp -s <(ids "$1") <(ids "$2"); then
		echo "the same"
	elif cmp -s <(bodies "$1") <(bodies "$2"); then
		echo "other ids (rule hash formula) but the same"
	else
		echo "FAIL: the builds wrote different alerts ($1, $2)" >&2
		return 1
	fi
}
if [ -n "${INSTR:-}" ]; then
	command -v valgrind >/dev/null || { echo "INSTR needs valgrind" >&2; exit 1; }
	head -n "$INSTR" "$events" >"$dir/instr.jsonl"
	n=$(wc -l <"$dir/instr.jsonl")
	for b in base new; do
		GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind -q \
			--callgrind-out-file="$dir/callgrind-$b.out" "$dir/cepheus-$b" backtest -q \
			-rules "$rules" -events "$dir/instr.jsonl" -alerts "$dir/instr-alerts-$b.jsonl"
		ins=$(awk '/^summary:/ { print $2 }' "$dir/callgrind-$b.out")
		echo "$b: $ins instructions over $n events, $((ins / n)) per event (callgrind)"
		eval "ins_$b=$ins"
	done
	s=$(same "$dir/instr-alerts-base.jsonl" "$dir/instr-alerts-new.jsonl")
	awk -v a="$ins_base" -v b="$ins_new" -v s="$s" -v k="$(ids "$dir/instr-alerts-new.jsonl" | wc -l)" \
		'BEGIN { printf "instructions %.2fx fewer; %s %d alerts\n", a / b, s, k }'
fi
if [ -n "${PAIR:-}" ]; then
	command -v taskset >/dev/null || { echo "PAIR needs taskset" >&2; exit 1; }
	# on CORE BUILD: one backtest of BUILD pinned to CORE, its CPU time
	# to $dir/pair-BUILD.txt.
	on() {
		/usr/bin/time -f '%U %S' -o "$dir/pair-$2.txt" taskset -c "$1" "$dir/cepheus-$2" backtest -q \
			-rules "$rules" -events "$events" -alerts "$dir/pair-alerts-$2.jsonl"
	}
	ratios=()
	for r in $(seq "$PAIR"); do
		on $((r % 2)) base &
		on $((1 - r % 2)) new &
		wait
		read -r ub sb <"$dir/pair-base.txt"
		read -r un sn <"$dir/pair-new.txt"
		ratio=$(awk -v a="$ub" -v b="$sb" -v c="$un" -v d="$sn" 'BEGIN { printf "%.3f", (a + b) / (c + d) }')
		echo "pair $r: base $(awk -v a="$ub" -v b="$sb" 'BEGIN { print a + b }')s, new $(awk -v a="$un" -v b="$sn" 'BEGIN { print a + b }')s: $ratio"
		ratios+=("$ratio")
	done
	s=$(same "$dir/pair-alerts-base.jsonl" "$dir/pair-alerts-new.jsonl")
	printf '%s\n' "${ratios[@]}" | sort -n | awk -v s="$s" '{ v[NR] = $1; t += $1 } END {
		printf "at once: CPU time %.3fx lower (median of %d pairs; mean %.3f); %s alerts\n",
			(NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, NR, t / NR, s }'
fi
[ "$rounds" -gt 0 ] || exit 0
same=$(same "$dir/alerts-base.jsonl" "$dir/alerts-new.jsonl")
awk -v n="$lines" -v a="$best_base" -v b="$best_new" -v ra="$rss_base" -v rb="$rss_new" -v k="$(ids "$dir/alerts-new.jsonl" | wc -l)" -v s="$same" 'BEGIN {
	printf "base: cpu %.2fs (%.0f events per CPU-second), peak RSS %.0f MiB\n", a, n / a, ra / 1024
	printf "new:  cpu %.2fs (%.0f events per CPU-second), peak RSS %.0f MiB\n", b, n / b, rb / 1024
	printf "CPU time %.2fx lower; %s %d alerts\n", a / b, s, k }'
