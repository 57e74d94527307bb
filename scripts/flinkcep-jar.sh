#!/usr/bin/env bash
# Prints the path of the Flink CEP reference runner's shaded jar (benchmarks/flinkcep),
# building it only when its sources changed.
#
# The jar is cached by a hash of benchmarks/flinkcep/pom.xml and src/**:
#   ${CEPHEUS_CACHE:-$HOME/.cache/cepheus}/flinkcep/flinkcep-<hash>.jar
# The build runs on a copy of those files in a temporary directory, so the work tree gets no
# target/ directory and the jar always matches the hashed sources. Only the three most
# recently built jars are kept (each is about 100 MB).
#
# stdout: the jar path, nothing else. Logs and Maven output go to stderr.
# Exit status: non-zero when the build fails.
# Environment: CEPHEUS_CACHE (cache root), MVN (Maven command and options, default mvn),
#   FLINKCEP_SKIP_TESTS=1 to skip the runner's unit tests during the build.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/benchmarks/flinkcep"
cache="${CEPHEUS_CACHE:-$HOME/.cache/cepheus}/flinkcep"
# MVN may carry options (MVN="mvn -Dmaven.repo.local=/tmp/m2"), so it is split on spaces.
read -r -a mvn_cmd <<< "${MVN:-mvn}"

log() { echo "flinkcep-jar: $*" >&2; }

[[ -f "$src/pom.xml" ]] || { log "no $src/pom.xml"; exit 1; }

# The hashed inputs: pom.xml and every file under src/, by path relative to $src, sorted
# bytewise so that the hash does not depend on the locale or on directory order.
inputs() {
  (cd "$src" && { echo pom.xml; find src -type f; } | LC_ALL=C sort)
}

hash="$(
  cd "$src"
  inputs | while IFS= read -r f; do
    printf '%s\0%s\n' "$f" "$(sha256sum < "$f" | cut -d' ' -f1)"
  done | sha256sum | cut -c1-16
)"
jar="$cache/flinkcep-$hash.jar"

if [[ -s "$jar" ]]; then
  echo "$jar"
  exit 0
fi

mkdir -p "$cache"
# One build at a time per cache: a second caller waits, then finds the jar.
exec 9>"$cache/.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi
if [[ -s "$jar" ]]; then
  echo "$jar"
  exit 0
fi

work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
(cd "$src" && inputs | while IFS= read -r f; do
  mkdir -p "$work/$(dirname "$f")"
  cp "$f" "$work/$f"
done)

log "building $jar (sources changed or no cached jar)"
mvn_args=(-q -B -Dstyle.color=never -f "$work/pom.xml" package)
if [[ "${FLINKCEP_SKIP_TESTS:-0}" == 1 ]]; then
  mvn_args+=(-DskipTests)
fi
start=$(date +%s)
if ! "${mvn_cmd[@]}" "${mvn_args[@]}" 1>&2; then
  log "build failed"
  exit 1
fi

built="$(ls "$work"/target/flinkcep-runner-*.jar 2>/dev/null | grep -v '/original-' | head -n1 || true)"
if [[ -z "$built" ]]; then
  log "build produced no shaded jar"
  exit 1
fi
# Same filesystem: the rename is atomic, so a reader never sees a half-written jar.
mv "$built" "$jar.tmp"
mv "$jar.tmp" "$jar"
log "built in $(( $(date +%s) - start ))s"
# Each jar is about 100 MB: keep the three most recent builds, drop older ones.
ls -1t "$cache"/flinkcep-*.jar 2>/dev/null | tail -n +4 | while IFS= read -r old; do
  rm -f -- "$old"
done
echo "$jar"
