#!/bin/sh
# Runs bench/load against a pinstore server on 64 shards (databases
# bench_00000…, Redis keys bench:o:*) on the local MariaDB and Redis.
#
#   bench/load/run.sh start [BINARY]    build (or use BINARY), migrate, serve on 127.0.0.1:18081
#   bench/load/run.sh run [FLAGS...]    go run ./bench/load with the matching flags, plus FLAGS
#   bench/load/run.sh ab BINARY OUT.md SCENARIOS   start BINARY, run SCENARIOS for 8s into OUT.md, stop
#   bench/load/run.sh stop | clean      stop the server | drop the databases, keys and seed state
#
# The seed state (/tmp/bench/state.json) is kept between runs, so only the
# first run seeds. pprof is served on 127.0.0.1:6060 (PINSTORE_DEBUG_ADDR).
# Authentication is on, as in production: every request carries a service
# token (scopes read, write, admin; PINSTORE_BENCH_TOKEN), and the rate
# limit is checked on every request at a rate no run reaches.
set -eu
cd "$(dirname "$0")/../.."
dir=/tmp/bench
mkdir -p "$dir"
export PINSTORE_SHARDS=64 PINSTORE_DB_PREFIX=bench_ PINSTORE_REDIS_PREFIX=bench:o: PINSTORE_OBJECT_CACHE_PREFIX=bench:c: \
  PINSTORE_CURSOR_SECRET=benchsecret PINSTORE_RATE_LIMIT=1000000 \
  PINSTORE_TOKENS_FILE=$dir/tokens.yaml PINSTORE_BENCH_TOKEN=bench-load-service-token-0123456789abcdef \
  PINSTORE_DEBUG_ADDR=127.0.0.1:6060
load="-addr 127.0.0.1:18081 -prefix bench_ -shards 64 -redis-prefix bench:o: -cache-prefix bench:c: -state $dir/state.json -conns 32"

start() {
  bin=${1:-}
  if [ -z "$bin" ]; then
    bin=$dir/pinstore
    go build -o "$bin" ./cmd/pinstore
  fi
  echo "$PINSTORE_BENCH_TOKEN" | "$bin" token hash --name bench-load --scopes read,write,admin >"$dir/tokens.yaml" 2>/dev/null
  "$bin" migrate >/dev/null
  "$bin" serve --addr 127.0.0.1:18081 >"$dir/server.log" 2>&1 &
  echo $! >"$dir/server.pid"
  sleep 1
}
stop() {
  if [ -f "$dir/server.pid" ]; then
    kill "$(cat "$dir/server.pid")" 2>/dev/null || true
    rm -f "$dir/server.pid"
    sleep 1
  fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
start) start "${1:-}" ;;
stop) stop ;;
run) go run ./bench/load $load "$@" ;;
ab)
  stop
  start "$1"
  go build -o "$dir/load" ./bench/load
  "$dir/load" $load -duration 8s -scenarios "$3" -markdown "$2" >/dev/null 2>&1 || true
  stop
  grep -A12 '^| scenario | api:' "$2" ;;
clean)
  stop
  for i in $(seq 0 63); do mysql -uroot -h127.0.0.1 -e "DROP DATABASE IF EXISTS bench_$(printf %05d "$i")"; done
  redis-cli --scan --pattern 'bench:[oc]:*' | xargs -r redis-cli del >/dev/null
  rm -f "$dir/state.json" ;;
*)
  sed -n '2,12p' "$0"
  exit 2 ;;
esac
