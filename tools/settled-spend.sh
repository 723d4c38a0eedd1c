#!/usr/bin/env bash
# How much the controller's reading of the spend matters, in the simulator:
# the mechanism scenario (sim-to-real -workload mechanism -maxPending 8,
# 1-hour half-life) over HOURS (48) trace hours, seeds 1-SEEDS (5), with
# costfair and costfair+targets reading the spend continuously (the spend
# decayed up to the moment: what the controller reads since it counts the
# admitted Workloads' open hour, admission/kube openSpend) and as the
# ledger's settled hours only, every 10 trace minutes (-sim.settled: the
# controller before that). Writes docs/policy-eval/mechanism-settled.txt
# with the commit, the command and, per seed, each policy's money gap.
# Usage: [HOURS=n] bash tools/settled-spend.sh [SEEDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-5}
hours=${HOURS:-48}
. tools/lib/docs-build.sh settled-spend.sh
out=docs/policy-eval/mechanism-settled.txt
{
	echo "# at $commit: bash tools/settled-spend.sh $seeds (HOURS=$hours)"
	echo "# gpuledger sim-to-real -workload mechanism -layout shared -worlds sim -hours $hours -limit $hours -halfLife 1h -policies costfair,costfair+targets -maxPending 8 -seed SEED -sim.settled=SETTLED"
	echo "# money gap by seed; continuous: the spend up to the moment; settled: the ledger's ended hours, read every 10 trace minutes"
	printf '%-6s %-18s %12s %10s\n' seed policy continuous settled
	for s in $(seq "$seeds"); do
		for st in false true; do
			echo "progress: seed $s of $seeds, settled=$st" >&2
			"$tmp/gpuledger" sim-to-real -workload mechanism -layout shared -worlds sim -hours "$hours" -limit "$hours" -halfLife 1h \
				-policies costfair,costfair+targets -maxPending 8 -seed "$s" -sim.settled="$st" -out "$tmp/s2r" |
				awk -v st="$st" '$2 == "simulator" { print st, $1, $(NF-2) }'
		done > "$tmp/seed"
		for p in costfair costfair+targets; do
			printf '%-6s %-18s %12s %10s\n' "$s" "$p" "$(awk -v p="$p" '$1 == "false" && $2 == p { print $3 }' "$tmp/seed")" \
				"$(awk -v p="$p" '$1 == "true" && $2 == p { print $3 }' "$tmp/seed")"
		done
	done
} > "$out"
echo "wrote $out" >&2
