#!/usr/bin/env bash
# The idle penalty's summary docs/admission/README.md quotes, from the idle
# penalty section of tools/mechanism.sh's output: per seed, costfair with
# the penalty (an idle GPU-hour counts twice) against without it, on the
# mechanism scenario with notebooks holding GPUs 80% idle. Prints, over
# the seeds, how many the penalty lowered the idle-paid GPU-hours on,
# shortened the average JCT on and widened the money gap on, and the
# min/median/max of each figure without and with the penalty and of the
# per-seed ratio with/without.
# Usage: bash tools/idle-penalty-table.sh docs/policy-eval/mechanism.txt
set -euo pipefail
f=${1:?usage: tools/idle-penalty-table.sh docs/policy-eval/mechanism.txt}
awk '
	function hours(d,   h) {
		h = 0
		if (match(d, /[0-9]+h/)) h += substr(d, RSTART, RLENGTH - 1)
		if (match(d, /[0-9]+m/)) h += substr(d, RSTART, RLENGTH - 1) / 60
		return h
	}
	# rows "#   seed penalty avgJCT moneyGap idlePaid" after the section header
	/^# The idle penalty/ { in_section = 1; next }
	in_section && $1 == "#" && NF == 6 && $2 ~ /^[0-9]+$/ && ($3 == "0" || $3 == "1") {
		s = $2; p = $3
		jct[s, p] = hours($4); gap[s, p] = $5; idle[s, p] = $6
		if (!(s in seen)) { seen[s] = 1; seeds[++n] = s }
	}
	function sort(a, k,   i, j, t) {
		for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	}
	function mmm(a, k, fmt) {
		sort(a, k)
		return sprintf(fmt " / " fmt " / " fmt, a[1], (k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2), a[k])
	}
	END {
		if (n == 0) { print "idle-penalty-table.sh: no idle penalty section in " FILENAME > "/dev/stderr"; exit 1 }
		m = 0
		for (i = 1; i <= n; i++) {
			s = seeds[i]
			if (!((s, 0) in idle) || !((s, 1) in idle)) continue
			m++
			lower += idle[s, 1] < idle[s, 0]; faster += jct[s, 1] < jct[s, 0]; wider += gap[s, 1] > gap[s, 0]
			i0[m] = idle[s, 0]; i1[m] = idle[s, 1]; ir[m] = idle[s, 1] / idle[s, 0]
			j0[m] = jct[s, 0]; j1[m] = jct[s, 1]; jr[m] = jct[s, 1] / jct[s, 0]
			g0[m] = gap[s, 0]; g1[m] = gap[s, 1]
		}
		printf "seeds with both runs: %d\n", m
		printf "the penalty lowered the idle-paid GPU-hours on %d, shortened the avg JCT on %d, widened the money gap on %d\n", lower, faster, wider
		print "| figure (min / median / max over the seeds) | without the penalty | with it | with / without, per seed |"
		print "|---|---|---|---|"
		printf "| idle-paid GPU-hours | %s | %s | %s |\n", mmm(i0, m, "%.0f"), mmm(i1, m, "%.0f"), mmm(ir, m, "%.2f")
		printf "| avg JCT, h | %s | %s | %s |\n", mmm(j0, m, "%.1f"), mmm(j1, m, "%.1f"), mmm(jr, m, "%.2f")
		printf "| money gap | %s | %s | |\n", mmm(g0, m, "%.3f"), mmm(g1, m, "%.3f")
	}' "$f"
