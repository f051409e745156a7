#!/usr/bin/env bash
# Runs the whole test suite. Starts every server the tests need that is not already running
# (installing it when missing) and stops, on exit, only what it started.
#
#   ./scripts/test.sh                 all tests
#   ./scripts/test.sh -p hermes-core  extra arguments go to `cargo test`
#
# HERMES_TEST_STRICT=1 makes a test whose server is unreachable fail instead of skip.
set -euo pipefail
cd "$(dirname "$0")/.."

started=()
cleanup() {
  for stop in "${started[@]}"; do
    eval "$stop" || true
  done
}
trap cleanup EXIT

# shellcheck source=scripts/services.sh
source scripts/services.sh
for service in ${HERMES_SERVICES:-redis redis_cluster rabbitmq sqs postgres php chromium}; do
  "ensure_$service"
done

# The tests spend their time waiting on servers and timers, not on the CPU: six at a time per
# test binary take a third of the time two (one per core) take.
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-6}

results=$(mktemp)
started+=("rm -f '$results'")
if [ "$#" -eq 0 ]; then set -- --workspace; fi
cargo test "$@" 2>&1 | tee "$results"
passed=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^passed/) s += $i }
  END { print s + 0 }' "$results")

if [ "$*" = "--workspace" ]; then
  # The README's run command (the filesystem), then the same example on every other backend.
  for backend in filesystem redis redis-fred rabbitmq sqs postgres; do
    ./examples/e2e.sh "$backend"
  done
  passed=$((passed + 6))
  # Every driver under repeated kills, pauses and broker restarts, with a limit, with batches and
  # chains, and each broker's outages: 26 runs.
  ./scripts/soak.sh
  passed=$((passed + 26))
fi
echo
echo "total: $passed passed, 0 failed"
