#!/usr/bin/env bash
# Scale-to-zero on the demo's October: simulates the month into a scratch
# directory, runs `gpuledger scale-to-zero` on its ledger (vLLM's series,
# then -gpuActivity), and writes both outputs with a table summed per
# replica size to docs/capacity/scale-to-zero-demo.txt, the command and
# commit in its header. The README's demo table is copied from it.
# Usage: bash tools/scale-to-zero-demo.sh (about 2 minutes on 2 cores).
set -euo pipefail
source "$(dirname "$0")/demo-month.sh"
out=$PWD/docs/capacity/scale-to-zero-demo.txt
# sums per replica size (GPUs per replica) from the per-endpoint CSV
sums() {
	echo "| GPUs a replica | endpoints | always-on GPU-h | idle GPU-h (DCGM) | KEDA 300 s: saved GPU-h | cold starts/day | net saving | gpuledger: scale to 0 | saved GPU-h | cold starts/day | net saving |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	awk -F, 'NR > 1 {
		k = sprintf("%.2f", $6); n[k]++; on[k] += $12; idle[k] += $13
		ks[k] += $23; kc[k] += $24 * $28; kn[k] += $27
		if ($15 == 0) { z[k]++; s[k] += $18; c[k] += $19 * $28; g[k] += $21 }
		d[k] = $28
	} END {
		for (k in n) printf "| %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %d | %.0f | %.0f | %.0f |\n", k, n[k], on[k], idle[k], ks[k], kc[k] / d[k], kn[k], z[k], s[k], c[k] / d[k], g[k]
	}' "$1" | sort -t'|' -k2,2nr
}
{
	echo "# bash tools/scale-to-zero-demo.sh at $rev"
	echo "# gpuledger demo -serve=false -month 2026-10; gpuledger scale-to-zero -month 2026-10 -ledger.path gpuledger-demo/ledger"
	echo
	(cd "$dir" && "$bin" scale-to-zero -month 2026-10 -config "$cfg" -ledger.path gpuledger-demo/ledger -out stz -log.level=warn)
	echo
	echo "# per replica size, over the month (cold starts/day: summed over the endpoints)"
	sums "$dir/stz/scale-to-zero-2026-10.csv"
	echo
	echo "# the same from the GPUs' activity alone: gpuledger scale-to-zero ... -gpuActivity"
	echo
	(cd "$dir" && "$bin" scale-to-zero -month 2026-10 -config "$cfg" -ledger.path gpuledger-demo/ledger -out stzg -gpuActivity -log.level=warn)
	echo
	sums "$dir/stzg/scale-to-zero-2026-10.csv"
} | sed "s|$dir/||g" > "$out"
echo "wrote $out" >&2
