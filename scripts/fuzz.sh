#!/usr/bin/env bash
# Fuzzes for a bounded time, and fails on the first finding:
#   1. the message decoder, coverage-guided with cargo fuzz (libFuzzer; the stable toolchain runs
#      it with --sanitizer none), from the seeds in hermes-core/fuzz/seeds;
#   2. every driver's path from raw bytes to a delivery: rounds of random inputs (random bytes,
#      valid messages with bytes changed, fields of other JSON types) pushed as a foreign
#      producer would, each delivered or quarantined, and a good message behind them delivered.
#
#   ./scripts/fuzz.sh [seconds]   each part runs this long (default 60; part 2 per driver)
#
# Part 2 needs the servers the test command starts; it starts them the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}

if ! command -v cargo-fuzz >/dev/null; then
  cargo install --locked cargo-fuzz
fi
corpus=$(mktemp -d "${TMPDIR:-/tmp}/hermes-fuzz-corpus.XXXXXX")
trap 'rm -rf "$corpus"' EXIT

printf '\n== fuzzing the decoder for %s s\n' "$seconds"
(cd hermes-core && cargo fuzz run decode --sanitizer none "$corpus" fuzz/seeds -- \
  -max_total_time="$seconds" -max_len=65536 -timeout=10 -print_final_stats=1)

printf '\n== random raw inputs on every driver, %s s each\n' "$seconds"
HERMES_FUZZ_SECONDS=$seconds HERMES_TEST_STRICT=1 \
  ./scripts/test.sh --workspace random_raw_inputs_are_delivered_or_quarantined -- --nocapture
