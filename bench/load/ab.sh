#!/bin/sh
# Compares two pinstore binaries on the bench/load/run.sh setup, each
# against the raw-MySQL baseline in its own run, alternating A and B for
# ROUNDS rounds so that the machine's drift hits both alike:
#
#   bench/load/ab.sh A_BINARY B_BINARY SCENARIOS ROUNDS OUTDIR
#
# Round i writes OUTDIR/a-i.md and OUTDIR/b-i.md (bench/load/run.sh ab:
# 8 s per scenario and side) and prints a table of api ÷ baseline per
# scenario, A's rounds then B's.
set -eu
cd "$(dirname "$0")/../.."
[ $# -eq 5 ] || { sed -n '2,10p' "$0"; exit 2; }
a=$1 b=$2 scen=$3 rounds=$4 out=$5
mkdir -p "$out"
i=1
while [ "$i" -le "$rounds" ]; do
  bench/load/run.sh ab "$a" "$out/a-$i.md" "$scen" >/dev/null
  bench/load/run.sh ab "$b" "$out/b-$i.md" "$scen" >/dev/null
  i=$((i + 1))
done
ratio() { # file scenario: the api ÷ baseline cell of the scenario's row
  awk -F'|' -v s=" $2 " '$2 == s && NF > 7 { gsub(/ /, "", $7); print $7; exit }' "$1"
}
printf '| scenario | A: api ÷ baseline per round | B: api ÷ baseline per round |\n| --- | --- | --- |\n'
for s in $(echo "$scen" | tr , ' '); do
  ra= rb=
  i=1
  while [ "$i" -le "$rounds" ]; do
    ra="$ra $(ratio "$out/a-$i.md" "$s")"
    rb="$rb $(ratio "$out/b-$i.md" "$s")"
    i=$((i + 1))
  done
  printf '| %s |%s |%s |\n' "$s" "$ra" "$rb"
done
