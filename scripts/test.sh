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

if [ "$#" -gt 0 ]; then
  cargo test "$@"
  exit
fi

# The whole suite: every test binary, the doc tests, the example end to end on every backend and
# the soak runs, as commands run a few at a time (HERMES_TEST_LANES, default 3): they wait on
# servers and timers far more than they use the CPU. Longest first, so the lanes end together.
# The shared SQS server (moto) answers one request at a time: the binaries using it take turns,
# as timings of its tests (a 2 s visibility timeout) slip when it is shared. The one stopping the
# shared RabbitMQ runs last, alone.
# shellcheck source=scripts/lanes.sh
source scripts/lanes.sh
# shellcheck source=scripts/soak.sh
source scripts/soak.sh

echo "== building the tests"
need jq jq
# One line per test binary: package/target (:kind unless an integration test), its package's
# folder (cargo runs a test there), the executable.
binaries=$(mktemp)
started+=("rm -f '$binaries'")
cargo test --workspace --no-run --message-format=json-render-diagnostics |
  jq -r 'select(.reason == "compiler-artifact" and .executable != null and .profile.test)
    | (.package_id | split("#")) as [$path, $version]
    | (if ($version | contains("@")) then ($version | split("@")[0]) else ($path | split("/") | last) end) as $package
    | (if .target.kind == ["test"] then "" else ":" + (.target.kind | join(",")) end) as $kind
    | "\($package)/\(.target.name)\($kind)\t\(.manifest_path | rtrimstr("/Cargo.toml"))\t\(.executable)"' \
    >"$binaries"
cargo build --quiet -p hermes-soak -p hermes-example -p hermes-cli
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')

queue_binaries() { # names to take (empty: every one not in $slow)
  local name dir executable
  while IFS=$'\t' read -r name dir executable; do
    if [ -n "$1" ]; then [ "$name" = "$1" ] || continue
    else case " $(echo $slow) " in *" $name "*) continue ;; esac
    fi
    case $name in
      # The SQS conformance suite times claims against a 2 s visibility timeout: beside other
      # lanes the shared SQS server answers late enough for a claim to lapse.
      hermes-rabbitmq/restart | hermes-sqs/conformance) lane_alone "test $name" "$dir" "$executable" ;;
      hermes-sqs/* | hermes-cli/sqs | hermes/connect | hermes-example/crash)
        LANE_GROUP=moto lane_job "test $name" "$dir" "$executable"
        ;;
      *) lane_job "test $name" "$dir" "$executable" ;;
    esac
  done <"$binaries"
}

# The slowest first, so the lanes end together.
slow="hermes-redis/conformance hermes-soak/catches_faults hermes-testkit/memory_conformance
  hermes-postgres/conformance hermes-fs/conformance hermes-rabbitmq/conformance
  hermes-sqs/conformance hermes-redis/acl_user hermes-sqs/silent_server hermes-redis/outage
  hermes-testkit/suite_catches_faults hermes-rabbitmq/silent_broker"
lane_job "doc tests" . cargo test --workspace --doc
for name in $slow; do queue_binaries "$name"; done
soak_queue "$target/debug/hermes-soak" ci memory fs redis redis-fred rabbitmq sqs postgres
queue_binaries ""
# The README's run command (the filesystem), then the same example on every other backend.
for backend in filesystem redis redis-fred rabbitmq postgres; do
  lane_job "e2e $backend" . ./examples/e2e.sh "$backend"
done
LANE_GROUP=moto lane_job "e2e sqs" . ./examples/e2e.sh sqs

status=0
lane_run "${HERMES_TEST_LANES:-3}" || status=$?
# A test binary counts its tests; a soak or end-to-end run counts as one.
count() { # passed|failed
  awk -v word="$1" '/^test result:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ "^" word) s += $i }
    END { print s + 0 }' "$LANE_LOGS"
}
runs=0 failed_runs=0
for name in "${LANE_PASSED_NAMES[@]}"; do
  case $name in test\ * | doc\ tests) ;; *) runs=$((runs + 1)) ;; esac
done
for name in "${LANE_FAILED_NAMES[@]}"; do
  case $name in test\ * | doc\ tests) ;; *) failed_runs=$((failed_runs + 1)) ;; esac
done
echo
echo "total: $(($(count passed) + runs)) passed, $(($(count failed) + failed_runs)) failed"
exit "$status"
