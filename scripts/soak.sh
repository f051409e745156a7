#!/usr/bin/env bash
# Soaks every driver with hermes-soak: worker processes killed every 1.5 s, one paused for longer
# than the visibility timeout every 5 s, and the broker restarted where the harness can (its own
# Redis with AOF, RabbitMQ with rabbitmqctl, a PostgreSQL cluster of its own). Redis runs a second time behind Sentinel (a master,
# a replica, three sentinels of the run's own, the replica wait on), failing over every 10 s. Fails when a run loses, corrupts or leaves a
# message, when a worker exits by itself, or when more than 2% of handlings are duplicates (3%
# with restarts: with a 2 s visibility timeout, the claims of a worker cut off from a restarting
# broker expire and its messages run again).
# fs, Redis and PostgreSQL then run once more with a concurrency limit of 3 across the workers,
# failing when the handlers' log shows more at once.
# Then stops each broker under a worker (`hermes-soak outage`): a failed emit must return in
# bounded time, the worker must handle again soon after a short outage and exit with an error
# after one longer than its temporary-error timeout.
#
# RabbitMQ runs twice: with delayed messages and no restarts, then with restarts and no delayed
# messages. RabbitMQ moves a delayed message between the delay ladder's classic queues by
# dead-lettering, which it does at most once: a broker stopping at that moment can drop it (see
# the README).
#
#   ./scripts/soak.sh                  the size the test command runs (under a minute a run)
#   ./scripts/soak.sh --long           the size of the README's table
#   ./scripts/soak.sh --long fs redis  some drivers only
#
# Needs redis-server, and the servers of scripts/services.sh (the test command starts them).
set -euo pipefail
cd "$(dirname "$0")/.."

size=ci
if [ "${1:-}" = --long ]; then size=long; shift; fi
drivers=("$@")
if [ "${#drivers[@]}" -eq 0 ]; then drivers=(memory fs redis redis-fred rabbitmq sqs postgres); fi

cargo build --quiet -p hermes-soak
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
soak="$target/debug/hermes-soak"

messages=10000 workers=3 concurrency=4
if [ "$size" = long ]; then messages=20000 workers=4 concurrency=8; fi

run() { # driver messages [extra arguments]
  local driver=$1 count=$2
  shift 2
  printf '\n== soak %s: %s messages %s\n' "$driver" "$count" "$*"
  "$soak" --driver "$driver" --messages "$count" --workers "$workers" \
    --concurrency "$concurrency" --kill-every 1.5s --pause-every 5s --visibility 2s "$@"
}

for driver in "${drivers[@]}"; do
  case $driver in
    redis | redis-fred)
      run "$driver" "$messages" --broker-restart-every 10s --max-duplicates 3
      # Behind Sentinel with the replica wait on: each restart is a failover, and nothing an
      # emit acknowledged may be lost. Claims and acknowledgements the old master had not passed
      # on are lost with it: their messages run again, hence more duplicates.
      run "$driver" "$((messages / 2))" --sentinel --broker-restart-every 10s --max-duplicates 5
      ;;
    rabbitmq)
      run rabbitmq "$messages" --max-duplicates 2
      run rabbitmq "$messages" --broker-restart-every 10s --delayed-percent 0 --max-duplicates 3
      ;;
    sqs) run sqs "$([ "$size" = long ] && echo 2000 || echo 1000)" --max-duplicates 2 ;;
    # On a cluster of the run's own, stopped with `pg_ctl stop -m immediate` every 10 s.
    postgres) run postgres "$messages" --broker-restart-every 10s --max-duplicates 3 ;;
    *) run "$driver" "$messages" --max-duplicates 2 ;;
  esac
done

# A concurrency limit across the worker processes: at most 3 handlers at once, checked in the
# handlers' log. Without pauses: a frozen worker's slot expires with its claim.
for driver in "${drivers[@]}"; do
  case $driver in
    fs | redis | redis-fred | postgres)
      printf '\n== soak %s: limited to 3 at once\n' "$driver"
      "$soak" --driver "$driver" --messages "$((messages / 5))" --workers "$workers" \
        --concurrency "$concurrency" --kill-every 1.5s --visibility 2s --limit 3 --max-duplicates 3
      ;;
  esac
done

# Batches with a success callback and chains of steps under the kill storm (`hermes-soak
# groups`): 200 batches of 50 jobs and 200 chains of 5 steps, a worker SIGKILLed every 1.5 s.
# Fails when a callback or step runs twice (but for a run whose worker was killed before it was
# recorded), out of order or not at all, or when a job is lost. On SQS a tenth: the local server
# (moto) handles some twenty jobs a second.
for driver in "${drivers[@]}"; do
  batches=200
  if [ "$driver" = sqs ]; then batches=20; fi
  printf '\n== groups %s: %s batches of 50, %s chains of 5\n' "$driver" "$batches" "$batches"
  "$soak" groups --driver "$driver" --batches "$batches" --batch-size 50 --chains "$batches" \
    --steps 5 --workers "$workers" --concurrency "$concurrency" --kill-every 1.5s --visibility 2s
done

for driver in "${drivers[@]}"; do
  case $driver in
    redis | redis-fred | rabbitmq | sqs | postgres)
      printf '\n== outage %s\n' "$driver"
      "$soak" outage --driver "$driver"
      ;;
  esac
done
