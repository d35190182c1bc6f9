#!/usr/bin/env bash
# bench/migrate/run.sh: how long the first `pinstore migrate` of a fleet of
# fresh shards takes, beside the same DDL run by four mariadb clients.
#
#   bench/migrate/run.sh            # 4096 shards (the production count)
#   SHARDS=64 bench/migrate/run.sh  # a quick check of the script itself
#
# It uses a private database prefix (PINSTORE_DB_PREFIX), so it can run on a
# server that holds other data, and drops every database it created, also
# when interrupted. Both sides create the same tables: pinstore migrate with
# --per-host 4 (its default: four shards at once on the one host), and four
# mariadb clients in parallel, each running the script `go run
# ./bench/migrate` prints for a quarter of the shards (the statements of
# migrations.Apply, embedded migrations included, in the same order).
# Environment: MYSQL_HOST (127.0.0.1), MYSQL_PORT (3306), MYSQL_USER (root),
# no password.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

SHARDS="${SHARDS:-4096}"
PAR=4
HOST="${MYSQL_HOST:-127.0.0.1}" PORT="${MYSQL_PORT:-3306}" USER_="${MYSQL_USER:-root}"
PREFIX="bmig$$_"
client=(mariadb -u"$USER_" -h"$HOST" -P"$PORT" --batch --skip-column-names)
tmp="$(mktemp -d)"

log() { printf '==> %s\n' "$*" >&2; }

# drop removes every database named PREFIX…, PAR at a time.
drop() {
	local dbs
	dbs="$("${client[@]}" -e "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE '${PREFIX}%'")" || return 0
	[[ -z "$dbs" ]] && return 0
	printf '%s\n' "$dbs" | awk -v n="$PAR" '{ print "DROP DATABASE IF EXISTS `" $1 "`;" > ("'"$tmp"'/drop." (NR % n)) }'
	for f in "$tmp"/drop.*; do "${client[@]}" <"$f" & done
	wait
	rm -f "$tmp"/drop.*
}
cleanup() { drop; rm -rf "$tmp"; }
trap cleanup EXIT

# tables counts the tables of the PREFIX… databases.
tables() { "${client[@]}" -e "SELECT COUNT(DISTINCT table_schema), COUNT(*) FROM information_schema.tables WHERE table_schema LIKE '${PREFIX}%'"; }

log "building pinstore and the DDL generator"
go build -o "$tmp/pinstore" ./cmd/pinstore
go build -o "$tmp/ddl" ./bench/migrate
drop

log "pinstore migrate: $SHARDS shards, --per-host $PAR, prefix $PREFIX"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s.%N)
PINSTORE_DB_PREFIX="$PREFIX" PINSTORE_SHARDS="$SHARDS" PINSTORE_MYSQL_DSN="$USER_@tcp($HOST:$PORT)/" \
	"$tmp/pinstore" migrate --per-host "$PAR" >"$tmp/migrate.log"
end=$(date +%s.%N)
t_pinstore=$(echo "$end - $start" | bc)
made_pinstore="$(tables)"
log "pinstore: ${t_pinstore}s ($made_pinstore databases/tables)"
drop

log "the same DDL through $PAR mariadb clients"
per=$(((SHARDS + PAR - 1) / PAR))
for ((i = 0; i < PAR; i++)); do
	from=$((i * per)) to=$(((i + 1) * per))
	((to > SHARDS)) && to=$SHARDS
	"$tmp/ddl" -prefix "$PREFIX" -from "$from" -to "$to" >"$tmp/ddl.$i.sql"
done
start=$(date +%s.%N)
for ((i = 0; i < PAR; i++)); do "${client[@]}" <"$tmp/ddl.$i.sql" & done
wait
end=$(date +%s.%N)
t_mariadb=$(echo "$end - $start" | bc)
made_mariadb="$(tables)"
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
log "mariadb x$PAR: ${t_mariadb}s ($made_mariadb databases/tables)"

[[ "$made_pinstore" == "$made_mariadb" ]] || { log "the two sides made different tables: $made_pinstore vs $made_mariadb"; exit 1; }
printf 'shards=%s pinstore_migrate_s=%.1f mariadb_x%d_s=%.1f ratio=%.2f tables=%s load_before=%s load_after=%s cores=%s\n' \
	"$SHARDS" "$t_pinstore" "$PAR" "$t_mariadb" "$(echo "$t_pinstore / $t_mariadb" | bc -l)" "$(echo "$made_mariadb" | awk '{print $2}')" \
	"$load_before" "$load_after" "$(nproc)"
