#!/usr/bin/env bash
# End to end on SQS (HERMES_SQS_ENDPOINT, default http://127.0.0.1:4566, e.g. moto): priority
# order, a 3 s delay and two workers stopped by `sqs-shutdown` (see ../e2e.sh).
exec "$(dirname "$0")/../e2e.sh" sqs
