#!/usr/bin/env bash
# Builds the pinned Temporal CLI (dev server + Web UI) from the Go module proxy into .bin/temporal.
# Its usual download site is not reachable from every machine this project runs on; the module proxy is.
# Idempotent: skips the build while .bin/temporal is newer than tools/go.mod and tools/go.sum (the pins).
# A cold build takes about 6 minutes on 2 cores; later ones hit Go's build cache.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/.bin/temporal"

if [[ -x "$out" && "$out" -nt "$root/tools/go.mod" && "$out" -nt "$root/tools/go.sum" ]]; then
	echo "tools: $out is up to date"
	exit 0
fi

mkdir -p "$root/.bin"
echo "tools: building the Temporal CLI into $out (first build takes ~6 minutes)"
start=$SECONDS
# Build to a temporary name and move it into place, so an interrupted build never leaves a binary that
# looks up to date.
(cd "$root/tools" && go build -o "$out.tmp" github.com/temporalio/cli/cmd/temporal)
mv -f "$out.tmp" "$out"
echo "tools: built $("$out" --version) in $((SECONDS - start))s"
