#!/usr/bin/env bash
# Prints a JWT for one role of the local cluster, signed with the cluster's key (cluster/auth-init.sh):
#
#   cluster/mint-token.sh ROLE [TTL]     TTL in seconds, default 3600
#
# Roles (permissions claim, read by the server's default claim mapper and authorizer; NS is captchaflow's
# namespace, $CLUSTER_NAMESPACE, default `default`; SHOP the caller team's, $CLUSTER_CALLER_NAMESPACE, default shop):
#   captchaflow-worker   NS:write               captchaflow's worker, ingress and starter
#   shop-worker          SHOP:write             the caller team's worker and starter: its namespace, and the endpoint
#   operator             NS:read SHOP:read      reads both, writes nothing
#   admin                temporal-system:admin  namespace and endpoint registration (cluster/up.sh)
#
# A client sends it as "Authorization: Bearer TOKEN" (TEMPORAL_API_KEY for the SDK's envconfig and the CLI).
set -euo pipefail

# shellcheck source=cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

role=${1:?usage: cluster/mint-token.sh ROLE [TTL]}
ttl=${2:-3600}
shop=${CLUSTER_CALLER_NAMESPACE:-shop}
case $role in
captchaflow-worker) permissions="\"$NAMESPACE:write\"" ;;
shop-worker) permissions="\"$shop:write\"" ;;
operator) permissions="\"$NAMESPACE:read\",\"$shop:read\"" ;;
admin) permissions='"temporal-system:admin"' ;;
*) die "unknown role $role (captchaflow-worker, shop-worker, operator, admin)" ;;
esac
[[ $ttl =~ ^[0-9]+$ ]] || die "TTL must be whole seconds: $ttl"
[[ -s $CLUSTER_AUTH_DIR/jwt-signing.key ]] || die "no signing key in $CLUSTER_AUTH_DIR: start the cluster (cluster/up.sh) first"

now=$(date +%s)
header=$(printf '{"alg":"RS256","typ":"JWT","kid":"%s"}' "$(<"$CLUSTER_AUTH_DIR/jwt-signing.kid")" | b64url)
claims=$(printf '{"sub":"%s","iat":%d,"exp":%d,"permissions":[%s]}' "$role" "$now" $((now + ttl)) "$permissions" | b64url)
signature=$(printf '%s.%s' "$header" "$claims" | openssl dgst -sha256 -sign "$CLUSTER_AUTH_DIR/jwt-signing.key" -binary | b64url)
printf '%s.%s.%s\n' "$header" "$claims" "$signature"
