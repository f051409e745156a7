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
for service in ${HERMES_SERVICES:-}; do
  "ensure_$service"
done

cargo test --workspace "$@"

if [ "$#" -eq 0 ]; then
  # The README's run command, end to end.
  ./examples/filesystem/e2e.sh
fi
