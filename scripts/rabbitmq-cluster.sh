#!/usr/bin/env bash
# Runs a three-node RabbitMQ cluster on this machine, next to the broker of scripts/services.sh:
# nodes hermes-c1@localhost, hermes-c2@localhost and hermes-c3@localhost, AMQP (guest/guest) on
# 127.0.0.1:5681-5683, Erlang distribution on 127.0.0.1:25681-25683, no plugins, and nothing
# read from /etc/rabbitmq. Each node keeps its data and logs in its own folder under
# $HERMES_CLUSTER_DIR (/var/tmp/hermes-rabbitmq-cluster unless set), so a stopped node comes
# back with its queues and rejoins the cluster by itself. The nodes share the Erlang cookie that
# `rabbitmqctl` uses: as root they run as the rabbitmq user, like Debian's wrappers do, so plain
# `rabbitmqctl -n hermes-c2@localhost ...` works too.
#
#   ./scripts/rabbitmq-cluster.sh start         starts the nodes not running, joins nodes 2 and 3
#                                               to node 1 when they are not clustered yet, and
#                                               prints the three AMQP URLs ("cluster up: ...")
#   ./scripts/rabbitmq-cluster.sh stop-node 2   stops one node (waits until it is down)
#   ./scripts/rabbitmq-cluster.sh start-node 2  starts it again (waits until it has booted)
#   ./scripts/rabbitmq-cluster.sh status        cluster_status, from the first node that answers
#   ./scripts/rabbitmq-cluster.sh leader QUEUE [VHOST]
#                                               the node name of the quorum queue's leader
#   ./scripts/rabbitmq-cluster.sh stop          stops the three nodes, keeps their data
#   ./scripts/rabbitmq-cluster.sh clean         stops them and deletes $HERMES_CLUSTER_DIR
#   ./scripts/rabbitmq-cluster.sh node-loss     starts the cluster and runs the node-loss run
#                                               (hermes-rabbitmq's example node_loss): the
#                                               quorum queue's leader node stops while a worker
#                                               and an emitter are busy, and comes back; fails
#                                               when a confirmed message was not handled
#                                               ($HERMES_NODE_LOSS_N messages, 20,000 unless set)
#
# Every wait gives up after $HERMES_CLUSTER_TIMEOUT seconds (60 unless set). A node that was
# not the last of the cluster to stop waits at boot for the nodes that stopped after it, so
# `start` launches all stopped nodes before waiting for any; `start-node` of that node alone,
# with the others stopped, times out.
#
# Needs Debian's rabbitmq-server (3.10 tested), whose binaries live in /usr/lib/rabbitmq/bin.
set -euo pipefail
cd "$(dirname "$0")/.."

base=${HERMES_CLUSTER_DIR:-/var/tmp/hermes-rabbitmq-cluster}
wait_seconds=${HERMES_CLUSTER_TIMEOUT:-60}
host=localhost
all=(1 2 3)

bin=/usr/lib/rabbitmq/bin
if [ ! -x "$bin/rabbitmqctl" ]; then
  found=$(command -v rabbitmqctl) || {
    echo "rabbitmqctl not found: install rabbitmq-server" >&2
    exit 1
  }
  bin=$(dirname "$(readlink -f "$found")")
fi
epmd=$(command -v epmd || echo /usr/lib/erlang/bin/epmd)

# As root, run everything as the rabbitmq user (with its home, so its ~/.erlang.cookie), which
# is what Debian's /usr/sbin/rabbitmqctl does; otherwise as the invoking user, with theirs.
as_user=()
owner=
if [ "$(id -u)" = 0 ] && id rabbitmq >/dev/null 2>&1; then
  as_user=(runuser -u rabbitmq --)
  owner=rabbitmq
fi

# For the nodes and the command line tools alike: our own (empty) rabbitmq-env.conf instead of
# /etc/rabbitmq's, and Erlang distribution on the loopback interface only.
export RABBITMQ_CONF_ENV_FILE="$base/rabbitmq-env.conf"
export ERL_EPMD_ADDRESS=127.0.0.1
export ERL_FLAGS="-kernel inet_dist_use_interface {127,0,0,1}"

node() { echo "hermes-c$1@$host"; }
dir() { echo "$base/c$1"; }
log() { echo "$(dir "$1")/log/$(node "$1").log"; }
url() { echo "amqp://guest:guest@127.0.0.1:$((5680 + $1))/%2f"; }

check_node() {
  case ${1:-} in
    1 | 2 | 3) ;;
    *)
      echo "the node is 1, 2 or 3, not '${1:-}'" >&2
      exit 2
      ;;
  esac
}

# rabbitmqctl against node $1, bounded in time.
ctl() {
  local n=$1
  shift
  (cd / && timeout -k 5 "$wait_seconds" "${as_user[@]}" "$bin/rabbitmqctl" -n "$(node "$n")" "$@")
}

# Whether node $1's Erlang VM is up (registered with epmd), whether or not RabbitMQ has booted.
running() {
  "$epmd" -names 2>/dev/null | grep -q "^name hermes-c$1 at port "
}

# Writes the configuration shared by the nodes and node $1's own.
prepare() {
  local n=$1 d
  d=$(dir "$n")
  mkdir -p "$base/conf.d" "$d/log" "$d/mnesia"
  [ -f "$base/rabbitmq-env.conf" ] ||
    echo "# Read instead of /etc/rabbitmq/rabbitmq-env.conf; the settings are in the environment." \
      >"$base/rabbitmq-env.conf"
  echo '[].' >"$base/enabled_plugins"
  cat >"$d/rabbitmq.conf" <<EOF
listeners.tcp.1 = 127.0.0.1:$((5680 + n))
loopback_users = none
EOF
  if [ -n "$owner" ]; then
    chown -R "$owner:" "$base"
  fi
}

# Starts node $1 in the background, detached from this shell and its output.
launch() {
  local n=$1 d
  d=$(dir "$n")
  prepare "$n"
  echo "starting $(node "$n") (log: $(log "$n"))"
  (
    cd "$base"
    exec setsid "${as_user[@]}" env \
      RABBITMQ_NODENAME="$(node "$n")" \
      RABBITMQ_DIST_PORT=$((25680 + n)) \
      RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" \
      RABBITMQ_CONFIG_FILES="$base/conf.d/*.conf" \
      RABBITMQ_ADVANCED_CONFIG_FILE="$base/advanced.config" \
      RABBITMQ_ENABLED_PLUGINS_FILE="$base/enabled_plugins" \
      RABBITMQ_MNESIA_BASE="$d/mnesia" \
      RABBITMQ_LOG_BASE="$d/log" \
      RABBITMQ_PID_FILE="$d/rabbitmq.pid" \
      "$bin/rabbitmq-server" >>"$d/log/startup.log" 2>&1 </dev/null
  ) &
  echo $! >"$d/launcher.pid"
}

# Waits until RabbitMQ has booted on node $1.
await() {
  local n=$1 d deadline launcher left
  d=$(dir "$n")
  deadline=$((SECONDS + wait_seconds))
  launcher=$(cat "$d/launcher.pid" 2>/dev/null || true)
  while :; do
    left=$((deadline - SECONDS))
    if ctl "$n" -q await_startup --timeout $((left < 10 ? (left < 1 ? 1 : left) : 10)) \
      >/dev/null 2>&1; then
      return 0
    fi
    if ! running "$n" && [ -n "$launcher" ] && ! kill -0 "$launcher" 2>/dev/null; then
      echo "$(node "$n") exited while starting; see $(log "$n") and $d/log/startup.log" >&2
      tail -n 20 "$d/log/startup.log" >&2 || true
      exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "$(node "$n") did not start within $wait_seconds s; see $(log "$n")" >&2
      if tail -n 5 "$(log "$n")" 2>/dev/null | grep -q 'Waiting for Mnesia tables'; then
        echo "(it waits for the cluster's nodes that stopped after it: \`$0 start\` starts them)" >&2
      fi
      exit 1
    fi
    sleep 1
  done
}

# Whether node $1 is in a cluster with node 1.
clustered() {
  ctl "$1" -q cluster_status --formatter json 2>/dev/null | grep -q "\"$(node 1)\""
}

join() {
  local n=$1
  echo "joining $(node "$n") to $(node 1)"
  ctl "$n" -q stop_app
  ctl "$n" -q join_cluster "$(node 1)"
  ctl "$n" -q start_app
  await "$n"
}

stop_node() {
  local n=$1 d pid deadline
  d=$(dir "$n")
  if ! running "$n"; then
    echo "$(node "$n") is not running"
    return 0
  fi
  echo "stopping $(node "$n")"
  pid=$(cat "$d/rabbitmq.pid" 2>/dev/null || true)
  if [ -n "$pid" ]; then
    ctl "$n" -q stop "$d/rabbitmq.pid" >/dev/null || true
  else
    ctl "$n" -q stop >/dev/null || true
  fi
  deadline=$((SECONDS + wait_seconds))
  while running "$n" || { [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "$(node "$n") did not stop within $wait_seconds s; see $(log "$n")" >&2
      exit 1
    fi
    sleep 0.5
  done
}

start() {
  local n
  # All stopped nodes first: a node that stopped before another waits at boot for it.
  for n in "${all[@]}"; do
    if ! running "$n"; then launch "$n"; fi
  done
  for n in "${all[@]}"; do await "$n"; done
  for n in 2 3; do
    if ! clustered "$n"; then join "$n"; fi
  done
  echo "cluster up: $(url 1) $(url 2) $(url 3)"
}

status() {
  local n
  for n in "${all[@]}"; do
    if running "$n" && ctl "$n" cluster_status; then return 0; fi
  done
  echo "no node of the cluster answers" >&2
  exit 1
}

leader() {
  local queue=$1 vhost=${2:-/} n out
  for n in "${all[@]}"; do
    running "$n" || continue
    out=$(ctl "$n" -q list_queues -p "$vhost" --no-table-headers name type leader 2>/dev/null) ||
      continue
    if awk -F'\t' -v q="$queue" '$1 == q { print $3; found = 1 } END { exit !found }' <<<"$out"; then
      return 0
    fi
    echo "no queue '$queue' in vhost '$vhost'" >&2
    exit 1
  done
  echo "no node of the cluster answers" >&2
  exit 1
}

case ${1:-} in
  start) start ;;
  start-node)
    check_node "${2:-}"
    if ! running "$2"; then launch "$2"; fi
    await "$2"
    echo "$(node "$2") up: $(url "$2")"
    ;;
  stop-node)
    check_node "${2:-}"
    stop_node "$2"
    ;;
  status) status ;;
  leader)
    if [ -z "${2:-}" ]; then
      echo "usage: $0 leader QUEUE [VHOST]" >&2
      exit 2
    fi
    leader "$2" "${3:-/}"
    ;;
  stop) for n in 3 2 1; do stop_node "$n"; done ;;
  node-loss)
    start
    cargo run --quiet --release -p hermes-rabbitmq --example node_loss
    ;;
  clean)
    for n in 3 2 1; do stop_node "$n"; done
    # Only a folder this script made: it holds enabled_plugins or nothing but node folders.
    if [ -d "$base" ]; then
      if [ ! -f "$base/enabled_plugins" ] || [ "$base" = / ]; then
        echo "$base does not look like this script's folder; not deleting it" >&2
        exit 1
      fi
      rm -rf "$base"
      echo "deleted $base"
    fi
    ;;
  *)
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
    exit 2
    ;;
esac
