#!/bin/sh
# The LinkBench mix (or another scenario) against one MariaDB master with
# two replicas, with replica reads off (everything on the master) and on,
# alternating:
#
#   bench/load/replicas.sh OUT.md [ROUNDS] [DURATION] [CACHE] [SCENARIO]
#
# It starts three private mariadbd processes (ports 23401-23403, data in
# /tmp/bench-replicas, semi-synchronous, binary logs), migrates 64 shards
# on the master, adds the replicas with `pinstore replica add`, seeds
# through the API, then runs `bench/load -mode api -scenarios linkbench`
# ROUNDS times (default 2) per mode for DURATION each (default 15s), with
# the object cache CACHE (on or off, default on); SCENARIO (default
# linkbench) names another bench/load scenario, such as create-pin (a
# write, which with replica reads on also reads its consistency token).
# Around each run it reads
# SHOW GLOBAL STATUS on the three servers (Com_select, Com_insert,
# Com_update, Com_delete, Questions) and /proc CPU of each mariadbd, and
# writes throughput, the master's share of statements and CPU per
# operation into OUT.md. Everything is removed afterwards.
set -eu
cd "$(dirname "$0")/../.."
out=${1:?usage: bench/load/replicas.sh OUT.md [ROUNDS] [DURATION] [CACHE] [SCENARIO]}
rounds=${2:-2}
duration=${3:-15s}
cache=${4:-on}
scenario=${5:-linkbench}
dir=/tmp/bench-replicas
ports="23401 23402 23403"
pids=""
cleanup() {
  [ -f "$dir/server.pid" ] && kill "$(cat "$dir/server.pid")" 2>/dev/null || true
  for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
  sleep 1
  rm -rf "$dir"
}
trap cleanup EXIT
rm -rf "$dir" && mkdir -p "$dir"
go build -o "$dir/pinstore" ./cmd/pinstore
go build -o "$dir/load" ./bench/load

user=""
[ "$(id -u)" = 0 ] && user=--user=root
id=0
for port in $ports; do
  id=$((id + 1))
  d=$dir/m$id
  mkdir -p "$d"
  mariadb-install-db --no-defaults --datadir="$d" --auth-root-authentication-method=normal --skip-test-db $user >/dev/null 2>&1
  role="--rpl-semi-sync-master-enabled=ON"
  [ $id -gt 1 ] && role="--rpl-semi-sync-master-enabled=OFF --read-only=ON"
  # shellcheck disable=SC2086
  mariadbd --no-defaults --datadir="$d" --tmpdir="$d" $user --port="$port" --bind-address=127.0.0.1 \
    --socket="$d/sock" --pid-file="$d/pid" --log-error="$d/err.log" --skip-name-resolve \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
    --innodb-buffer-pool-size=256M --innodb-log-file-size=64M --innodb-flush-log-at-trx-commit=2 \
    --max-connections=500 --table-open-cache=4000 --table-definition-cache=4000 --performance-schema=0 \
    --log-bin="$d/binlog" --server-id=$id --log-slave-updates --gtid-strict-mode=ON --binlog-format=ROW \
    --rpl-semi-sync-slave-enabled=ON --rpl-semi-sync-master-wait-point=AFTER_SYNC $role &
  pids="$pids $!"
done
for port in $ports; do
  i=0
  until mariadb -h127.0.0.1 -P"$port" -uroot -e 'SELECT 1' >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -gt 300 ] && { echo "mariadbd on $port did not start" >&2; exit 1; }; sleep 0.2
  done
  mariadb -h127.0.0.1 -P"$port" -uroot -e "SET SESSION sql_log_bin = 0; CREATE USER pinstore@'%';
    GRANT ALL PRIVILEGES ON *.* TO pinstore@'%'; REVOKE SUPER, READ_ONLY ADMIN ON *.* FROM pinstore@'%'"
done
cat >"$dir/map.yaml" <<MAP
shards: 64
db_prefix: bench_
hosts:
  a: {master: "pinstore@tcp(127.0.0.1:23401)/"}
ranges:
  - {shards: 0-63, host: a}
MAP
export PINSTORE_SHARD_MAP=$dir/map.yaml PINSTORE_REDIS_PREFIX=bench-replicas:o: PINSTORE_OBJECT_CACHE_PREFIX=bench-replicas:c: \
  PINSTORE_CURSOR_SECRET=benchsecret PINSTORE_DEV=true PINSTORE_RATE_LIMIT=0 PINSTORE_MYSQL_ADMIN=root PINSTORE_OBJECT_CACHE=$cache
"$dir/pinstore" migrate >/dev/null
"$dir/pinstore" replica add --host a --dsn 'pinstore@tcp(127.0.0.1:23402)/' >/dev/null
"$dir/pinstore" replica add --host a --dsn 'pinstore@tcp(127.0.0.1:23403)/' >/dev/null
redis-cli --scan --pattern 'bench-replicas:*' | xargs -r redis-cli del >/dev/null

serve() { # serve READS
  PINSTORE_REPLICA_READS=$1 "$dir/pinstore" serve --addr 127.0.0.1:18091 >"$dir/server-$1.log" 2>&1 &
  echo $! >"$dir/server.pid"
  i=0
  until curl -sf http://127.0.0.1:18091/healthz >/dev/null; do i=$((i + 1)); [ $i -gt 100 ] && exit 1; sleep 0.1; done
  sleep 1 # the tracker's first polls
}
unserve() { kill "$(cat "$dir/server.pid")"; rm -f "$dir/server.pid"; sleep 1; }
load="-addr 127.0.0.1:18091 -prefix bench_ -shards 64 -redis-prefix bench-replicas:o: -state $dir/state.json -conns 32"
serve off
"$dir/load" $load -seed-only >/dev/null 2>&1
unserve

# snap FILE: statement counters of each server and CPU ticks of each mariadbd.
snap() {
  : >"$1"
  n=0
  for port in $ports; do
    n=$((n + 1))
    mariadb -h127.0.0.1 -P"$port" -uroot -N -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select','Com_insert','Com_update','Com_delete','Questions')" |
      sed "s/^/m$n /" >>"$1"
  done
  n=0
  for p in $pids; do
    n=$((n + 1))
    echo "m$n cpu $(awk '{print $14+$15}' "/proc/$p/stat")" >>"$1"
  done
}
echo "| round | replica reads | ops/s | master's share of Com_select | of all statements (Questions) | mariadbd CPU ms/op: master, replica 1, replica 2 |" >"$out"
echo "| --- | --- | --- | --- | --- | --- |" >>"$out"
r=0
while [ $r -lt "$rounds" ]; do
  r=$((r + 1))
  for reads in off on; do
    serve $reads
    snap "$dir/before"
    "$dir/load" $load -mode api -scenarios "$scenario" -duration "$duration" -rounds 1 -markdown "$dir/run.md" >/dev/null 2>&1
    snap "$dir/after"
    unserve
    ops=$(grep "^| $scenario " "$dir/run.md" | head -1 | awk -F'|' '{print $3}' | tr -d ' ')
    awk -v ops="$ops" -v round=$r -v reads=$reads -v dur="$duration" '
      FNR == NR { b[$1 " " $2] = $3; next }
      { d[$1 " " $2] = $3 - b[$1 " " $2] }
      END {
        sel = d["m1 Com_select"] + d["m2 Com_select"] + d["m3 Com_select"]
        q = d["m1 Questions"] + d["m2 Questions"] + d["m3 Questions"]
        secs = dur; sub(/s$/, "", secs)
        n = ops * secs
        printf "| %d | %s | %s | %.1f%% (%d of %d) | %.1f%% (%d of %d) | %.3f, %.3f, %.3f |\n", round, reads, ops,
          100 * d["m1 Com_select"] / sel, d["m1 Com_select"], sel, 100 * d["m1 Questions"] / q, d["m1 Questions"], q,
          10 * d["m1 cpu"] / n, 10 * d["m2 cpu"] / n, 10 * d["m3 cpu"] / n
      }' "$dir/before" "$dir/after" >>"$out"
  done
done
redis-cli --scan --pattern 'bench-replicas:*' | xargs -r redis-cli del >/dev/null
cat "$out"
