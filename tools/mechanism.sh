#!/usr/bin/env bash
# The mechanism scenario (gpuledger sim-to-real -workload mechanism): four
# teams with equal entitlements pinned to flavors by what their models
# need, all backlogged. Writes docs/policy-eval/mechanism.txt with the
# commit, each command and its output:
#   - the simulator over 14 days, seeds 1-SEEDS, Kueue without and with
#     Admission Fair Sharing, costfair and costfair keeping teams to their
#     money-fair flavor targets (the simulator's only), and the money
#     gap's min/median/max over the seeds;
#   - the idle penalty on the same scenario with idle-holding notebooks;
#   - with REAL=1, instead, docs/policy-eval/mechanism-real.txt gets a
#     section added: the first 12 h of seed 1 on a real kube-apiserver and
#     Kueue (tools/build-k8s-stack.sh; $GPULEDGER_K8S_STACK) beside the
#     simulator, at 60x (about 13 minutes a policy; run it with nothing
#     else on the machine). Faster is not valid: at 240x the real Kueue
#     started 10-31% fewer jobs than the simulator in 24 h, at 1200x about
#     half, so the two worlds no longer ran the same workload; at 60x they
#     start within 4% over 12 h, but over 24-48 h the real Kueue falls
#     2-31% a 12-hour block behind as its backlog grows (docs/policy-eval/
#     README.md, "Why they part"). Each run's section says, by 12 trace hours, how
#     busy Kueue's scheduler was and the cores each process used
#     (tools/control-plane-table.sh).
# LAYOUT=cohort gives every team a ClusterQueue of its own in one cohort
# (sim-to-real -layout cohort: Kueue's cohort fair sharing, and costfair-drs
# whose ClusterQueue weights the controller sets); the simulator's figures
# then go to docs/policy-eval/mechanism-cohort.txt, without the idle
# penalty section, and the policies default to kueue,costfair-drs.
# MAXPENDING=n keeps each team's jobs waiting in the queue to n in both
# worlds (sim-to-real -maxPending): the next enters as one starts. Kueue
# tries one waiting workload of a ClusterQueue per scheduling cycle, so
# with hundreds waiting a freed GPU waits for a pass over all of them,
# which at 60x is trace minutes; a bounded backlog keeps the pass short
# (MAXPENDING=8: both worlds started within 1-2.2% of each other's jobs
# over 48 h in four runs, docs/policy-eval/mechanism-real.txt).
# The simulator's figures then go to docs/policy-eval/
# mechanism-maxpending<n>.txt, without the idle penalty section.
# POLICIES (default kueue,kueue-afs,costfair,costfair+targets) picks the
# policies; HOURS (12) and SPEEDUP (60) the real runs' span and clock, SEED
# (1) their workload, RUNS (1) how many real runs of each policy (the table
# gives the median run and the money gap's min/median/max): a real run of
# each policy takes HOURS×60/SPEEDUP minutes and a minute more.
# KEEP=dir, with REAL=1, copies the runs' outcomes.csv, control-plane.csv and
# controller.log there (the temporary folder is removed at exit).
# Usage: [REAL=1 [SEED=n] [RUNS=n] [KEEP=dir]] [LAYOUT=cohort] [POLICIES=p,q] bash tools/mechanism.sh [SEEDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-5}
. tools/lib/docs-build.sh mechanism.sh
# idle_penalty prints the idle penalty's section (the shared layout).
idle_penalty() {
	echo
	echo "# The idle penalty: a third of research's jobs are notebooks holding one GPU 80% idle (-mechanism.interactive 0.3);"
	echo "# costfair without (-idlePenalty 0) and with (-idlePenalty 1: an idle GPU-hour counts twice) the penalty, seeds 1-$seeds:"
	echo "# seed, penalty, avg JCT, money gap, idle paid GPU-h (GPU-hours held idle while another team waited)"
	for s in $(seq "$seeds"); do
		for pen in 0 1; do
			"$tmp/gpuledger" sim-to-real -workload mechanism -worlds sim -hours 336 -limit 336 -halfLife 1h -policies costfair \
				-mechanism.interactive 0.3 -idlePenalty "$pen" -seed "$s" -out "$tmp/idle" |
				awk -v s="$s" -v pen="$pen" '$1 == "costfair" && $2 == "simulator" { printf "#   %s %s %s %s %s\n", s, pen, $5, $10, $11 }'
		done
	done
}
layout=${LAYOUT:-shared}
mp=${MAXPENDING:-0}
bound=()
if [ "$mp" -gt 0 ]; then
	bound=(-maxPending "$mp")
fi
policies=${POLICIES:-kueue,kueue-afs,costfair,costfair+targets}
if [ "$layout" = cohort ]; then
	policies=${POLICIES:-kueue,costfair-drs}
fi
if [ -n "${REAL:-}" ]; then
	out=docs/policy-eval/mechanism-real.txt
	hours=${HOURS:-12} speedup=${SPEEDUP:-60} seed=${SEED:-1} runs=${RUNS:-1}
	{
		echo
		echo "# at $commit, on $(nproc) cores: REAL=1 SEED=$seed RUNS=$runs LAYOUT=$layout POLICIES=$policies HOURS=$hours SPEEDUP=$speedup MAXPENDING=$mp bash tools/mechanism.sh"
		echo "# gpuledger sim-to-real -workload mechanism -layout $layout -worlds sim,kueue -hours $hours -limit $hours -speedup $speedup -halfLife 1h -policies $policies -seed $seed -runs $runs ${bound[*]}"
		"$tmp/gpuledger" sim-to-real -workload mechanism -layout "$layout" -worlds sim,kueue -hours "$hours" -limit "$hours" -speedup "$speedup" -halfLife 1h \
			-policies "$policies" -seed "$seed" -runs "$runs" "${bound[@]}" -out "$tmp/real" | tee "$tmp/real.txt" | sed 1d
		case ",$policies," in
		*,costfair+targets,*)
			echo "# held by the flavor targets (controller.log, every run): $(cat "$tmp"/real/*/controller.log 2>/dev/null | grep -c 'state=Retry' || true) answers of $(cat "$tmp"/real/*/controller.log 2>/dev/null | grep -c 'budget check' || true)"
			;;
		esac
		echo "# whether the real Kueue kept up with the clock, by 12 trace hours (tools/control-plane-table.sh on the runs' control-plane.csv):"
		bash tools/control-plane-table.sh "$tmp/real" 12
		if [ "$runs" -gt 1 ]; then
			echo "# money gap over the $runs real runs (min median max):"
			for p in ${policies//,/ }; do
				awk -v p="$p" '$1 == p && $2 == "Kueue" && $3 == "run" { print $12 }' "$tmp/real.txt" |
					sort -g | awk -v p="$p" '{ v[NR] = $1 } END { if (NR) printf "#   %-16s %s %s %s\n", p, v[1], v[int((NR+1)/2)], v[NR] }'
			done
		fi
	} >> "$out"
	if [ -n "${KEEP:-}" ]; then
		# The raw figures behind the section: every outcome, and each
		# run's control plane by hour and controller log.
		mkdir -p "$KEEP"
		cp "$tmp/real/outcomes.csv" "$KEEP/"
		for d in "$tmp"/real/*/; do
			mkdir -p "$KEEP/$(basename "$d")"
			cp "$d"control-plane.csv "$d"controller.log "$KEEP/$(basename "$d")/" 2>/dev/null || true
		done
		echo "kept the outcomes, control-plane.csv and controller.log in $KEEP" >&2
	fi
	echo "added to $out" >&2
	exit 0
fi
out=docs/policy-eval/mechanism.txt
if [ "$layout" = cohort ]; then
	out=docs/policy-eval/mechanism-cohort.txt
fi
if [ "$mp" -gt 0 ]; then
	out=${out%.txt}-maxpending$mp.txt
fi
{
	echo "# at $commit, on $(nproc) cores: LAYOUT=$layout MAXPENDING=$mp bash tools/mechanism.sh $seeds"
	echo
	for s in $(seq "$seeds"); do
		echo "# gpuledger sim-to-real -workload mechanism -layout $layout -worlds sim -hours 336 -limit 336 -halfLife 1h -policies $policies -seed $s ${bound[*]}"
		"$tmp/gpuledger" sim-to-real -workload mechanism -layout "$layout" -worlds sim -hours 336 -limit 336 -halfLife 1h \
			-policies "$policies" -seed "$s" "${bound[@]}" -out "$tmp/sim-$s" | tee "$tmp/sim-$s.txt" | sed 1d
	done
	echo "# money gap over seeds 1-$seeds (min median max), 14 days in the simulator:"
	for p in ${policies//,/ }; do
		for s in $(seq "$seeds"); do
			awk -v p="$p" '$1 == p && $2 == "simulator" { print $10 }' "$tmp/sim-$s.txt"
		done | sort -g | awk -v p="$p" '{ v[NR] = $1 } END { printf "#   %-10s %s %s %s\n", p, v[1], v[int((NR+1)/2)], v[NR] }'
	done
	echo "# longest stall (the longest a team was backlogged without starting a job) over seeds 1-$seeds, hours (min median max):"
	for p in ${policies//,/ }; do
		for s in $(seq "$seeds"); do
			awk -v p="$p" '$1 == p && $2 == "simulator" { d = $12; h = 0
				if (match(d, /[0-9]+h/)) h += substr(d, RSTART, RLENGTH - 1)
				if (match(d, /[0-9]+m/)) h += substr(d, RSTART, RLENGTH - 1) / 60
				printf "%.1f\n", h }' "$tmp/sim-$s.txt"
		done | sort -g | awk -v p="$p" '{ v[NR] = $1 } END { printf "#   %-10s %s %s %s\n", p, v[1], v[int((NR+1)/2)], v[NR] }'
	done
	[ "$layout" = cohort ] || [ "$mp" -gt 0 ] || idle_penalty
} > "$out"
echo "wrote $out" >&2
