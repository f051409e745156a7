#!/usr/bin/env bash
# End to end on the filesystem driver, no broker needed: priority order, a 3 s delay, and two
# workers stopped by `filesystem-shutdown` (see ../e2e.sh).
exec "$(dirname "$0")/../e2e.sh" filesystem
