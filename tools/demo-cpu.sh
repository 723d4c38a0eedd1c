#!/usr/bin/env bash
# CPU time of the demo month (gpuledger demo -serve=false -month 2026-10)
# at two commits, built here and run alternately RUNS times each on this
# machine; writes docs/ingest/demo-cpu.txt with the commands, the commits,
# each run's wall, user and system seconds, min/median/max of user+system,
# and whether the two chargebacks are byte-identical.
# Usage: bash tools/demo-cpu.sh BEFORE AFTER [RUNS] [SEED] [MONTH] (about 2
# minutes a run); a SEED or MONTH other than the README's (1, 2026-10)
# writes docs/ingest/demo-cpu-seedSEED-MONTH.txt instead.
set -euo pipefail
cd "$(dirname "$0")/.."
before=$(git rev-parse --short "${1:?usage: tools/demo-cpu.sh BEFORE AFTER [RUNS]}")
after=$(git rev-parse --short "${2:?usage: tools/demo-cpu.sh BEFORE AFTER [RUNS]}")
runs=${3:-3}
seed=${4:-1}
month=${5:-2026-10}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/src" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for rev in "$before" "$after"; do
	git worktree add -q --detach "$tmp/src" "$rev"
	(cd "$tmp/src" && go build -o "$tmp/gpuledger-$rev" ./cmd/gpuledger)
	git worktree remove --force "$tmp/src"
done
out=docs/ingest/demo-cpu.txt
if [ "$seed" != 1 ] || [ "$month" != 2026-10 ]; then
	out=docs/ingest/demo-cpu-seed$seed-$month.txt
fi
{
	echo "# bash tools/demo-cpu.sh $before $after $runs $seed $month, on $(nproc) cores"
	echo "# each run: gpuledger demo -serve=false -seed $seed -month $month -config examples/cluster.yaml"
	echo
	for i in $(seq "$runs"); do
		for rev in "$before" "$after"; do
			d=$tmp/run-$rev-$i
			mkdir -p "$d"
			/usr/bin/time -f "%e %U %S" -o "$d/time" "$tmp/gpuledger-$rev" demo -serve=false -seed "$seed" -month "$month" \
				-config examples/cluster.yaml -out "$d/demo" -log.level=warn > "$d/out" 2>&1
			read -r wall user sys < "$d/time"
			echo "$rev run $i: wall $wall s, user $user s, system $sys s, CPU $(echo "$user + $sys" | bc) s"
			echo "$rev $(echo "$user + $sys" | bc)" >> "$tmp/cpu"
		done
	done
	echo
	for rev in "$before" "$after"; do
		awk -v r="$rev" '$1 == r {print $2}' "$tmp/cpu" | sort -n | awk -v r="$rev" '{v[NR] = $1} END {printf "%s: CPU seconds min %.1f, median %.1f, max %.1f over %d runs\n", r, v[1], v[int((NR + 1) / 2)], v[NR], NR}'
	done
	if cmp -s "$tmp/run-$before-1/demo/chargeback-$month.csv" "$tmp/run-$after-1/demo/chargeback-$month.csv"; then
		echo "the chargeback CSVs are byte-identical"
	else
		echo "the chargeback CSVs differ"
	fi
} | tee "$out"
echo "wrote $out" >&2
