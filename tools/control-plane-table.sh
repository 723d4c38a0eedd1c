#!/usr/bin/env bash
# Whether the real Kueue kept up with a sim-to-real run's sped-up clock,
# from the run's folder (sim-to-real -out): for each real run and each
# block of trace hours, the jobs the simulator and the real Kueue started
# in it (outcomes.csv; the hours control-plane.csv has a row for: the
# replay's last hour may have none), and from control-plane.csv the share
# of real time Kueue's scheduler spent in its cycles, its cycles (those
# that admitted), its workloads pending (active and inadmissible) at the
# block's end, and the CPU cores
# etcd, kube-apiserver, Kueue and gpuledger (the replay and the
# controller) used, on average over the block.
# Usage: bash tools/control-plane-table.sh OUT [HOURS_A_BLOCK (12)]
set -euo pipefail
out=${1:?usage: tools/control-plane-table.sh OUT [HOURS_A_BLOCK]}
block=${2:-12}
printf '# %-22s %7s %15s %7s %15s %8s %24s\n' "policy run" hours "started sim/real" busy "cycles (admit)" "pending" "cores etcd/api/kueue/gl"
for f in "$out"/*/control-plane.csv; do
	[ -e "$f" ] || continue
	name=$(basename "$(dirname "$f")")
	policy=${name%-*} run=${name##*-}
	awk -F, -v policy="$policy" -v run="$run" -v block="$block" -v name="$name" '
		# outcomes.csv: policy,world,run,job,queue,gpus,flavor,submit_s,start_s,finish_s
		FILENAME ~ /outcomes.csv$/ {
			if (FNR == 1 || $1 != policy) next
			h = int($9 / 3600) + 1
			if ($2 == "sim") simh[h]++
			if ($2 == "kueue" && $3 == run) realh[h]++
			next
		}
		FNR == 1 { next }
		{
			b = int(($1 - 1) / block)
			if (!(b in n)) order[++blocks] = b
			n[b]++; sim[b] += simh[$1]; real[b] += realh[$1]; wall[b] += $2; cycles[b] += $3; admit[b] += $4; busy[b] += $5
			pend[b] = $7 + $8; etcd[b] += $9 * $2; api[b] += $10 * $2; kq[b] += $11 * $2; gl[b] += $12 * $2
		}
		END {
			for (i = 1; i <= blocks; i++) {
				b = order[i]
				printf "# %-22s %7s %7d/%-7d %6.0f%% %7d (%5d) %8s %6.2f/%.2f/%.2f/%.2f\n", name, (b*block+1) "-" (b*block+n[b]),
					sim[b], real[b], 100 * busy[b] / wall[b], cycles[b], admit[b], pend[b],
					etcd[b] / wall[b], api[b] / wall[b], kq[b] / wall[b], gl[b] / wall[b]
			}
		}' "$out/outcomes.csv" "$f"
done
