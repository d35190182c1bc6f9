#!/bin/sh
# Measures the object cache against the raw-MySQL baseline in one run, on
# the bench/load/run.sh setup (64 shards, bench_ databases, bench:c: keys):
#
#   bench/load/cache.sh OUT.md [DURATION]
#
#   1. warm: the server with the cache on (the default), every scenario
#      once to fill it, then get-pin (and get-pin-bare: the same API read
#      beside a primary-key select without the counts), board-page-d0, feed-200, linkbench
#      and create-pin with the lean client, then get-pin, get-pin-bare and board-page-d0
#      with -client net;
#   2. cold: the cache emptied (the bench:c: keys deleted, and the server
#      restarted for an empty near copy) before each of
#      get-pin, board-page-d0 and feed-200, measured from the first request
#      (no warm-up, one api round then one baseline round);
#   3. off: the server restarted with PINSTORE_OBJECT_CACHE=off, the lean
#      scenarios of step 1 again.
#
# Each step's tables (ops/s, api ÷ baseline, hit ratio, CPU per operation by
# process) are appended to OUT.md. DURATION is per scenario and side
# (default 10s).
set -eu
cd "$(dirname "$0")/../.."
out=${1:?usage: bench/load/cache.sh OUT.md [DURATION]}
dur=${2:-10s}
run=bench/load/run.sh
dir=/tmp/bench
lean=get-pin,get-pin-bare,board-page-d0,feed-200,linkbench,create-pin
export PINSTORE_BENCH_TOKEN=bench-load-service-token-0123456789abcdef # run.sh's token
flush() { redis-cli --scan --pattern 'bench:c:*' | xargs -r redis-cli del >/dev/null; }
step() { # title, then bench/load flags
  title=$1
  shift
  printf '\n### %s\n' "$title" >>"$out"
  "$dir/load" -addr 127.0.0.1:18081 -prefix bench_ -shards 64 -redis-prefix bench:o: -cache-prefix bench:c: \
    -state "$dir/state.json" -conns 32 -markdown "$dir/step.md" "$@" >/dev/null 2>"$dir/step.err" ||
    { cat "$dir/step.err" >&2; exit 1; }
  cat "$dir/step.md" >>"$out"
}

: >"$out"
go build -o "$dir/load" ./bench/load
$run stop
$run start
"$dir/load" -addr 127.0.0.1:18081 -prefix bench_ -shards 64 -redis-prefix bench:o: \
  -state "$dir/state.json" -seed-only >/dev/null 2>&1
"$dir/load" -addr 127.0.0.1:18081 -prefix bench_ -shards 64 -redis-prefix bench:o: \
  -state "$dir/state.json" -conns 32 -scenarios "$lean" -duration 2s -mode api >/dev/null 2>&1 # fill the cache
step "warm cache, lean client" -scenarios "$lean" -duration "$dur"
step "warm cache, -client net" -scenarios get-pin,get-pin-bare,board-page-d0 -duration "$dur" -client net
for s in get-pin board-page-d0 feed-200; do
  flush
  $run stop # and the server's near copy with it
  $run start
  step "cold cache: $s from an empty cache" -scenarios "$s" -duration "$dur" -warmup 0 -rounds 1
done
$run stop
PINSTORE_OBJECT_CACHE=off $run start
step "cache off, lean client" -scenarios "$lean" -duration "$dur"
step "cache off, -client net" -scenarios get-pin,get-pin-bare,board-page-d0 -duration "$dur" -client net
$run stop
echo "bench/load/cache.sh: results in $out"
