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

# Installs Debian packages when a command is missing.
need() {
  local command=$1
  shift
  if ! command -v "$command" >/dev/null 2>&1; then
    echo "installing $* for $command"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  fi
}

# Redis on 127.0.0.1:6379.
ensure_redis() {
  need redis-server redis-server
  need redis-cli redis-tools
  # The TLS tests make their certificates with it.
  need openssl openssl
  if redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    return 0
  fi
  echo "starting Redis on 127.0.0.1:6379"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /tmp --logfile /tmp/hermes-redis-6379.log
  wait_for 20 redis-cli -h 127.0.0.1 -p 6379 ping
  started+=("redis-cli -h 127.0.0.1 -p 6379 shutdown nosave")
}

# A three-node Redis Cluster on 127.0.0.1:7001-7003.
ensure_redis_cluster() {
  need redis-server redis-server
  need redis-cli redis-tools
  if redis-cli -h 127.0.0.1 -p 7001 cluster info 2>/dev/null | grep -q cluster_state:ok; then
    return 0
  fi
  local dir
  dir=$(mktemp -d /tmp/hermes-redis-cluster.XXXXXX)
  echo "starting a Redis Cluster on 127.0.0.1:7001-7003 in $dir"
  for port in 7001 7002 7003; do
    redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --cluster-enabled yes \
      --cluster-config-file "$dir/nodes-$port.conf" --dir "$dir" --save "" --appendonly no \
      --logfile "$dir/$port.log"
    started+=("redis-cli -h 127.0.0.1 -p $port shutdown nosave")
  done
  started+=("rm -rf '$dir'")
  for port in 7001 7002 7003; do
    wait_for 20 redis-cli -h 127.0.0.1 -p "$port" ping
  done
  redis-cli --cluster create 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003 \
    --cluster-replicas 0 --cluster-yes >/dev/null
  wait_for 30 sh -c 'redis-cli -h 127.0.0.1 -p 7001 cluster info | grep -q cluster_state:ok'
}

# RabbitMQ on 127.0.0.1:5672 (guest/guest).
ensure_rabbitmq() {
  need rabbitmq-server rabbitmq-server
  if (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
    return 0
  fi
  echo "starting RabbitMQ on 127.0.0.1:5672"
  rabbitmq-server -detached
  wait_for 90 rabbitmq-diagnostics -q ping
  wait_for 30 bash -c 'exec 3<>/dev/tcp/127.0.0.1/5672'
  started+=("rabbitmqctl stop")
}

# PostgreSQL on 127.0.0.1:5432 (trust auth) with the database `test`: the machine's own when it
# answers, else a cluster of our own under /var/tmp, started with pg_ctl.
ensure_postgres() {
  need psql postgresql-client
  if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    need pg_ctlcluster postgresql
    local bin dir
    bin=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d | sort -V | tail -1)
    dir=$(mktemp -d /var/tmp/hermes-postgres.XXXXXX)
    chown postgres "$dir"
    echo "starting PostgreSQL on 127.0.0.1:5432 in $dir"
    runuser -u postgres -- "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
    runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
      -o "-c listen_addresses=127.0.0.1 -p 5432 -k $dir" start >/dev/null
    started+=("runuser -u postgres -- '$bin/pg_ctl' -D '$dir/data' -m fast stop" "rm -rf '$dir'")
    wait_for 30 pg_isready -q -h 127.0.0.1 -p 5432
  fi
  if ! psql -h 127.0.0.1 -U postgres -d postgres -Atc \
    "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1; then
    psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE test"
  fi
}

# An SQS-compatible server (moto, from PyPI) on 127.0.0.1:4566, installed into a virtualenv.
ensure_sqs() {
  if (exec 3<>/dev/tcp/127.0.0.1/4566) 2>/dev/null; then
    return 0
  fi
  local venv=/var/tmp/hermes-moto-venv
  if [ ! -x "$venv/bin/moto_server" ]; then
    echo "installing moto[server] into $venv"
    need python3 python3
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
      rm -rf "$venv"
      apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install -q --disable-pip-version-check 'moto[server]'
  fi
  echo "starting moto (SQS) on 127.0.0.1:4566"
  # moto's ReceiveMessage checks and claims a message without a lock, so two concurrent
  # receives can both get it; a long GIL switch interval makes that check
  # and claim run in one go (waiting long polls release the GIL all the same).
  "$venv/bin/python" -c 'import sys; sys.setswitchinterval(1.0); from moto.server import main; sys.exit(main())' \
    -H 127.0.0.1 -p 4566 >/tmp/hermes-moto.log 2>&1 &
  started+=("kill $!")
  wait_for 60 bash -c 'exec 3<>/dev/tcp/127.0.0.1/4566'
}

# The PHP command line, for the test that runs Hermes' PHP serializer on Rust's messages.
ensure_php() {
  need php php-cli
}

# Debian's Chromium and its WebDriver, for the dashboard's browser test.
ensure_chromium() {
  need chromium chromium
  need chromedriver chromium-driver
}
