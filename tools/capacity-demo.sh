#!/usr/bin/env bash
# Capacity on the demo's October: simulates the month into a scratch
# directory and writes `gpuledger capacity` on its ledger as of Oct 20
# (the research queue waits: buy), Oct 31 12:00 and Nov 1 (held idle:
# reclaim, with the reclaim-or-buy what-if) to
# docs/capacity/capacity-demo.txt, with `gpuledger rules` for the example
# configuration's alerts, the command and commit in its header. The
# README's capacity figures are copied from it.
# Usage: bash tools/capacity-demo.sh (about 2 minutes on 2 cores).
set -euo pipefail
source "$(dirname "$0")/demo-month.sh"
out=$PWD/docs/capacity/capacity-demo.txt
{
	echo "# bash tools/capacity-demo.sh at $rev"
	echo "# gpuledger demo -serve=false -month 2026-10; gpuledger capacity -at <each time below> -ledger.path gpuledger-demo/ledger"
	for at in 2026-10-20T12:00:00Z 2026-10-31T12:00:00Z 2026-11-01T00:00:00Z; do
		echo
		echo "## gpuledger capacity -at $at -ledger.path gpuledger-demo/ledger"
		echo
		(cd "$dir" && "$bin" capacity -at "$at" -config "$cfg" -ledger.path gpuledger-demo/ledger -log.level=warn)
	done
	echo
	echo "## gpuledger rules (the alerts' part)"
	echo
	"$bin" rules -config "$cfg" -log.level=warn | sed -n '/^- name: gpuledger-capacity-alerts/,/^- name: gpuledger-capacity-wait-records/p;/^- name: gpuledger-capacity-wait-alerts/,$p'
} 2>/dev/null | sed "s|$dir/||g" > "$out"
echo "wrote $out" >&2
