#!/usr/bin/env bash
# Checks everything under deploy/ and the compose file, for CI (.ci/run) and by hand:
#   - the Prometheus config and alert rules parse (promtool check config / check rules);
#   - each alert fires on the series it should and stays quiet otherwise (promtool test rules alerts_test.yml);
#   - docker-compose.yml and the Dockerfile match what the binaries read (go test ./deploy/ in the tooling
#     module, tests/).
# promtool comes from Debian's `prometheus` package (installed here when missing: ~12s); the package's
# service is not started.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prom=$repo/deploy/prometheus

log() { printf 'deploy/check: %s\n' "$*" >&2; }

ensure_promtool() {
	command -v promtool >/dev/null && return
	[[ $(id -u) == 0 ]] || {
		log "promtool is missing; install Debian's prometheus package (apt-get install prometheus)"
		exit 1
	}
	log "installing promtool (Debian package prometheus)"
	local out
	out=$(mktemp)
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends prometheus >"$out" 2>&1; then
		# A fresh machine may have no package lists yet.
		if ! { apt-get update && apt-get install -y --no-install-recommends prometheus; } >>"$out" 2>&1; then
			tail -n 20 "$out" >&2
			log "installing prometheus failed"
			exit 1
		fi
	fi
	rm -f "$out"
}

ensure_promtool
log "$(promtool --version 2>&1 | head -n 1)"
promtool check config "$prom/prometheus.yml"
promtool check rules "$prom/alerts.yml"
promtool test rules "$prom/alerts_test.yml"
go -C "$repo/tests" test -count=1 ./deploy/...
