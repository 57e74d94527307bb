# Cepheus build, lint and test entry points. `make` alone lists the targets.

GO ?= go
GOFMT ?= gofmt

# Recipes run under bash with pipefail, so a failing stage of a pipeline (for
# example gofmt on a file that does not parse) fails the target.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c

# The conformance runner reads every *.json case file in CONFORMANCE_DIR and
# writes what the engine produced to CONFORMANCE_OUT. Both are passed to the
# runner unchanged; relative paths are relative to the repository root.
CONFORMANCE_DIR ?= internal/conformance/testdata
CONFORMANCE_OUT ?= build/conformance-results.json

# The differential test against real Flink CEP (internal/difftest): N random
# cases from SEED in generator PROFILE (narrow: small cases over the whole
# feature space; wide: what users run, long inputs, many keys, several
# rules), minimal reproducing cases of the unexplained disagreements written
# to DIFF_FLINK_OUT. The Flink runner's jar is built when missing
# (scripts/flinkcep-jar.sh; needs java and mvn).
N ?= 200
SEED ?= 1
PROFILE ?= narrow
DIFF_FLINK_EXPLAINED ?= internal/difftest/testdata/explained
DIFF_FLINK_OUT ?= build/diff-flink
DIFF_FLINK_CORPUS ?= internal/difftest/testdata/corpus

# VERSION is stamped into the cepheus binary of build and demo (cepheus
# version prints it when the binary has no module or VCS information, as
# with -buildvcs=false); empty outside a git checkout.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
CEPHEUS_LDFLAGS := -X main.version=$(VERSION)

# make demo writes everything under DEMO_DIR.
DEMO_DIR ?= build/demo

.DEFAULT_GOAL := help
.PHONY: help build demo lint cross test test-go flink-tools kafka-up kafka-down proto pgo conformance diff-flink diff-flink-small diff-flink-corpus diff-flink-explained clean

help: ## List the targets.
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z-]*:.*## / { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

build: ## Build every package, and the cepheus command into build/cepheus.
	$(GO) build ./...
	$(GO) build -ldflags "$(CEPHEUS_LDFLAGS)" -o build/cepheus ./cmd/cepheus

demo: ## Generate 60 days of card history, a busy day and the customers' profiles, backtest rulesets/cards.cep (its customer lookup bound to the profiles), show the alerts.
	@mkdir -p "$(DEMO_DIR)"
	$(GO) build -ldflags "$(CEPHEUS_LDFLAGS)" -o "$(DEMO_DIR)/cepheus" ./cmd/cepheus
	"$(DEMO_DIR)/cepheus" gen -o "$(DEMO_DIR)/events.jsonl.gz" -profiles "$(DEMO_DIR)/profiles"
	"$(DEMO_DIR)/cepheus" backtest -rules rulesets/cards.cep -events "$(DEMO_DIR)/events.jsonl.gz" \
		-lookup customer=file:"$(DEMO_DIR)/profiles/customer.jsonl" \
		-label is_fraud -examples 1 -alerts "$(DEMO_DIR)/alerts.jsonl" \
		-late "$(DEMO_DIR)/late.jsonl" -dead-letter "$(DEMO_DIR)/dead-letter.jsonl"
	@echo
	@echo "Alerts (one JSON object per line): $(DEMO_DIR)/alerts.jsonl"
	@echo "The rules: rulesets/cards.cep (docs/rulesets/cards/ explains each one)."
	@echo "The same as a live, checkpointed run (stop it any way, run it again to resume; docs/operations.md):"
	@echo "  $(DEMO_DIR)/cepheus run -rules rulesets/cards.cep -events $(DEMO_DIR)/events.jsonl.gz -state $(DEMO_DIR)/state -alerts $(DEMO_DIR)/run-alerts -lookup customer=file:$(DEMO_DIR)/profiles/customer.jsonl"

# The gofmt check skips testdata, vendor and hidden directories, like
# internal/lint's TestGofmt.
lint: ## Check formatting (gofmt), run go vet and the import rules (internal/lint).
	@unformatted=$$(find . \( -name testdata -o -name vendor -o -name '.?*' \) -prune -o -name '*.go' -print0 \
		| xargs -0 -r $(GOFMT) -l); \
	if [ -n "$$unformatted" ]; then echo "gofmt -l reports unformatted files:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test ./internal/lint/

# RACE_PKGS are the packages with concurrency, tested again under -race
# (which needs cgo): compiled conditions evaluated from many goroutines
# (rules/internal/cond), concurrent generator runs (internal/gen), the
# differential tester's parallel runners (internal/difftest), the partition
# reader's goroutines and the concurrent checkpoint writer (runtime,
# runtime/state), cep, whose engine the streaming runtime will run on
# several goroutines, enrich, whose lookups run requests concurrently, and
# the control API and metrics exporter, which read a running job's monitor.
RACE_PKGS ?= ./rules/... ./internal/gen/ ./internal/difftest/ ./runtime/... ./cep/ ./enrich/ ./internal/control/ ./internal/metrics/
# The tests that start Kafka brokers of their own (a 3-node cluster, a TLS one, one frozen) run on
# their own after the others: beside the other packages' tests they would load the machine enough
# to make timing-sensitive tests (backpressure, latency) flaky.
HEAVY_TESTS ?= TestExactlyOnceKafkaBrokerFailure|TestKafkaSecure|TestKafkaStopBrokersFrozen|TestKafkaFrozenAmidCommit|TestKafkaTxnLeftOpen

# make test runs test-go with a Kafka broker of its own (scripts/kafka.sh,
# in a temporary directory) for the Kafka tests, unless CEPHEUS_KAFKA_BROKERS
# already names one, and a Redis server of its own (scripts/redis.sh) for the
# lookup tests, unless CEPHEUS_REDIS_ADDR already names one. Both are stopped
# by an EXIT trap of the shell that ran the tests (exactly the processes the
# scripts recorded), so a failing test leaves nothing running; the broker's
# logs are kept (the path is printed) when the tests failed, its data is not
# (hundreds of MB after a full run). A service that
# cannot start fails make test. The Flink comparison runs after they stopped.
test: flink-tools ## What CI runs: flink-tools, test-go with a Kafka broker and a Redis server (unless CEPHEUS_KAFKA_BROKERS / CEPHEUS_REDIS_ADDR name them), diff-flink-small (needs Java 17 and Maven).
	@# A full disk fails tests deep in a run with "no space left on device"
	@# (a CI run did): say so first. A full run from an empty build cache
	@# writes about 2 GiB of temporary files and 3.3 GiB of build cache.
	@for d in "$${TMPDIR:-/tmp}" "$$($(GO) env GOCACHE)"; do \
		free=$$(df -Pk "$$d" 2>/dev/null | awk 'NR == 2 { print int($$4 / 1024) }'); \
		if [ -n "$$free" ] && [ "$$free" -lt 6144 ]; then \
			echo "make test: warning: only $$free MiB free under $$d: a full run needs about 6 GiB (temporary files, Go's build cache; 'go clean -cache' empties the cache)" >&2; \
		fi; \
	done
	@kafka_dir=""; redis_dir=""; \
	trap 'status=$$?; \
		if [ -n "$$redis_dir" ]; then scripts/redis.sh stop -dir "$$redis_dir" && rm -rf "$$redis_dir"; fi; \
		if [ -n "$$kafka_dir" ]; then \
			if [ $$status -eq 0 ]; then scripts/kafka.sh stop -dir "$$kafka_dir" -rm; \
			else scripts/kafka.sh stop -dir "$$kafka_dir"; rm -rf "$$kafka_dir"/node*/data; \
				echo "make test: the Kafka broker'"'"'s logs are in $$kafka_dir/logs (its data was removed)" >&2; fi; \
		fi; \
		exit $$status' EXIT; \
	if [ -n "$${CEPHEUS_KAFKA_BROKERS:-}" ]; then \
		echo "make test: the Kafka tests use CEPHEUS_KAFKA_BROKERS=$$CEPHEUS_KAFKA_BROKERS" >&2; \
	else \
		kafka_dir=$$(mktemp -d "$${TMPDIR:-/tmp}/cepheus-kafka.XXXXXX"); \
		CEPHEUS_KAFKA_BROKERS=$$(JAVA="$(JAVA)" MVN="$(MVN)" scripts/kafka.sh start -dir "$$kafka_dir"); \
		export CEPHEUS_KAFKA_BROKERS; \
	fi; \
	if [ -n "$${CEPHEUS_REDIS_ADDR:-}" ]; then \
		echo "make test: the lookup tests use CEPHEUS_REDIS_ADDR=$$CEPHEUS_REDIS_ADDR" >&2; \
	else \
		redis_dir=$$(mktemp -d "$${TMPDIR:-/tmp}/cepheus-redis.XXXXXX"); \
		CEPHEUS_REDIS_ADDR=$$(scripts/redis.sh start -dir "$$redis_dir"); \
		export CEPHEUS_REDIS_ADDR; \
	fi; \
	$(MAKE) --no-print-directory test-go
	@$(MAKE) --no-print-directory diff-flink-small

# CROSS are the systems cepheus is built for besides Linux, where no test
# runs: make cross (part of test-go) keeps them building.
CROSS ?= darwin/arm64 windows/amd64
cross: ## Vet for CROSS (macOS, Windows): no test runs there, but every package and its tests must compile (go vet type-checks both).
	@for p in $(CROSS); do \
		echo "GOOS=$${p%/*} GOARCH=$${p#*/} go vet ./..."; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet ./... || exit 1; \
	done

test-go: lint cross ## Lint, cross builds, every Go test (15 minute timeout a package: cmd/cepheus alone takes 7-8 minutes), RACE_PKGS under -race; no Java needed (the Kafka tests need CEPHEUS_KAFKA_BROKERS, the lookup tests CEPHEUS_REDIS_ADDR, else they skip, or fail under CI).
	$(GO) test -count=1 -timeout 15m -skip '$(HEAVY_TESTS)' ./...
	$(GO) test -count=1 -timeout 10m -run '$(HEAVY_TESTS)' ./cmd/cepheus
	$(GO) test -race -count=1 -timeout 10m $(RACE_PKGS)

# JAVA and MVN are the commands flink-tools looks for (MVN may carry
# options, as scripts/flinkcep-jar.sh allows); the differential run itself
# runs java from PATH.
JAVA ?= java
MVN ?= mvn

# flink-tools fails at once, before the Go tests, when the differential run
# could not start: it says what is missing and how to install it.
flink-tools: ## Check that java (17 or later) and mvn, which diff-flink-small needs, are installed.
	@missing=""; \
	if ! command -v $(JAVA) >/dev/null 2>&1; then missing="java (Java 17 or later)"; \
	else \
		v=$$($(JAVA) -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1); \
		if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then missing="Java 17 or later (found: $$($(JAVA) -version 2>&1 | head -n 1))"; fi; \
	fi; \
	mvn=$(firstword $(MVN)); \
	if ! command -v $$mvn >/dev/null 2>&1; then missing="$${missing:+$$missing and }mvn (Maven)"; fi; \
	if [ -n "$$missing" ]; then \
		echo "make test: the differential run against Flink CEP (diff-flink-small) needs $$missing, not found on PATH." >&2; \
		echo "  Install Java 17 and Maven: sudo apt-get install openjdk-17-jdk-headless maven (Debian, Ubuntu)," >&2; \
		echo "  sudo dnf install java-17-openjdk-devel maven (Fedora), or brew install openjdk@17 maven (macOS)." >&2; \
		echo "  The first run downloads Flink from Maven Central (about 150 MB in ~/.m2) and caches the runner's" >&2; \
		echo "  jar in ~/.cache/cepheus/flinkcep (about 100 MB a jar, at most 3 kept)." >&2; \
		echo "  Without them, make test-go runs lint and every Go test (not the Flink comparison)." >&2; \
		exit 1; \
	fi

# KAFKA_DIR is where make kafka-up keeps its broker: configuration, data,
# logs and PIDs (scripts/kafka.sh -dir). KAFKA_NODES is 1, or 3 for a
# cluster.
KAFKA_DIR ?= build/kafka
KAFKA_NODES ?= 1

kafka-up: ## Start a local Kafka (KAFKA_NODES=1 or 3; needs Java 17 and Maven); the last line printed is its address, for CEPHEUS_KAFKA_BROKERS.
	@JAVA="$(JAVA)" MVN="$(MVN)" scripts/kafka.sh start -n "$(KAFKA_NODES)" -dir "$(KAFKA_DIR)"

kafka-down: ## Stop the Kafka of make kafka-up (exactly the PIDs it recorded) and remove its data.
	@scripts/kafka.sh stop -dir "$(KAFKA_DIR)" -rm

proto: ## Regenerate the control API's Go code from internal/control/cepheusv1/control.proto (needs protoc; installs the Go plugins); the generated files are committed.
	@command -v protoc >/dev/null || { echo "make proto: protoc is missing (Debian: apt-get install protobuf-compiler)" >&2; exit 1; }
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
	cd internal/control/cepheusv1 && PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative control.proto

pgo: ## Refresh cmd/cepheus/default.pgo, the CPU profile go build optimizes the cepheus command with (scripts/pgo.sh; data in build/pgo).
	scripts/pgo.sh build/pgo

conformance: ## Run the Flink CEP conformance suite (CONFORMANCE_DIR, CONFORMANCE_OUT).
	@mkdir -p "$$(dirname "$(CONFORMANCE_OUT)")"
	$(GO) run ./internal/conformance/cmd/conformance -dir "$(CONFORMANCE_DIR)" -out "$(CONFORMANCE_OUT)"

diff-flink: ## Differential test against Flink CEP: N cases from SEED in PROFILE (make diff-flink N=5000 SEED=7 PROFILE=wide).
	$(GO) run ./internal/difftest/cmd/diffflink -n "$(N)" -seed "$(SEED)" -profile "$(PROFILE)" -out "$(DIFF_FLINK_OUT)"

diff-flink-small: ## The small differential runs of make test: 200 narrow cases, 30 wide ones (seed 1), the documented minimal cases.
	$(GO) run ./internal/difftest/cmd/diffflink -n 200 -seed 1 -profile narrow -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -n 30 -seed 1 -profile wide -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -cases internal/difftest/testdata/minimal -noshrink -out "$(DIFF_FLINK_OUT)"

diff-flink-explained: ## Rewrite the explained corpus (DIFF_FLINK_EXPLAINED) of the fault-injection test: 20000 narrow and 2000 wide cases of seed 100, and picked cases.
	rm -rf "$(DIFF_FLINK_EXPLAINED)"
	$(GO) run ./internal/difftest/cmd/diffflink -n 20000 -seed 100 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/narrow" -out "$(DIFF_FLINK_OUT)" || true
	@test -s "$(DIFF_FLINK_EXPLAINED)/narrow/cases.json"
	$(GO) run ./internal/difftest/cmd/diffflink -n 2000 -seed 100 -profile wide -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/wide" -out "$(DIFF_FLINK_OUT)" || true
	@test -s "$(DIFF_FLINK_EXPLAINED)/wide/cases.json"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 22 -index 4610 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 1 -index 2098,4287 -profile wide -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-wide" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 1203 -index 17498,22578 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-1203" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 4242 -index 15381,23265 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-4242" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 777 -index 24897 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-777" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 1204 -index 18315 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-1204" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 1307 -index 3389 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-1307" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 3032 -index 9960,12853 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-3032" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 3037 -index 8261 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-3037" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 4405 -index 4204 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-4405" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 4407 -index 7266 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-4407" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 4811 -index 958 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-4811" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 1302 -index 5921 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-1302" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 4817 -index 15944 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-4817" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 4815 -index 9346 -profile narrow -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-4815" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -cases internal/difftest/testdata/minimal/restored-processing-clock-next-element.json -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-narrow-3039" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 777 -index 140,2754 -profile wide -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-wide-777" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 1204 -index 2297 -profile wide -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-wide-1204" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 1206 -index 2486,2794 -profile wide -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-wide-1206" -out "$(DIFF_FLINK_OUT)"
	$(GO) run ./internal/difftest/cmd/diffflink -seed 3034 -index 1183 -profile wide -noshrink -keep-explained "$(DIFF_FLINK_EXPLAINED)/picked-wide-3034" -out "$(DIFF_FLINK_OUT)"

diff-flink-corpus: ## Rewrite the regression corpus (DIFF_FLINK_CORPUS) from 400 cases of seed 100.
	rm -rf "$(DIFF_FLINK_CORPUS)"
	$(GO) run ./internal/difftest/cmd/diffflink -n 400 -seed 100 -keep "$(DIFF_FLINK_CORPUS)" -out "$(DIFF_FLINK_OUT)" || true
	@test -s "$(DIFF_FLINK_CORPUS)/cases.json"

clean: ## Remove build outputs.
	rm -rf build/ cepheus

# The side-by-side benchmark with Flink CEP (benchmarks/README.md): the
# workloads of benchmarks/workloads on both engines, one core each, 3 rounds;
# writes benchmarks/RESULTS.md and fails if the engines find different
# matches. W4 (100 rules over 1M keys) runs on Cepheus only, W4-F (the
# same rules over 800 keys) on both. Needs java, mvn and taskset; about
# 30 minutes on 2 cores.
.PHONY: bench-compare bench-cepheus

bench-compare: ## Cepheus against Flink CEP on the benchmark workloads; writes benchmarks/RESULTS.md.
	scripts/bench-compare.sh

bench-cepheus: ## The Cepheus side of bench-compare alone: one round of each workload.
	ROUNDS=1 ENGINES=cepheus scripts/bench-compare.sh
