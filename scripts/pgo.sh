#!/usr/bin/env bash
# Refresh cmd/cepheus/default.pgo, the CPU profile that `go build` uses to
# optimize the cepheus command (profile-guided optimization: Go's -pgo=auto
# picks up default.pgo in the main package's directory; go build, go install
# and make build all do).
#
#   scripts/pgo.sh [dir]
#
# It profiles what the engine spends its time on in use: backtests of
# rulesets/cards.cep (its customer lookup bound to the generated profiles)
# over the default `cepheus gen` data and over the first 400,000 events of a
# 20-day, 200,000-customer input (many keys, most of them cold), and merges
# the two profiles. The data goes to dir (default build/pgo). Run it again
# when the hot paths change much; a stale profile only optimizes less (the
# compiler matches it by function and line, and ignores what it no longer
# finds).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/pgo}
mkdir -p "$dir"
# The profiled binary is built without a profile, so that the new one does
# not depend on the old.
go build -pgo=off -o "$dir/cepheus" ./cmd/cepheus
if [ ! -s "$dir/events.jsonl" ]; then
	"$dir/cepheus" gen -o "$dir/events.jsonl" -profiles "$dir/profiles"
fi
if [ ! -s "$dir/many-keys.jsonl" ]; then
	# gen ends on the broken pipe once head has its lines.
	{ "$dir/cepheus" gen -days 20 -customers 200000 -profiles "$dir/many-keys-profiles" || true; } |
		head -n 400000 >"$dir/many-keys.jsonl"
fi
"$dir/cepheus" backtest -q -rules rulesets/cards.cep -events "$dir/events.jsonl" \
	-lookup customer=file:"$dir/profiles/customer.jsonl" \
	-alerts "$dir/alerts.jsonl" -cpuprofile "$dir/default-data.prof"
"$dir/cepheus" backtest -q -rules rulesets/cards.cep -events "$dir/many-keys.jsonl" \
	-lookup customer=file:"$dir/many-keys-profiles/customer.jsonl" \
	-alerts "$dir/alerts.jsonl" -cpuprofile "$dir/many-keys.prof"
go tool pprof -proto "$dir/default-data.prof" "$dir/many-keys.prof" >cmd/cepheus/default.pgo
echo "wrote cmd/cepheus/default.pgo ($(wc -c <cmd/cepheus/default.pgo) bytes)" >&2
