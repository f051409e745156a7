#!/usr/bin/env bash
# The report-export example end to end on one backend: `examples/e2e.sh` (the filesystem, no
# broker needed), or `examples/e2e.sh filesystem|redis|redis-fred|rabbitmq|sqs|postgres`. Queues three
# exports (a normal one, an urgent one, one delayed by 3 s), runs a worker, checks that the
# urgent export ran first and the delayed one not before its time and reads the worker's
# metrics, stops two workers with the shutdown program and checks that they exit cleanly, then
# (where the backend has unique emits) runs two workers whose nightly export is set to every
# second and checks that each tick is emitted and exported once. The example's programs
# (`emit`, `worker`, `shutdown`) and `hermes stats` all get the queue from one URL, HERMES_URL.
set -euo pipefail
example=${1:-filesystem}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

step() { printf '\n== %s\n' "$*"; }
fail() { printf '\nFAILED: %s\n' "$*" >&2; exit 1; }

case "$example" in
  filesystem | redis | redis-fred | rabbitmq | sqs | postgres) ;;
  *) fail "usage: examples/e2e.sh [filesystem|redis|redis-fred|rabbitmq|sqs|postgres]" ;;
esac

step "building the example on $example"
cargo build --quiet -p hermes-example -p hermes-cli
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin="$target/debug"

HERMES_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hermes-e2e.XXXXXX")
export HERMES_DIR
# Keys and queues of their own for this run, on a shared broker.
queue="e2e-$(basename "$HERMES_DIR" | tr -dc 'a-zA-Z0-9')"
[ "$example" = filesystem ] && queue=exports
export HERMES_URGENT_QUEUE="${queue}_high"
case "$example" in
  filesystem) HERMES_URL="file://$HERMES_DIR?queue=exports" ;;
  redis | redis-fred)
    client=redis
    [ "$example" = redis-fred ] && client=fred
    HERMES_URL="${HERMES_REDIS_URL:-redis://127.0.0.1:6379}/0?key=$queue&schedule_key=${queue}_schedule&client=$client"
    ;;
  rabbitmq) HERMES_URL="${HERMES_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}?queue=$queue" ;;
  sqs)
    HERMES_URL="sqs://$queue?endpoint=${HERMES_SQS_ENDPOINT:-http://127.0.0.1:4566}&region=us-east-1&visibility_timeout=60"
    # A local server takes any credentials; the programs read them from the environment.
    export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-test} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-test}
    export AWS_EC2_METADATA_DISABLED=true
    ;;
  postgres)
    queue=$(echo "$queue" | tr - _)
    export HERMES_URGENT_QUEUE="${queue}_high"
    HERMES_URL="${HERMES_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}?queue=$queue&schema=hermes_e2e"
    ;;
esac
export HERMES_URL
log="$HERMES_DIR/exports.log"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [[ "$example" == redis* ]] && command -v redis-cli >/dev/null; then
    for suffix in "" _high _schedule _schedule_priorities _schedule_by_priority _in_flight _dead _dead_letters _high_dead _high_dead_letters _shutdown _workers; do
      redis-cli -u "${HERMES_REDIS_URL:-redis://127.0.0.1:6379}" DEL "$queue$suffix" >/dev/null || true
    done
  fi
  if [ "$example" = rabbitmq ] && command -v rabbitmqctl >/dev/null; then
    rabbitmqctl -q list_queues name 2>/dev/null | grep "^$queue" |
      while read -r name; do rabbitmqctl -q delete_queue "$name" </dev/null >/dev/null 2>&1 || true; done
    # The delay ladder's exchanges.
    rabbitmqctl -q list_exchanges name 2>/dev/null | grep "^$queue" |
      while read -r name; do rabbitmqctl -q eval "rabbit_exchange:delete(rabbit_misc:r(<<\"/\">>, exchange, <<\"$name\">>), false, <<\"e2e\">>)." </dev/null >/dev/null 2>&1 || true; done
  fi
  if [ "$example" = sqs ]; then
    # The local SQS server takes unsigned requests; only the service in the credential scope counts.
    local endpoint=${HERMES_SQS_ENDPOINT:-http://127.0.0.1:4566}
    for name in "$queue" "${queue}_high" "$queue-quarantine" "$queue-delay"; do
      curl -s -o /dev/null -H 'Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=0' \
        -d "Action=DeleteQueue&QueueUrl=$endpoint/123456789012/$name" "$endpoint/" || true
    done
  fi
  if [ "$example" = postgres ] && command -v psql >/dev/null; then
    for table in jobs dead_letters; do
      psql "${HERMES_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}" -qc \
        "DELETE FROM hermes_e2e.$table WHERE queue LIKE '${queue}%'" >/dev/null 2>&1 || true
    done
  fi
  rm -rf "$HERMES_DIR"
}
trap cleanup EXIT
echo "working directory: $HERMES_DIR"

# `hermes stats` on the example's queues, through the same URL.
queue_name=$queue
hermes_stats() {
  "$bin/hermes" --url "$HERMES_URL" --priority "$HERMES_URGENT_QUEUE=110" stats "$@"
}
# Whether the default queue's figure `$1` is `$2` in `hermes stats --json` (exactly, or as the
# approximation SQS and RabbitMQ's delay queues give).
figure_is() {
  hermes_stats --json | grep -Eq "\"name\":\"$queue_name\",\"priority\":100,.*\"$1\":($2|\{\"approximate\":$2\})[,}]"
}

step "hermes stats before"
hermes_stats

step "emitting: sales (normal), nightly (delayed 3 s), urgent (high priority)"
emitted_at=$(date +%s.%N)
"$bin/emit" sales 2>/dev/null
"$bin/emit" nightly 3 2>/dev/null
"$bin/emit" urgent 0 high 2>/dev/null
if [ "$example" = filesystem ]; then
  find "$HERMES_DIR" -name '*.json' | sed "s|$HERMES_DIR/||" | sort
fi
hermes_stats
figure_is waiting 1 || fail "hermes stats does not show the sales export waiting"
figure_is delayed 1 || fail "hermes stats does not show the nightly export delayed"

step "starting a worker, its metrics served at /metrics"
metrics_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
HERMES_METRICS_LISTEN="127.0.0.1:$metrics_port" \
  "$bin/worker" >"$HERMES_DIR/worker-1.out" 2>"$HERMES_DIR/worker-1.err" &
pids+=($!)

for _ in $(seq 1 80); do
  [ -f "$log" ] && [ "$(wc -l <"$log")" -ge 3 ] && break
  sleep 0.25
done
[ -f "$log" ] && [ "$(wc -l <"$log")" -ge 3 ] || {
  cat "$HERMES_DIR/worker-1.err" >&2
  fail "three exports did not finish within 20 s"
}
echo "export log:"
sed 's/^/  /' "$log"

step "the worker's metrics"
metrics=$(curl -s "http://127.0.0.1:$metrics_port/metrics") || fail "no answer at the worker's /metrics"
printf '%s\n' "$metrics" | grep -E '^hermes_(handled_total|in_progress)' | sed 's/^/  /'
printf '%s\n' "$metrics" | grep -Eq '^hermes_handled_total\{type="report.export",outcome="ok"\} 3$' ||
  fail "the worker's /metrics does not count the three exports as handled"
echo "three exports handled, as /metrics says: ok"

step "checking the order"
order=$(awk '{print $2}' "$log" | paste -sd' ')
[ "$order" = "urgent sales nightly" ] || fail "expected 'urgent sales nightly', got '$order'"
echo "urgent ran before sales, nightly ran last: ok"
nightly_at=$(awk '$2 == "nightly" {print $1}' "$log")
waited=$(awk -v a="$nightly_at" -v b="$emitted_at" 'BEGIN { printf "%.2f", a - b }')
awk -v w="$waited" 'BEGIN { exit !(w >= 3) }' || fail "nightly ran ${waited} s after it was emitted, before its 3 s delay"
echo "nightly ran $waited s after it was emitted (delay 3 s): ok"

step "starting a second worker, then asking both to stop"
"$bin/worker" >"$HERMES_DIR/worker-2.out" 2>"$HERMES_DIR/worker-2.err" &
pids+=($!)
sleep 1
"$bin/shutdown"
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
  echo "worker $((i + 1)) stopped: Exiting hermes dispatcher - shutdown"
done
pids=()

step "two workers running the nightly export's entry every second"
if [ "$example" = filesystem ] || [ "$example" = postgres ] || [[ "$example" == redis* ]]; then
  # The shutdown signal counts in whole seconds: a worker started in the second it was given
  # would take it as its own.
  sleep 1.2
  for n in 3 4; do
    HERMES_EXPORT_SCHEDULE='* * * * * *' \
      "$bin/worker" >"$HERMES_DIR/worker-$n.out" 2>"$HERMES_DIR/worker-$n.err" &
    pids+=($!)
  done
  sleep 6.5
  for pid in "${pids[@]}"; do kill -TERM "$pid"; done
  for pid in "${pids[@]}"; do wait "$pid" || fail "a scheduling worker exited with status $?"; done
  pids=()
  ticks=$(cat "$HERMES_DIR/worker-3.err" "$HERMES_DIR/worker-4.err" |
    sed -n 's/.*Scheduler entry nightly-export emitted message #cron-nightly-export-\([0-9]*\).*/\1/p' | sort -n)
  [ -n "$ticks" ] || fail "no scheduled export was emitted"
  emitted=$(printf '%s\n' "$ticks" | wc -l)
  distinct=$(printf '%s\n' "$ticks" | uniq | wc -l)
  first=$(printf '%s\n' "$ticks" | head -1)
  last=$(printf '%s\n' "$ticks" | tail -1)
  [ "$emitted" = "$distinct" ] || fail "a tick was emitted twice: $(printf '%s ' $ticks)"
  [ "$distinct" = $((last - first + 1)) ] || fail "ticks are missing between $first and $last: $(printf '%s ' $ticks)"
  [ "$distinct" -ge 5 ] || fail "only $distinct ticks emitted in 6.5 s"
  for n in 3 4; do echo "worker $n emitted ticks: $(sed -n 's/.*emitted message #cron-nightly-export-\([0-9]*\).*/\1/p' "$HERMES_DIR/worker-$n.err" | paste -sd' ')"; done
  # The last tick may still wait: one more worker (on the nightly schedule) exports it.
  "$bin/worker" >"$HERMES_DIR/worker-5.out" 2>"$HERMES_DIR/worker-5.err" &
  pids+=($!)
  for _ in $(seq 1 40); do
    [ "$(grep -c ' nightly-export' "$log" || true)" -ge "$distinct" ] && break
    sleep 0.25
  done
  sleep 0.5
  kill -TERM "${pids[0]}"
  wait "${pids[0]}" || fail "the last worker exited with status $?"
  pids=()
  exported=$(grep -c ' nightly-export' "$log" || true)
  [ "$exported" = "$distinct" ] || fail "$distinct ticks but $exported nightly exports"
  echo "$distinct ticks from $first to $last, each emitted once and exported once: ok"
else
  echo "skipped: $example has no unique jobs, so each worker's scheduler would emit every tick"
fi

step "hermes stats after"
hermes_stats
figure_is waiting 0 || fail "hermes stats shows messages left waiting"
figure_is dead 0 || figure_is dead null || fail "hermes stats shows dead letters"

step "worker 1 log"
sed 's/^/  /' "$HERMES_DIR/worker-1.err"
printf '\ne2e %s: OK (priority order, delay and shutdown checked)\n' "$example"
