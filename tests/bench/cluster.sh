#!/usr/bin/env bash
# Runs the benchmark against the PostgreSQL-backed Temporal cluster (cluster/up.sh), on an instance of its own:
# its own ports and data directory, so that it neither disturbs nor is disturbed by the shared cluster that
# `make test` brings up and down. The instance is stopped on exit; its data is kept for the next run unless
# BENCH_CLUSTER_FRESH=1.
#
#   tests/bench/cluster.sh                   # the full benchmark, results in tests/bench/out/cluster/
#   tests/bench/cluster.sh -phases throughput -n 300
#   CLUSTER_DYNAMIC_CONFIG=my.yaml tests/bench/cluster.sh  # another dynamic config (a lever)
#
# Needs what cluster/up.sh needs (root, Debian's postgresql-15, the Temporal binaries in .bin).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

# A port range clear of the dev server (7233…), the shared cluster (7333…, 55432) and make run's defaults.
base=${BENCH_CLUSTER_PORT_BASE:-17500}
export CLUSTER_FRONTEND_PORT=$((base + 0))
export CLUSTER_FRONTEND_HTTP_PORT=$((base + 10))
export CLUSTER_HISTORY_PORT=$((base + 1))
export CLUSTER_MATCHING_PORT=$((base + 2))
export CLUSTER_WORKER_PORT=$((base + 6))
export CLUSTER_FRONTEND_MEMBERSHIP_PORT=$((base + 20))
export CLUSTER_HISTORY_MEMBERSHIP_PORT=$((base + 21))
export CLUSTER_MATCHING_MEMBERSHIP_PORT=$((base + 22))
export CLUSTER_WORKER_MEMBERSHIP_PORT=$((base + 26))
export CLUSTER_METRICS_PORT=$((base + 30))
export CLUSTER_PG_PORT=$((base + 40))
export CLUSTER_INTERNAL_FRONTEND_PORT=$((base + 3))
export CLUSTER_INTERNAL_FRONTEND_HTTP_PORT=$((base + 13))
export CLUSTER_INTERNAL_FRONTEND_MEMBERSHIP_PORT=$((base + 23))
# The benchmark's clients hold no certificate or token: it measures captchaflow on the cluster without them.
export CLUSTER_AUTH=${CLUSTER_AUTH:-off}
# /var/tmp: the postgres system user must be able to reach the data directory.
state=${BENCH_CLUSTER_DIR:-/var/tmp/captchaflow-bench-cluster}
export CLUSTER_STATE_DIR=$state/state
export CLUSTER_PG_DATA=$state/pg

if [[ ${BENCH_CLUSTER_FRESH:-0} == 1 ]]; then
	cluster/down.sh
	rm -rf "$state"
fi
mkdir -p "$state"

trap 'cluster/down.sh' EXIT
cluster/up.sh --detach
# The server's and PostgreSQL's CPU per task is counted too (PostgreSQL with its backends).
go -C tests run ./bench -temporal-address "127.0.0.1:$CLUSTER_FRONTEND_PORT" -out bench/out/cluster \
	-label "PostgreSQL-backed Temporal cluster (cluster/up.sh, $(basename "${CLUSTER_DYNAMIC_CONFIG:-deploy dynamic config}"))" \
	-server-pid "temporal=$CLUSTER_STATE_DIR/temporal-server.pid" -server-pid "postgres=$CLUSTER_PG_DATA/postmaster.pid" "$@"
