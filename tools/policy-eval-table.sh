#!/usr/bin/env bash
# The held-out JCT table docs/policy-eval/README.md quotes, from a
# policy-eval output file: per candidate and preemption, the average JCT
# over the better Kueue mode at loads 0.85 and 0.95 on each held-out half,
# mean [min-max] over the seeds, and the money gap against Kueue's
# (costfair's and Kueue's, mean over the seeds).
# Usage: bash tools/policy-eval-table.sh docs/policy-eval/philly.txt
set -euo pipefail
f=${1:?usage: tools/policy-eval-table.sh docs/policy-eval/philly.txt}
echo "| candidate | preemption | load 0.85, half A | 0.85, B | 0.95, A | 0.95, B | money gap 0.85/0.95, A | B (Kueue's) |"
echo "|---|---|---|---|---|---|---|---|"
awk '
	$1 == "philly" || $1 == "gavel" {
		# load (built range) is two fields in newer files, one in older
		o = ($5 ~ /^\(/) ? 1 : 0
		cand = $(5+o); pre = $3; load = $4; half = $2
		if (cand == "kueue" || cand == "kueue-afs" || (load != "0.85" && load != "0.95")) next
		k = cand SUBSEP pre
		if (!(k in seen)) { seen[k] = 1; order[++n] = k }
		jct[k, load, half] = $(7+o) " " $(8+o)
		gsub(/–/, "-", jct[k, load, half])
		if (NF >= 18 + o) money[k, load, half] = $(15+o) " " $(16+o)
	}
	END {
		for (i = 1; i <= n; i++) {
			split(order[i], kp, SUBSEP)
			pre = kp[2] == "kueue" ? "Kueue'"'"'s" : kp[2]
			printf "| %s | %s | %s | %s | %s | %s | %s / %s | %s / %s |\n", kp[1], pre,
				jct[order[i], "0.85", "A"], jct[order[i], "0.85", "B"], jct[order[i], "0.95", "A"], jct[order[i], "0.95", "B"],
				money[order[i], "0.85", "A"], money[order[i], "0.95", "A"], money[order[i], "0.85", "B"], money[order[i], "0.95", "B"]
		}
	}' "$f"
