#!/usr/bin/env bash
# Stops what cluster/up.sh started: the Temporal server, then PostgreSQL. Data is kept; the next up reuses it.
# Safe to run when nothing is running. Fails (non-zero) only if something would not stop.
set -euo pipefail

# shellcheck source=cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

stop_server() {
	if ! pid_alive "$SERVER_PID_FILE" temporal-server; then
		rm -f "$SERVER_PID_FILE"
		return 0
	fi
	local pid
	pid=$(<"$SERVER_PID_FILE")
	log "stopping Temporal server (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	# The server drains its services on SIGTERM; give it a bounded time, then force it.
	if ! wait_until "Temporal server (pid $pid) to exit" 30 bash -c "! kill -0 $pid"; then
		log "killing Temporal server (pid $pid)"
		kill -KILL "$pid" 2>/dev/null || true
		wait_until "Temporal server (pid $pid) to die" 5 bash -c "! kill -0 $pid" || return 1
	fi
	rm -f "$SERVER_PID_FILE"
}

stop_postgres() {
	[[ -s $PG_DATA_FILE ]] || return 0
	local data
	data=$(<"$PG_DATA_FILE")
	[[ -d $data ]] || return 0
	pg_ctl_status "$data" >/dev/null 2>&1 || return 0
	log "stopping PostgreSQL ($data)"
	# pg_ctl waits (bounded by -t) for the postmaster to exit; "fast" rolls back open transactions.
	as_postgres "$PG_BIN/pg_ctl" stop -D "$data" -m fast -w -t 30 >/dev/null ||
		as_postgres "$PG_BIN/pg_ctl" stop -D "$data" -m immediate -w -t 10 >/dev/null
}

status=0
stop_server || status=1
stop_postgres || status=1
((status == 0)) || die "something did not stop; see $STATE_DIR"
log "stopped"
