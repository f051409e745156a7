#!/usr/bin/env bash
# End to end on Redis (HERMES_REDIS_URL, default redis://127.0.0.1:6379), once with the driver on
# the redis crate and once on fred: priority order, a 3 s delay, and two workers stopped by
# `redis-shutdown` (see ../e2e.sh).
set -euo pipefail
here=$(dirname "$0")
HERMES_REDIS_CLIENT=redis "$here/../e2e.sh" redis
HERMES_REDIS_CLIENT=fred "$here/../e2e.sh" redis
