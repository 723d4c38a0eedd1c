#!/usr/bin/env bash
# The held-out table docs/policy-eval/README.md quotes, from a policy-eval
# output file: per candidate, preemption and goal load, on each held-out
# half, the average JCT over the better Kueue mode (mean [min-max] over
# the seeds) and over the kueue mode alone, the longest wait over the
# better mode's, and the money gap beside that mode's (means over seeds).
# Usage: bash tools/policy-eval-table.sh docs/policy-eval/philly.txt [candidates]
set -euo pipefail
f=${1:?usage: tools/policy-eval-table.sh docs/policy-eval/philly.txt [candidate,...]}
cands=${2:-costfair,costfair-drs,costfair+targets}
echo "| candidate | preemption | load | half A: JCT / better Kueue | / kueue | longest wait / Kueue's | money gap (Kueue's) | half B: JCT / better Kueue | / kueue | longest wait / Kueue's | money gap (Kueue's) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
awk -v cands="$cands" '
	BEGIN { n = split(cands, c, ","); for (i = 1; i <= n; i++) want[c[i]] = i }
	$1 == "philly" || $1 == "gavel" {
		half = $2; pre = $3; load = $4; cand = $6
		if (!(cand in want) || (load != "0.85" && load != "0.95" && load != "1.10")) next
		k = want[cand] SUBSEP pre SUBSEP load
		if (!(k in seen)) { seen[k] = 1; keys[++m] = k; name[k] = cand }
		r = $8 " " $9; gsub(/–/, "-", r)
		w = $15; gsub(/[()]/, "", w)
		mb = $18; gsub(/[()]/, "", mb)
		cell[k, half] = sprintf("%s | %s | %.2f | %s (%s)", r, $10, $14 / w, $17, mb)
	}
	END {
		# candidates in the order given, then preemption, then load
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (keys[j] < keys[i]) { t = keys[i]; keys[i] = keys[j]; keys[j] = t }
		for (i = 1; i <= m; i++) {
			split(keys[i], kp, SUBSEP)
			pre = kp[2] == "kueue" ? "Kueue'"'"'s" : kp[2]
			printf "| %s | %s | %s | %s | %s |\n", name[keys[i]], pre, kp[3], cell[keys[i], "A"], cell[keys[i], "B"]
		}
	}' "$f"
