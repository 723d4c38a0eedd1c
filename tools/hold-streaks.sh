#!/usr/bin/env bash
# Hold streaks in a controller log kept by tools/mechanism.sh KEEP=dir
# (POLICY-RUN/controller.log): runs of one team's consecutive answers of
# the budget check that held (state=Retry). Prints the answers, the holds,
# the streaks (count, median / p90 / max length) and the real seconds from
# each streak's first hold to the next answer that ends it (median / p90 /
# max, total): while a streak lasts Kueue's one workload a cycle goes to a
# team that is held.
# Usage: bash tools/hold-streaks.sh controller.log
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: bash tools/hold-streaks.sh controller.log" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep 'msg="budget check"' "$1" | awk -v out="$tmp/streaks" '
function secs(ts,   d, hms) { split(ts, d, "T"); split(substr(d[2], 1, 12), hms, ":"); return hms[1] * 3600 + hms[2] * 60 + hms[3] }
{
	t = ""; team = ""; st = ""
	for (i = 1; i <= NF; i++) {
		if ($i ~ /^time=/) t = secs(substr($i, 6))
		if ($i ~ /^team=/) team = substr($i, 6)
		if ($i ~ /^state=/) st = substr($i, 7)
	}
	answers++
	if (st == "Retry") holds++
	if (st == "Retry" && open && team == cur) { len++; next }
	if (open) { print len, t - start > out; open = 0 }
	if (st == "Retry") { open = 1; cur = team; len = 1; start = t }
}
END {
	if (open) print len, 0 > out
	printf "answers %d, holds %d", answers, holds
}' > "$tmp/summary"
touch "$tmp/streaks"
q() { # column, quantile
	sort -g -k"$1","$1" "$tmp/streaks" | awk -v c="$1" -v p="$2" '{ v[NR] = $c } END { i = int(NR * p + 0.999999); if (i < 1) i = 1; if (NR) print v[i]; else print 0 }'
}
printf '%s, streaks %d: length median %s p90 %s max %s; seconds to the answer that ends it median %.1f p90 %.1f max %.1f, total %.0f\n' \
	"$(cat "$tmp/summary")" "$(wc -l < "$tmp/streaks")" "$(q 1 0.5)" "$(q 1 0.9)" "$(q 1 1)" "$(q 2 0.5)" "$(q 2 0.9)" "$(q 2 1)" \
	"$(awk '{ s += $2 } END { print s + 0 }' "$tmp/streaks")"
