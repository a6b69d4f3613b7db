#!/usr/bin/env bash
# Prints the TEMPORAL_* settings of a client of the local cluster, one NAME=VALUE a line: PARTY's certificate
# (captchaflow, shop, operator, admin) and a fresh token of ROLE (cluster/mint-token.sh), valid TTL seconds
# (default 3600). The Temporal CLI and captchaflow's worker, ingress and starter read them (the SDK's envconfig):
#
#   set -a; source <(cluster/client-env.sh shop shop-worker); set +a
#   go run ./starter --via nexus --namespace shop ...
#
# The e2e tests run it (E2E_TEMPORAL_CREDENTIALS) for each party they play.
set -euo pipefail

# shellcheck source=cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $# -ge 2 ]] || die "usage: cluster/client-env.sh PARTY ROLE [TTL]"
client_env "$1" "$2" "${3:-3600}"
