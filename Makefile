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

.DEFAULT_GOAL := help
.PHONY: help build lint test conformance clean

help: ## List the targets.
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z-]*:.*## / { printf "  %-12s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

build: ## Build every package.
	$(GO) build ./...

# The gofmt check skips testdata, vendor and hidden directories, like
# internal/lint's TestGofmt.
lint: ## Check formatting (gofmt), run go vet and the import rules (internal/lint).
	@unformatted=$$(find . \( -name testdata -o -name vendor -o -name '.?*' \) -prune -o -name '*.go' -print0 \
		| xargs -0 -r $(GOFMT) -l); \
	if [ -n "$$unformatted" ]; then echo "gofmt -l reports unformatted files:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test ./internal/lint/

test: lint ## Run lint, then every test (10 minute timeout).
	$(GO) test -count=1 -timeout 10m ./...

conformance: ## Run the Flink CEP conformance suite (CONFORMANCE_DIR, CONFORMANCE_OUT).
	@mkdir -p "$$(dirname "$(CONFORMANCE_OUT)")"
	$(GO) run ./internal/conformance/cmd/conformance -dir "$(CONFORMANCE_DIR)" -out "$(CONFORMANCE_OUT)"

clean: ## Remove build outputs.
	rm -rf build/ cepheus
