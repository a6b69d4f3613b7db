#!/usr/bin/env bash
# Creates the cluster's credentials, once, in $CLUSTER_AUTH_DIR (default .data/cluster/auth; cluster/lib.sh):
#
#   server-ca.pem          the CA of the server's certificate, which clients trust (TEMPORAL_TLS_SERVER_CA_CERT_PATH)
#   server.pem/.key        the frontend's and the internal services' certificate (127.0.0.1, localhost); the
#                          services present it to each other too, and their gRPC ports take no other
#   client-ca.pem          the CA of the client certificates, which the public frontend takes (and server-ca's:
#                          see cluster/config/development-postgres12.yaml)
#   client-NAME.pem/.key   one client certificate per party: captchaflow, shop, operator, admin
#   jwt-signing.key        the RSA key cluster/mint-token.sh signs tokens with (never leaves this directory)
#   jwks.json              its public half, which the server reads (global.authorization.jwtKeyProvider)
#
# Generated at the first `up`, never committed; delete the directory (cluster down first) to start over, or see
# cluster/rotate-token-key.sh to rotate the token key without a restart. Needs openssl and xxd.
set -euo pipefail

# shellcheck source=cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

dir=$CLUSTER_AUTH_DIR
days=${CLUSTER_CERT_DAYS:-30}

# ca NAME SUBJECT: a self-signed CA.
ca() {
	openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/$1.key" \
		-subj "$2" -days "$days" -out "$dir/$1.pem" 2>/dev/null
}

# cert CA NAME SUBJECT USAGE: an EC key and a certificate signed by CA, valid for 127.0.0.1 and localhost.
cert() {
	local ca=$1 name=$2 subject=$3 usage=$4
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/$name.key" \
		-subj "$subject" -out "$dir/$name.csr" 2>/dev/null
	openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.pem" -CAkey "$dir/$ca.key" -CAcreateserial -days "$days" \
		-out "$dir/$name.pem" -extfile <(printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" \
			"extendedKeyUsage=$usage") 2>/dev/null
	rm -f "$dir/$name.csr"
}

main() {
	if [[ -s $dir/jwks.json && -s $dir/server.pem ]]; then
		return
	fi
	log "creating the cluster's CA, certificates and token signing key in $dir"
	mkdir -p "$dir"
	chmod 700 "$dir"
	(
		umask 077
		# Two CAs: a client certificate must open the public frontend and nothing else (the internal frontend
		# grants whoever reaches it everything).
		ca server-ca "/CN=captchaflow local cluster server CA"
		ca client-ca "/CN=captchaflow local cluster client CA"
		cert server-ca server "/CN=temporal" "serverAuth,clientAuth" # internode: each service is the others' client
		local party
		for party in captchaflow shop operator admin; do
			cert client-ca "client-$party" "/O=$party/CN=$party" clientAuth
		done
		rm -f "$dir"/*.srl
		new_signing_key
		write_jwks
	)
}

main
