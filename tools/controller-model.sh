#!/usr/bin/env bash
# How the simulator's model of gpuledger's controller moves the money gap:
# the mechanism scenario (sim-to-real -workload mechanism -maxPending 8,
# 1-hour half-life, -speedup 60 as the real runs: the admission penalty is
# Kueue's 1-s sampling at 60x) over HOURS (48) trace hours, seeds 1-SEEDS (5), for
# costfair and costfair+targets, four ways:
#   own:      costfair's own order by the money share, the spend decayed up
#             to the moment (the simulator's default);
#   settled:  the same, the spend read as the ledger's ended hours every 10
#             trace minutes (-sim.settled: the controller before openSpend);
#   weights:  Kueue's Admission Fair Sharing order over the LocalQueue
#             weights the controller sets every 10 trace minutes with its
#             10% hysteresis, the spend up to the moment (-sim.weights: the
#             controller with openSpend, as the real Kueue runs it);
#   weights+settled: both (the controller before openSpend on Kueue).
# Writes docs/policy-eval/mechanism-controller.txt (-HOURSh.txt when HOURS
# is not 48) with the commit, the command and, per seed and policy, the
# money gap of each.
# Usage: [HOURS=n] bash tools/controller-model.sh [SEEDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-5}
hours=${HOURS:-48}
. tools/lib/docs-build.sh controller-model.sh
out=docs/policy-eval/mechanism-controller.txt
if [ "$hours" != 48 ]; then
	out=docs/policy-eval/mechanism-controller-${hours}h.txt
fi
modes=(own settled weights weights+settled)
flags=("" "-sim.settled" "-sim.weights" "-sim.weights -sim.settled")
{
	echo "# at $commit: bash tools/controller-model.sh $seeds (HOURS=$hours)"
	echo "# gpuledger sim-to-real -workload mechanism -layout shared -worlds sim -hours $hours -limit $hours -speedup 60 -halfLife 1h -policies costfair,costfair+targets -maxPending 8 -seed SEED [-sim.settled] [-sim.weights]"
	echo "# money gap by seed; own: costfair's order, spend up to the moment; settled: -sim.settled; weights: -sim.weights; weights+settled: both"
	printf '%-6s %-18s %8s %8s %8s %16s\n' seed policy "${modes[@]}"
	for s in $(seq "$seeds"); do
		: > "$tmp/seed"
		for i in "${!modes[@]}"; do
			echo "progress: seed $s of $seeds, ${modes[$i]}" >&2
			# shellcheck disable=SC2086 # the flags are words
			"$tmp/gpuledger" sim-to-real -workload mechanism -layout shared -worlds sim -hours "$hours" -limit "$hours" -speedup 60 -halfLife 1h \
				-policies costfair,costfair+targets -maxPending 8 -seed "$s" ${flags[$i]} -out "$tmp/s2r" |
				awk -v m="${modes[$i]}" '$2 == "simulator" { print m, $1, $(NF-2) }' >> "$tmp/seed"
		done
		for p in costfair costfair+targets; do
			row=()
			for m in "${modes[@]}"; do
				row+=("$(awk -v m="$m" -v p="$p" '$1 == m && $2 == p { print $3 }' "$tmp/seed")")
			done
			printf '%-6s %-18s %8s %8s %8s %16s\n' "$s" "$p" "${row[@]}"
		done
	done
} > "$out"
echo "wrote $out" >&2
