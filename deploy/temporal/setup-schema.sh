#!/bin/sh
# Creates (if missing) and migrates Temporal's two SQL databases to the schema embedded in temporal-sql-tool.
# Safe to re-run: an existing database is kept and an up-to-date schema is left as it is.
#
# Used by docker-compose.yml's temporal-schema job (temporalio/admin-tools) and by cluster/up.sh. POSIX sh: the
# admin-tools image is not guaranteed to have bash.
# Connection: the tool's own SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER, SQL_PASSWORD variables.
# Databases: TEMPORAL_DB (default temporal), VISIBILITY_DB (default temporal_visibility).
set -eu

: "${SQL_PLUGIN:?set SQL_PLUGIN (postgres12)}"
: "${SQL_HOST:?set SQL_HOST}"
export SQL_PLUGIN SQL_HOST

case $SQL_PLUGIN in
postgres12 | postgres12_pgx) schema_root=postgresql/v12 ;;
mysql8) schema_root=mysql/v8 ;;
*)
	echo "setup-schema: unsupported SQL_PLUGIN=$SQL_PLUGIN" >&2
	exit 1
	;;
esac

migrate() {
	db=$1
	schema=$2
	# create-database has no "if not exists"; an existing database is the one failure that is fine.
	if ! out=$(temporal-sql-tool --database "$db" create-database 2>&1); then
		case $out in
		*"already exists"*) ;;
		*)
			printf '%s\n' "$out" >&2
			echo "setup-schema: creating database $db failed" >&2
			return 1
			;;
		esac
	fi
	temporal-sql-tool --database "$db" setup-schema -v 0.0
	temporal-sql-tool --database "$db" update-schema --schema-name "$schema_root/$schema"
	echo "setup-schema: $db is at the latest $schema_root/$schema schema"
}

migrate "${TEMPORAL_DB:-temporal}" temporal
migrate "${VISIBILITY_DB:-temporal_visibility}" visibility
