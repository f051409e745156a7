#!/usr/bin/env bash
# End to end on the filesystem driver, no broker needed: queues three report exports (a normal
# one, an urgent one, one delayed by 3 s), runs a worker, checks that the urgent export ran
# first and the delayed one not before its time, then stops two workers with
# filesystem-shutdown and checks that they exit cleanly.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

step() { printf '\n== %s\n' "$*"; }
fail() { printf '\nFAILED: %s\n' "$*" >&2; exit 1; }

step "building the example"
cargo build --quiet -p hermes-example-filesystem
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin="$target/debug"

HERMES_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hermes-e2e.XXXXXX")
export HERMES_DIR
log="$HERMES_DIR/exports.log"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$HERMES_DIR"
}
trap cleanup EXIT
echo "queue directory: $HERMES_DIR"

step "emitting: sales (normal), nightly (delayed 3 s), urgent (high priority)"
emitted_at=$(date +%s.%N)
"$bin/filesystem-emit" sales 2>/dev/null
"$bin/filesystem-emit" nightly 3 2>/dev/null
"$bin/filesystem-emit" urgent 0 high 2>/dev/null
find "$HERMES_DIR" -name '*.json' | sed "s|$HERMES_DIR/||" | sort

step "starting a worker"
"$bin/filesystem-worker" >"$HERMES_DIR/worker-1.out" 2>"$HERMES_DIR/worker-1.err" &
pids+=($!)

for _ in $(seq 1 80); do
  [ -f "$log" ] && [ "$(wc -l <"$log")" -ge 3 ] && break
  sleep 0.25
done
[ -f "$log" ] && [ "$(wc -l <"$log")" -ge 3 ] || fail "three exports did not finish within 20 s"
echo "export log:"
sed 's/^/  /' "$log"

step "checking the order"
order=$(awk '{print $2}' "$log" | paste -sd' ')
[ "$order" = "urgent sales nightly" ] || fail "expected 'urgent sales nightly', got '$order'"
echo "urgent ran before sales, nightly ran last: ok"
nightly_at=$(awk '$2 == "nightly" {print $1}' "$log")
waited=$(awk -v a="$nightly_at" -v b="$emitted_at" 'BEGIN { printf "%.2f", a - b }')
awk -v w="$waited" 'BEGIN { exit !(w >= 3) }' || fail "nightly ran ${waited} s after it was emitted, before its 3 s delay"
echo "nightly ran $waited s after it was emitted (delay 3 s): ok"

step "starting a second worker, then asking both to stop"
"$bin/filesystem-worker" >"$HERMES_DIR/worker-2.out" 2>"$HERMES_DIR/worker-2.err" &
pids+=($!)
sleep 1
"$bin/filesystem-shutdown"
for i in 0 1; do
  pid=${pids[$i]}
  for _ in $(seq 1 40); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$pid" 2>/dev/null; then fail "worker $((i + 1)) is still running 10 s after the shutdown"; fi
  status=0
  wait "$pid" || status=$?
  [ "$status" = 0 ] || fail "worker $((i + 1)) exited with status $status"
  grep -q "Exiting hermes dispatcher - shutdown" "$HERMES_DIR/worker-$((i + 1)).err" ||
    fail "worker $((i + 1)) did not log its shutdown"
  echo "worker $((i + 1)) stopped: $(grep -o 'Exiting hermes dispatcher - shutdown' "$HERMES_DIR/worker-$((i + 1)).err")"
done
pids=()

step "worker 1 log"
sed 's/^/  /' "$HERMES_DIR/worker-1.err"
printf '\ne2e: OK (priority order, delay and shutdown checked)\n'
