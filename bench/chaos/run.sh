#!/bin/sh
# Runs the two chaos scenarios of bench/chaos/RESULTS.md: 2 minutes without
# faults, then 3 minutes with a server SIGKILL every 20 s and a Redis restart
# every 30 s. Uses databases chaos_00000… (dropped before and after) and a
# private redis-server on port 16399; needs MariaDB on 127.0.0.1:3306.
# Exit status: non-zero when either run found a mismatch.
set -u
cd "$(dirname "$0")/../.."
go build -o /tmp/pinstore-chaos ./cmd/pinstore || exit 2
go build -o /tmp/chaos-harness ./bench/chaos || exit 2
status=0
/tmp/chaos-harness -bin /tmp/pinstore-chaos -duration "${NOFAULT_DURATION:-2m}" -drop -markdown "$@" || status=1
/tmp/chaos-harness -bin /tmp/pinstore-chaos -duration "${FAULT_DURATION:-3m}" -kill-every 20s -redis-flap-every 30s -drop -markdown "$@" || status=1
rm -f /tmp/pinstore-chaos /tmp/chaos-harness
exit $status
