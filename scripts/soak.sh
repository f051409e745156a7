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
# Each run is a command of its own; `soak_queue` queues them for scripts/lanes.sh, which runs two
# at a time here (HERMES_SOAK_LANES), and the test command mixes them with the test binaries. A run
# that restarts the shared RabbitMQ, or fails over Sentinel, runs by itself, after the others.

# Queues the runs: soak_queue SOAK_BINARY ci|long DRIVER...
soak_queue() {
  local soak=$1 size=$2
  shift 2
  local drivers=("$@") messages=10000 workers=3 concurrency=4 driver batches group visibility
  if [ "$size" = long ]; then messages=20000 workers=4 concurrency=8; fi
  local storm=(--workers "$workers" --concurrency "$concurrency" --kill-every 1.5s --visibility 2s)
  local checked=("$soak" --driver)
  local every=("${storm[@]}" --pause-every 5s)

  for driver in "${drivers[@]}"; do
    case $driver in
      redis | redis-fred)
        lane_job "soak $driver" . "${checked[@]}" "$driver" --messages "$messages" "${every[@]}" \
          --broker-restart-every 10s --max-duplicates 3
        # Behind Sentinel with the replica wait on: each restart is a failover, and nothing an
        # emit acknowledged may be lost. Claims and acknowledgements the old master had not
        # passed on are lost with it: their messages run again, hence more duplicates.
        # By itself: under load the sentinels' one-second down-after time misfires.
        lane_alone "soak $driver behind sentinel" . "${checked[@]}" "$driver" \
          --messages "$((messages / 2))" "${every[@]}" --sentinel --broker-restart-every 10s \
          --max-duplicates 5
        ;;
      rabbitmq)
        lane_job "soak rabbitmq" . "${checked[@]}" rabbitmq --messages "$messages" "${every[@]}" \
          --max-duplicates 2
        lane_alone "soak rabbitmq with restarts" . "${checked[@]}" rabbitmq \
          --messages "$messages" "${every[@]}" --broker-restart-every 10s --delayed-percent 0 \
          --max-duplicates 3
        ;;
      # On the shared moto, which answers one request at a time: in turn with the other
      # binaries using it.
      sqs)
        LANE_GROUP=moto lane_job "soak sqs" . "${checked[@]}" sqs \
          --messages "$([ "$size" = long ] && echo 2000 || echo 1000)" "${every[@]}" \
          --max-duplicates 2
        ;;
      # On a cluster of the run's own, stopped with `pg_ctl stop -m immediate` every 10 s.
      postgres)
        lane_job "soak postgres" . "${checked[@]}" postgres --messages "$messages" "${every[@]}" \
          --broker-restart-every 10s --max-duplicates 3
        ;;
      *)
        lane_job "soak $driver" . "${checked[@]}" "$driver" --messages "$messages" "${every[@]}" \
          --max-duplicates 2
        ;;
    esac
  done

  # A concurrency limit across the worker processes: at most 3 handlers at once, checked in the
  # handlers' log. Without pauses: a frozen worker's slot expires with its claim.
  for driver in "${drivers[@]}"; do
    case $driver in
      fs | redis | redis-fred | postgres)
        lane_job "soak $driver limited to 3 at once" . "${checked[@]}" "$driver" \
          --messages "$((messages / 5))" "${storm[@]}" --limit 3 --max-duplicates 3
        ;;
    esac
  done

  # Batches with a success callback and chains of steps under the kill storm (`hermes-soak
  # groups`): 200 batches of 50 jobs and 200 chains of 5 steps, a worker SIGKILLed every 1.5 s.
  # Fails when a callback or step runs twice (but for a run whose worker was killed before it was
  # recorded), out of order or not at all, or when a job is lost. On SQS a tenth: the local
  # server (moto) handles some twenty jobs a second, one request at a time, so beside other
  # lanes it may answer a claim's extension later than a 2 s claim lasts (its job would run
  # again while it runs): claims of 6 s there.
  for driver in "${drivers[@]}"; do
    batches=200 group= visibility=2s
    if [ "$driver" = sqs ]; then batches=20 group=moto visibility=6s; fi
    LANE_GROUP=$group lane_job "groups $driver" . "$soak" groups --driver "$driver" \
      --batches "$batches" --batch-size 50 --chains "$batches" --steps 5 \
      --workers "$workers" --concurrency "$concurrency" --kill-every 1.5s --visibility "$visibility"
  done

  for driver in "${drivers[@]}"; do
    case $driver in
      rabbitmq) lane_alone "outage rabbitmq" . "$soak" outage --driver rabbitmq ;;
      redis | redis-fred | sqs | postgres)
        lane_job "outage $driver" . "$soak" outage --driver "$driver"
        ;;
    esac
  done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  cd "$(dirname "$0")/.."
  # shellcheck source=scripts/lanes.sh
  source scripts/lanes.sh

  size=ci
  if [ "${1:-}" = --long ]; then size=long; shift; fi
  drivers=("$@")
  if [ "${#drivers[@]}" -eq 0 ]; then drivers=(memory fs redis redis-fred rabbitmq sqs postgres); fi

  cargo build --quiet -p hermes-soak
  target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  soak_queue "$target/debug/hermes-soak" "$size" "${drivers[@]}"
  lane_run "${HERMES_SOAK_LANES:-2}"
fi
