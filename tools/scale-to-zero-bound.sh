#!/usr/bin/env bash
# The scale-to-zero wait bound against the requests themselves, on three
# seeds of bursty traces (go test ./integration -run
# TestScaleToZeroBoundOnArrivals -v): per source (vLLM's series, a
# gateway's arrivals, each with the model server always up or at zero
# after 5 minutes idle) and model load, the ledger's bound on the waiting
# requests over those that waited, min/median/max over the cooldowns.
# Written to docs/capacity/scale-to-zero-bound.txt with the command and
# commit in its header. Usage: bash tools/scale-to-zero-bound.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rev="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo ' (with uncommitted changes)')"
out=docs/capacity/scale-to-zero-bound.txt
log=$(go test -count=1 ./integration -run 'TestScaleToZeroBoundOnArrivals$' -v)
{
	echo "# bash tools/scale-to-zero-bound.sh at $rev"
	echo "# go test -count=1 ./integration -run 'TestScaleToZeroBoundOnArrivals\$' -v"
	echo
	grep -E 'bound / waited' <<< "$log" | sed -E 's/^ *scaletozero_test.go:[0-9]+: //'
	grep -E '^(--- |ok|FAIL)' <<< "$log"
} > "$out"
echo "wrote $out" >&2
