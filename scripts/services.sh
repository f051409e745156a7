# Functions that make sure a test server is running; sourced by scripts/test.sh.
# Each `ensure_<name>` starts the server when it does not answer, and appends the command that
# stops it to the `started` array, so only what was started here is stopped.

# Waits until `$2` succeeds, for at most `$1` seconds.
wait_for() {
  local seconds=$1
  shift
  for _ in $(seq 1 $((seconds * 4))); do
    if "$@" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.25
  done
  echo "gave up waiting for: $*" >&2
  return 1
}
