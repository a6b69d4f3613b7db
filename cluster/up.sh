#!/usr/bin/env bash
# Starts a real Temporal cluster on this machine without Docker: Debian's PostgreSQL 15 and the Temporal server
# (built from tools/server/go.mod) on 127.0.0.1, with the `default` namespace and captchaflow's search attributes.
#
#   cluster/up.sh            run in the foreground; Ctrl-C (or any exit) stops everything it started
#   cluster/up.sh --detach   start, print the address and return; cluster/down.sh stops it
#
# Re-runnable: a second run reuses the data directory (the schema update is a no-op) and, when the cluster is
# already up, just reports it. Ports and paths: see cluster/lib.sh.
set -euo pipefail

# shellcheck source=cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() { sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

detach=false
ready=false
for arg in "$@"; do
	case $arg in
	--detach | -d) detach=true ;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		usage >&2
		die "unknown argument: $arg"
		;;
	esac
done

[[ $(id -u) == 0 ]] || die "run as root: PostgreSQL is started as the '$PG_OS_USER' system user via runuser"

ensure_postgres_installed() {
	[[ -x $PG_BIN/pg_ctl ]] && return
	log "installing postgresql-$PG_VERSION (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "postgresql-$PG_VERSION" >"$STATE_DIR/apt.log" 2>&1; then
		apt-get update >>"$STATE_DIR/apt.log" 2>&1 || die "apt-get update failed; see $STATE_DIR/apt.log"
		apt-get install -y --no-install-recommends "postgresql-$PG_VERSION" \
			>>"$STATE_DIR/apt.log" 2>&1 || die "installing postgresql-$PG_VERSION failed; see $STATE_DIR/apt.log"
	fi
	[[ -x $PG_BIN/pg_ctl ]] || die "postgresql-$PG_VERSION installed but $PG_BIN/pg_ctl is missing"
	id "$PG_OS_USER" >/dev/null 2>&1 || die "the package did not create the '$PG_OS_USER' user"
}

# ensure_auth_tools installs what cluster/auth-init.sh and mint-token.sh use, if missing.
ensure_auth_tools() {
	command -v openssl >/dev/null && command -v xxd >/dev/null && return
	log "installing openssl and xxd (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	{ apt-get install -y --no-install-recommends openssl xxd || { apt-get update && apt-get install -y --no-install-recommends openssl xxd; }; } \
		>>"$STATE_DIR/apt.log" 2>&1 || die "installing openssl and xxd failed; see $STATE_DIR/apt.log"
}

start_postgres() {
	local data=$1
	if pg_ctl_status "$data" >/dev/null 2>&1; then
		log "PostgreSQL already running ($data)"
		return
	fi
	port_in_use "$CLUSTER_PG_PORT" && die "127.0.0.1:$CLUSTER_PG_PORT is taken by another process; set CLUSTER_PG_PORT"
	if [[ ! -s $data/PG_VERSION ]]; then
		log "initialising PostgreSQL in $data"
		mkdir -p "$data"
		chown "$PG_OS_USER:" "$data"
		chmod 700 "$data"
		# The bootstrap superuser is `temporal`, the role the server and the SQL tool connect as. Trust auth is
		# safe only because the server listens on loopback alone (below) and pg_hba allows nothing else.
		as_postgres "$PG_BIN/initdb" -D "$data" -U temporal --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
			>"$STATE_DIR/initdb.log" 2>&1 || die "initdb failed; see $STATE_DIR/initdb.log"
		printf '%s\n' '# Written by cluster/up.sh: loopback TCP only, trusted.' \
			'host all all 127.0.0.1/32 trust' >"$data/pg_hba.conf"
	fi
	printf '%s\n' "$data" >"$PG_DATA_FILE"
	local pg_log
	pg_log=$(pg_log_file "$data")
	touch "$pg_log" && chown "$PG_OS_USER:" "$pg_log"
	log "starting PostgreSQL on 127.0.0.1:$CLUSTER_PG_PORT"
	# No Unix socket: every client goes through loopback TCP.
	as_postgres "$PG_BIN/pg_ctl" start -D "$data" -l "$pg_log" -w -t 60 \
		-o "-c listen_addresses=127.0.0.1 -c port=$CLUSTER_PG_PORT -c unix_socket_directories=''" >/dev/null ||
		die "PostgreSQL did not start within 60s; see $pg_log"
}

# The schema and namespace steps are the same scripts docker-compose.yml's one-shot jobs run, with the tools from
# .bin instead of the admin-tools image.
migrate_databases() {
	SQL_PLUGIN=postgres12 SQL_HOST=127.0.0.1 SQL_PORT=$CLUSTER_PG_PORT SQL_USER=temporal PATH="$BIN_DIR:$PATH" \
		"$REPO_ROOT/deploy/temporal/setup-schema.sh" >>"$STATE_DIR/schema.log" 2>&1 ||
		die "migrating the databases failed; see $STATE_DIR/schema.log"
}

# register_namespace runs as the cluster's administrator: the only party allowed to create namespaces and endpoints.
register_namespace() {
	local -a env
	mapfile -t env < <(client_env admin admin)
	env "${env[@]}" TEMPORAL_ADDRESS="$FRONTEND_ADDRESS" NAMESPACE="$NAMESPACE" WAIT_SECONDS=30 PATH="$BIN_DIR:$PATH" \
		"$REPO_ROOT/deploy/temporal/register-namespace.sh" || die "registering namespace $NAMESPACE failed"
}

start_server() {
	if pid_alive "$SERVER_PID_FILE" temporal-server; then
		log "Temporal server already running (pid $(<"$SERVER_PID_FILE"))"
		return
	fi
	local port
	for port in "$CLUSTER_FRONTEND_PORT" "$CLUSTER_FRONTEND_HTTP_PORT" "$CLUSTER_HISTORY_PORT" "$CLUSTER_MATCHING_PORT" \
		"$CLUSTER_WORKER_PORT" "$CLUSTER_FRONTEND_MEMBERSHIP_PORT" "$CLUSTER_HISTORY_MEMBERSHIP_PORT" \
		"$CLUSTER_MATCHING_MEMBERSHIP_PORT" "$CLUSTER_WORKER_MEMBERSHIP_PORT" "$CLUSTER_METRICS_PORT" \
		"$CLUSTER_INTERNAL_FRONTEND_PORT" "$CLUSTER_INTERNAL_FRONTEND_HTTP_PORT" "$CLUSTER_INTERNAL_FRONTEND_MEMBERSHIP_PORT"; do
		port_in_use "$port" && die "127.0.0.1:$port is taken by another process; see the CLUSTER_*_PORT settings in cluster/lib.sh"
	done
	log "starting Temporal server (log: $SERVER_LOG)"
	# setsid: the server gets its own process group, so a Ctrl-C meant for this script does not reach it before
	# the trap stops it in order (server first, then PostgreSQL).
	# The internal frontend is not among the default services; the server's own calls need it (lib.sh).
	setsid "$BIN_DIR/temporal-server" --config-file "$CLUSTER_DIR/config/development-postgres12.yaml" \
		start --service frontend --service internal-frontend --service history --service matching --service worker \
		>"$SERVER_LOG" 2>&1 </dev/null &
	echo $! >"$SERVER_PID_FILE"
}

# wait_for_server polls the frontend's health, failing at once (with the log's tail) if the server dies.
wait_for_server() {
	local deadline=$((SECONDS + 90))
	local -a env # the health check needs no token, but the frontend takes no client without a certificate
	mapfile -t env < <(client_env operator operator)
	until timeout 5 env "${env[@]}" "$BIN_DIR/temporal" operator cluster health --address "$FRONTEND_ADDRESS" >/dev/null 2>&1; do
		if ! pid_alive "$SERVER_PID_FILE" temporal-server; then
			log "Temporal server exited; last lines of $SERVER_LOG:"
			tail -n 20 "$SERVER_LOG" >&2
			exit 1
		fi
		((SECONDS < deadline)) || die "Temporal server not healthy on $FRONTEND_ADDRESS after 90s; see $SERVER_LOG"
		sleep 0.5
	done
}

# cleanup stops everything on exit, except after a successful --detach start: a half-started cluster never stays
# behind.
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	if $detach && $ready; then
		exit "$status"
	fi
	log "stopping"
	"$CLUSTER_DIR/down.sh" || status=1
	exit "$status"
}

main() {
	mkdir -p "$STATE_DIR"
	local started=$SECONDS
	ensure_postgres_installed
	ensure_auth_tools
	"$TOOLS_DIR/build.sh" --cluster >&2 || die "building the Temporal binaries failed"

	# From here on, a failure or a signal tears down what was started.
	trap cleanup EXIT INT TERM

	local data
	data=$(pg_data_dir)
	start_postgres "$data"
	migrate_databases
	"$CLUSTER_DIR/auth-init.sh" || die "creating the cluster's certificates and token key failed"
	[[ $CLUSTER_AUTH != off ]] || log "CLUSTER_AUTH=off: no TLS and no authorization, anyone on this host is inside"
	start_server
	wait_for_server
	register_namespace
	ready=true

	log "up in $((SECONDS - started))s"
	cat <<-EOF
		Temporal frontend: $FRONTEND_ADDRESS (namespace $NAMESPACE)
		PostgreSQL:        127.0.0.1:$CLUSTER_PG_PORT (user temporal, data $data)
		Server metrics:    http://127.0.0.1:$CLUSTER_METRICS_PORT/metrics
		Logs:              $STATE_DIR
		Credentials:       $CLUSTER_AUTH_DIR (mTLS: server-ca.pem, client-*.pem; tokens: cluster/mint-token.sh ROLE)
		Use it:            TEMPORAL_ADDRESS=$FRONTEND_ADDRESS and the TEMPORAL_TLS_*/TEMPORAL_API_KEY of docs/operations.md
	EOF
	if $detach; then
		echo "Stop it with:      cluster/down.sh"
		return
	fi
	echo "Press Ctrl-C to stop."
	# Stay until the server exits on its own (then the trap tears PostgreSQL down) or a signal arrives.
	while pid_alive "$SERVER_PID_FILE" temporal-server; do
		sleep 1
	done
	log "Temporal server exited; last lines of $SERVER_LOG:"
	tail -n 20 "$SERVER_LOG" >&2
	exit 1
}

main
