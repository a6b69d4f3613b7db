# shellcheck shell=bash disable=SC2034 # the settings here are used by the scripts that source this file
# Shared settings and helpers of cluster/up.sh and cluster/down.sh. Sourced, not run.
#
# Every port and path can be overridden from the environment; the defaults keep clear of the dev server
# (7233/8233) and of a system PostgreSQL (5432). Everything listens on 127.0.0.1 only.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLUSTER_DIR="$REPO_ROOT/cluster"
BIN_DIR="$REPO_ROOT/.bin"
TOOLS_DIR="$REPO_ROOT/tools"

# Runtime state (pid files, logs) lives here; PostgreSQL's data directory too, unless the postgres user cannot
# reach it (see pg_data_dir).
STATE_DIR=${CLUSTER_STATE_DIR:-$REPO_ROOT/.data/cluster}
PG_VERSION=15
PG_BIN=/usr/lib/postgresql/$PG_VERSION/bin
PG_OS_USER=postgres

export CLUSTER_PG_PORT=${CLUSTER_PG_PORT:-55432}
export CLUSTER_FRONTEND_PORT=${CLUSTER_FRONTEND_PORT:-7333}
export CLUSTER_FRONTEND_HTTP_PORT=${CLUSTER_FRONTEND_HTTP_PORT:-7343}
export CLUSTER_HISTORY_PORT=${CLUSTER_HISTORY_PORT:-7334}
export CLUSTER_MATCHING_PORT=${CLUSTER_MATCHING_PORT:-7335}
export CLUSTER_WORKER_PORT=${CLUSTER_WORKER_PORT:-7339}
export CLUSTER_FRONTEND_MEMBERSHIP_PORT=${CLUSTER_FRONTEND_MEMBERSHIP_PORT:-6333}
export CLUSTER_HISTORY_MEMBERSHIP_PORT=${CLUSTER_HISTORY_MEMBERSHIP_PORT:-6334}
export CLUSTER_MATCHING_MEMBERSHIP_PORT=${CLUSTER_MATCHING_MEMBERSHIP_PORT:-6335}
export CLUSTER_WORKER_MEMBERSHIP_PORT=${CLUSTER_WORKER_MEMBERSHIP_PORT:-6339}
export CLUSTER_METRICS_PORT=${CLUSTER_METRICS_PORT:-9333}
# The internal frontend: the server's own services (history's Nexus dispatch and callbacks, the system worker)
# reach the frontend API here, over internode mTLS, past the token check the public frontend makes.
export CLUSTER_INTERNAL_FRONTEND_PORT=${CLUSTER_INTERNAL_FRONTEND_PORT:-7336}
export CLUSTER_INTERNAL_FRONTEND_HTTP_PORT=${CLUSTER_INTERNAL_FRONTEND_HTTP_PORT:-7346}
export CLUSTER_INTERNAL_FRONTEND_MEMBERSHIP_PORT=${CLUSTER_INTERNAL_FRONTEND_MEMBERSHIP_PORT:-6336}
# Certificates and the token signing key (cluster/auth-init.sh); the server config reads them from here.
export CLUSTER_AUTH_DIR=${CLUSTER_AUTH_DIR:-$STATE_DIR/auth}
# off: no TLS and no authorization, anyone on this host is inside (the benchmark's instance, tests/bench/cluster.sh).
export CLUSTER_AUTH=${CLUSTER_AUTH:-on}
export CLUSTER_DYNAMIC_CONFIG=${CLUSTER_DYNAMIC_CONFIG:-$REPO_ROOT/deploy/temporal/dynamicconfig.yaml}

FRONTEND_ADDRESS=127.0.0.1:$CLUSTER_FRONTEND_PORT
NAMESPACE=${CLUSTER_NAMESPACE:-default}
# Search attributes the SolveCaptcha workflow upserts (registered by deploy/temporal/register-namespace.sh).
SEARCH_ATTRIBUTES=(CaptchaTaskId CaptchaPhase CaptchaProvider)

SERVER_PID_FILE=$STATE_DIR/temporal-server.pid
SERVER_LOG=$STATE_DIR/temporal-server.log
PG_DATA_FILE=$STATE_DIR/pg-data-dir # remembers where PostgreSQL's data directory is

log() { printf 'cluster: %s\n' "$*" >&2; }
die() {
	printf 'cluster: ERROR: %s\n' "$*" >&2
	exit 1
}

# wait_until DESCRIPTION TIMEOUT_SECONDS COMMAND... polls COMMAND every half second until it succeeds, and fails
# with DESCRIPTION once TIMEOUT_SECONDS have passed.
wait_until() {
	local what=$1 timeout=$2
	shift 2
	local deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			log "timed out after ${timeout}s waiting for $what"
			return 1
		fi
		sleep 0.5
	done
}

# port_in_use PORT succeeds when something accepts TCP connections on 127.0.0.1:PORT.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pid_alive PIDFILE NAME succeeds when PIDFILE names a live process whose command line contains NAME, so a pid
# recycled by an unrelated process is never mistaken for ours.
pid_alive() {
	local pidfile=$1 name=$2 pid
	[[ -s $pidfile ]] || return 1
	pid=$(<"$pidfile")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[[ -r /proc/$pid/cmdline ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$name"
}

as_postgres() { runuser -u "$PG_OS_USER" -- "$@"; }

# pg_data_dir prints the PostgreSQL data directory: the one recorded by an earlier up, else .data/pg in the work
# tree, else (when the postgres user cannot traverse the work tree's parents, as in a CI clone under a private
# directory) a directory under /var/tmp keyed by the work tree's path.
pg_data_dir() {
	if [[ -s $PG_DATA_FILE ]]; then
		cat "$PG_DATA_FILE"
		return
	fi
	if [[ -n ${CLUSTER_PG_DATA:-} ]]; then
		echo "$CLUSTER_PG_DATA"
		return
	fi
	local in_tree=$REPO_ROOT/.data/pg
	if as_postgres test -x "$REPO_ROOT" 2>/dev/null; then
		echo "$in_tree"
	else
		echo "/var/tmp/captchaflow-cluster-$(printf '%s' "$REPO_ROOT" | cksum | cut -d' ' -f1)/pg"
	fi
}

# pg_log_file DATA_DIR prints where PostgreSQL logs: beside its data directory, where the postgres user can write.
pg_log_file() { echo "$(dirname "$1")/postgres.log"; }

pg_ctl_status() { as_postgres "$PG_BIN/pg_ctl" status -D "$1"; }

# client_env PARTY ROLE [TTL] prints the TEMPORAL_* settings (read by the CLI and the SDK's envconfig) of a client
# with PARTY's certificate and a fresh token of ROLE (cluster/mint-token.sh), one NAME=VALUE a line.
client_env() {
	local party=$1 role=$2 ttl=${3:-600}
	[[ $CLUSTER_AUTH != off ]] || return 0
	[[ -s $CLUSTER_AUTH_DIR/client-$party.pem ]] || die "no certificate for $party in $CLUSTER_AUTH_DIR"
	printf '%s\n' "TEMPORAL_TLS_SERVER_CA_CERT_PATH=$CLUSTER_AUTH_DIR/server-ca.pem" \
		"TEMPORAL_TLS_CLIENT_CERT_PATH=$CLUSTER_AUTH_DIR/client-$party.pem" \
		"TEMPORAL_TLS_CLIENT_KEY_PATH=$CLUSTER_AUTH_DIR/client-$party.key" \
		"TEMPORAL_API_KEY=$("$CLUSTER_DIR/mint-token.sh" "$role" "$ttl")"
}

b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }

# new_signing_key makes the RSA key tokens are signed with (jwt-signing.key) and names it (jwt-signing.kid, the
# kid in each token's header).
new_signing_key() {
	(umask 077 && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$CLUSTER_AUTH_DIR/jwt-signing.key" 2>/dev/null)
	printf 'key-%s-%s\n' "$(date -u +%Y%m%d%H%M%S)" "$RANDOM" >"$CLUSTER_AUTH_DIR/jwt-signing.kid"
}

# write_jwks writes jwks.json, the JSON Web Key Set the server checks tokens against: the public half of the signing
# key, and of the previous one while a rotation lasts (cluster/rotate-token-key.sh).
write_jwks() {
	local name n keys=()
	for name in jwt-signing jwt-signing.previous; do
		[[ -s $CLUSTER_AUTH_DIR/$name.key ]] || continue
		n=$(openssl rsa -in "$CLUSTER_AUTH_DIR/$name.key" -noout -modulus | cut -d= -f2 | xxd -r -p | b64url)
		keys+=("$(printf '{"kty":"RSA","use":"sig","alg":"RS256","kid":"%s","n":"%s","e":"AQAB"}' "$(<"$CLUSTER_AUTH_DIR/$name.kid")" "$n")")
	done
	local IFS=,
	printf '{"keys":[%s]}\n' "${keys[*]}" >"$CLUSTER_AUTH_DIR/jwks.json.new"
	mv "$CLUSTER_AUTH_DIR/jwks.json.new" "$CLUSTER_AUTH_DIR/jwks.json" # whole, never half-written, when the server reads it
}

# temporal_cli runs the Temporal CLI against the cluster as its administrator.
temporal_cli() {
	local -a env
	mapfile -t env < <(client_env admin admin)
	env "${env[@]}" "$BIN_DIR/temporal" "$@" --address "$FRONTEND_ADDRESS"
}
