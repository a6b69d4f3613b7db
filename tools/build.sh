#!/usr/bin/env bash
# Builds the pinned Temporal binaries from the Go module proxy into .bin/ (docs/versions.md names the versions):
#   tools/build.sh            temporal-server and temporal-sql-tool (tools/server/go.mod: the one server build, for
#                             make run, the e2e suites and the PostgreSQL cluster) and temporal-ui (tools/ui: the
#                             Web UI server); what make run needs
#   tools/build.sh --cli      the Temporal CLI (tools/go.mod), the command-line client only
#   tools/build.sh --cluster  all of them (the cluster's scripts use the CLI)
# Their usual download sites are not reachable from every machine this project runs on; the module proxy is.
# Idempotent: skips a binary while it is newer than its module's go.mod, go.sum and Go files (the pins).
# Cold builds on 2 cores: the server and its SQL tool about 4 minutes, the Web UI 1, the CLI 3.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The server and UI modules need Go 1.26.10 (their go line), newer than some machines' Go: that toolchain comes
# from the module proxy, for these builds alone.
server_toolchain=go1.26.10

# build NAME MODULE_DIR PACKAGE TOOLCHAIN
build() {
	local out=$root/.bin/$1 dir=$2 pkg=$3 toolchain=$4 pin
	local fresh=true
	for pin in "$dir"/go.mod "$dir"/go.sum "$dir"/*.go; do
		[[ -e $pin && ! ($out -nt $pin) ]] && fresh=false
	done
	if [[ -x $out ]] && $fresh; then
		echo "tools: $out is up to date"
		return
	fi
	mkdir -p "$root/.bin"
	echo "tools: building $1 ($pkg, $toolchain) into $out"
	local start=$SECONDS
	# Build to a temporary name and move it into place, so an interrupted build never leaves a binary that
	# looks up to date.
	(cd "$dir" && GOTOOLCHAIN=$toolchain go build -o "$out.tmp" "$pkg")
	mv -f "$out.tmp" "$out"
	echo "tools: built $1 in $((SECONDS - start))s"
}

# sqlite_schema copies the server module's SQLite schema files to .bin/temporal-schema/sqlite, where devstack has
# temporal-sql-tool create and upgrade .data/temporal.db (the tool embeds only the MySQL and PostgreSQL schemas).
sqlite_schema() {
	local out=$root/.bin/temporal-schema dir
	if [[ -d $out && $out -nt $root/tools/server/go.mod ]]; then
		return
	fi
	dir=$(cd "$root/tools/server" && GOTOOLCHAIN=$server_toolchain go list -m -f '{{.Dir}}' go.temporal.io/server)
	rm -rf "$out.tmp" "$out"
	mkdir -p "$out.tmp"
	cp -R "$dir/schema/sqlite" "$out.tmp/"
	chmod -R u+w "$out.tmp"
	mv "$out.tmp" "$out"
	echo "tools: copied the SQLite schema of $(basename "$dir") into $out"
}

server() {
	build temporal-server "$root/tools/server" go.temporal.io/server/cmd/server "$server_toolchain"
	build temporal-sql-tool "$root/tools/server" go.temporal.io/server/cmd/tools/sql "$server_toolchain"
	sqlite_schema
	build temporal-ui "$root/tools/ui" . "$server_toolchain"
}

cli() { build temporal "$root/tools" github.com/temporalio/cli/cmd/temporal local; }

case ${1:-} in
"") server ;;
--cli) cli ;;
--cluster)
	server
	cli
	;;
*)
	echo "usage: tools/build.sh [--cli | --cluster]" >&2
	exit 2
	;;
esac
