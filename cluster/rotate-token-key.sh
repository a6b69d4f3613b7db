#!/usr/bin/env bash
# Rotates the key the cluster's tokens are signed with, without restarting the server:
#
#   cluster/rotate-token-key.sh            a new key signs every token minted from now on; jwks.json lists it and
#                                          the previous one, so tokens of both are accepted. The server re-reads
#                                          jwks.json every minute: a new token is accepted within a minute.
#   cluster/rotate-token-key.sh --finish   once every client runs with a new token: jwks.json drops the previous
#                                          key, and its tokens are refused within a minute.
set -euo pipefail

# shellcheck source=cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ -s $CLUSTER_AUTH_DIR/jwt-signing.key ]] || die "no signing key in $CLUSTER_AUTH_DIR: start the cluster (cluster/up.sh) first"
case ${1:-} in
"")
	[[ ! -e $CLUSTER_AUTH_DIR/jwt-signing.previous.key ]] || die "a rotation is under way: finish it first (--finish)"
	mv "$CLUSTER_AUTH_DIR/jwt-signing.key" "$CLUSTER_AUTH_DIR/jwt-signing.previous.key"
	mv "$CLUSTER_AUTH_DIR/jwt-signing.kid" "$CLUSTER_AUTH_DIR/jwt-signing.previous.kid"
	new_signing_key
	write_jwks
	log "new signing key $(<"$CLUSTER_AUTH_DIR/jwt-signing.kid"); tokens of $(<"$CLUSTER_AUTH_DIR/jwt-signing.previous.kid") stay valid until --finish"
	;;
--finish)
	rm -f "$CLUSTER_AUTH_DIR/jwt-signing.previous.key" "$CLUSTER_AUTH_DIR/jwt-signing.previous.kid"
	write_jwks
	log "jwks.json lists $(<"$CLUSTER_AUTH_DIR/jwt-signing.kid") alone"
	;;
*) die "usage: cluster/rotate-token-key.sh [--finish]" ;;
esac
