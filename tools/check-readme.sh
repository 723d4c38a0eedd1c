#!/usr/bin/env bash
# Fails when a figure in the README is not in the generated output it is
# copied from: every line of the README's tour of the output (its first
# code block after "A tour of the output", but for "..." lines) must be a
# line of docs/demo-output.txt (written by tools/demo-output.sh), the
# timings apart (they differ between runs). Run by make lint.
set -euo pipefail
cd "$(dirname "$0")/.."
gen=docs/demo-output.txt
norm() { sed -E -e 's/ in [0-9.]+(ms|s|m[0-9.]*s) \([0-9.]+[kM]? samples\/s\)/ in <time>/' -e 's/ +$//'; }
tour=$(awk '/^### A tour of the output/ {t = 1; next} t && /^```/ {if (c) exit; c = 1; next} c' README.md)
if [ -z "$tour" ]; then
	echo "check-readme: README.md has no tour block after '### A tour of the output'" >&2
	exit 1
fi
missing=0
while IFS= read -r line; do
	case "$line" in *...*) continue ;; esac
	want=$(norm <<< "$line")
	if ! norm < "$gen" | grep -qxF -- "$want"; then
		echo "check-readme: README line not in $gen (run bash tools/demo-output.sh and copy it): $line" >&2
		missing=$((missing + 1))
	fi
done <<< "$tour"
if [ "$missing" -gt 0 ]; then
	exit 1
fi
echo "check-readme: the README's tour matches $gen"
