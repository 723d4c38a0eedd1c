#!/usr/bin/env bash
# Scale-to-zero on ServeGen's production traces (../shared/data/traces/
# inference-servegen, three seeds), with the default SLA and without one,
# written to docs/capacity/scale-to-zero.txt with the command and commit in
# its header. docs/capacity/scale-to-zero.md's ServeGen table is copied
# from it. Usage: bash tools/scale-to-zero-servegen.sh (about a minute on
# 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
rev="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo ' (with uncommitted changes)')"
make build > /dev/null
traces=${SERVEGEN:-../shared/data/traces/inference-servegen}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=docs/capacity/scale-to-zero.txt
{
	echo "# bash tools/scale-to-zero-servegen.sh at $rev"
	echo "# gpuledger scale-to-zero -servegen $traces -seeds 1,2,3 [-sla.maxP95Extra=-1s]"
	echo
	bin/gpuledger scale-to-zero -servegen "$traces" -seeds 1,2,3 -out "$tmp/sla" -log.level=warn
	echo
	echo "# the same without a latency SLA (-sla.maxP95Extra=-1s): the choice that saves the most money"
	echo
	bin/gpuledger scale-to-zero -servegen "$traces" -seeds 1,2,3 -sla.maxP95Extra=-1s -out "$tmp/nosla" -log.level=warn
} | sed "s|$tmp/||g" > "$out"
echo "wrote $out" >&2
