#!/usr/bin/env bash
# Builds the pinned Temporal binaries from the Go module proxy into .bin/: the CLI (dev server + Web UI) from
# tools/go.mod, and with --cluster also the PostgreSQL cluster's temporal-server and temporal-sql-tool from
# tools/server/go.mod (a newer server than the CLI embeds). Their usual download sites are not reachable from every
# machine this project runs on; the module proxy is.
# Idempotent: skips a binary while it is newer than its module's go.mod and go.sum (the pins).
# Cold builds on 2 cores: the CLI about 6 minutes, the cluster's two binaries about 7 more.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# build NAME MODULE_DIR PACKAGE
build() {
	local out=$root/.bin/$1 dir=$2 pkg=$3
	if [[ -x "$out" && "$out" -nt "$dir/go.mod" && "$out" -nt "$dir/go.sum" ]]; then
		echo "tools: $out is up to date"
		return
	fi
	mkdir -p "$root/.bin"
	echo "tools: building $1 ($pkg) into $out"
	local start=$SECONDS
	# Build to a temporary name and move it into place, so an interrupted build never leaves a binary that
	# looks up to date.
	(cd "$dir" && go build -o "$out.tmp" "$pkg")
	mv -f "$out.tmp" "$out"
	echo "tools: built $1 in $((SECONDS - start))s"
}

case ${1:-} in
"" | --cluster) ;;
*)
	echo "usage: tools/build.sh [--cluster]" >&2
	exit 2
	;;
esac
build temporal "$root/tools" github.com/temporalio/cli/cmd/temporal
if [[ ${1:-} == --cluster ]]; then
	build temporal-server "$root/tools/server" go.temporal.io/server/cmd/server
	build temporal-sql-tool "$root/tools/server" go.temporal.io/server/cmd/tools/sql
fi
