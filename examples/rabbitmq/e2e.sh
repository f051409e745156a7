#!/usr/bin/env bash
# End to end on RabbitMQ (HERMES_AMQP_URL, default amqp://guest:guest@127.0.0.1:5672/%2f):
# priority order, a 3 s delay through the delay queues, and two workers stopped by
# `rabbitmq-shutdown` (see ../e2e.sh).
exec "$(dirname "$0")/../e2e.sh" rabbitmq
