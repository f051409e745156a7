#!/usr/bin/env bash
# Soaks every driver with hermes-soak: worker processes killed every 1.5 s, one paused for longer
# than the visibility timeout every 5 s, and the broker restarted where the harness can (its own
# Redis with AOF, RabbitMQ with rabbitmqctl). Fails when a run loses, corrupts or leaves a
# message, when a worker exits by itself, or when more than 2% of handlings are duplicates.
#
#   ./scripts/soak.sh                  the size the test command runs (under a minute a driver)
#   ./scripts/soak.sh --long           the size of the README's table
#   ./scripts/soak.sh --long fs redis  some drivers only
#
# Needs the servers of scripts/services.sh (the test command starts them), and redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."

size=ci
if [ "${1:-}" = --long ]; then size=long; shift; fi
drivers=("$@")
if [ "${#drivers[@]}" -eq 0 ]; then drivers=(memory fs redis redis-fred rabbitmq sqs); fi

cargo build --quiet -p hermes-soak
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
soak="$target/debug/hermes-soak"

for driver in "${drivers[@]}"; do
  messages=10000 workers=3 concurrency=4 restart=()
  if [ "$size" = long ]; then messages=20000 workers=4 concurrency=8; fi
  case $driver in
    redis | redis-fred) restart=(--broker-restart-every 10s) ;;
    rabbitmq) restart=(--broker-restart-every 15s) ;;
    sqs) if [ "$size" = long ]; then messages=2000; else messages=1000; fi ;;
  esac
  printf '\n== soak %s: %s messages\n' "$driver" "$messages"
  "$soak" --driver "$driver" --messages "$messages" --workers "$workers" \
    --concurrency "$concurrency" --kill-every 1.5s --pause-every 5s --visibility 2s \
    "${restart[@]}" --max-duplicates 2
done
