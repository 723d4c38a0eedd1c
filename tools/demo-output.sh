#!/usr/bin/env bash
# The demo month's printed output (make run RUNARGS=-serve=false: October
# 2026 of examples/cluster.yaml), written to docs/demo-output.txt with the
# command and commit in its header. The README's tour of the output is
# copied from it; tools/check-readme.sh fails when they differ.
# Usage: bash tools/demo-output.sh (about 2 minutes on 2 cores).
set -euo pipefail
source "$(dirname "$0")/demo-month.sh"
out=$PWD/docs/demo-output.txt
{
	echo "# bash tools/demo-output.sh at $rev"
	echo "# gpuledger demo -serve=false -month 2026-10 -config examples/cluster.yaml"
	echo
	# the progress line (carriage returns) is not output
	tr '\r' '\n' < "$dir/demo.log" | grep -v -e '^gpuledger: configuration ' -e 'elapsed  ETA' -e '^ *$' | sed 's/ *$//'
} | sed "s|$dir/||g" > "$out"
echo "wrote $out" >&2
