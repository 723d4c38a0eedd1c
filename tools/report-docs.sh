#!/usr/bin/env bash
# Writes docs/reports/ from the demo month (October 2026 of
# examples/cluster.yaml, seed 1), each file headed by the commit and the
# command:
#   - focus-2026-10.txt: the FOCUS 1.3 export's size, its first rows, and
#     its EffectiveCost summed beside the chargeback's TOTAL charge;
#   - allocation-2026-10.json: OpenCost's /allocation by team over the month,
#     with its totalCost summed beside the same TOTAL;
#   - workbook-2026-10-page-N.png: the workbook's pages as LibreOffice prints
#     them (libreoffice-calc and poppler-utils).
# Usage: bash tools/report-docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
commit=$(git rev-parse --short HEAD)
if [ -n "$(git status --porcelain -- ':!docs')" ]; then
	echo "report-docs.sh: the working tree has changes outside docs/; commit them so that the files name the code that wrote them" >&2
	exit 1
fi
for tool in soffice pdftoppm python3 curl; do
	command -v "$tool" > /dev/null || { echo "report-docs.sh: $tool is missing (apt-get install libreoffice-calc poppler-utils python3 curl)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'kill "$(cat "$tmp/serve.pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$tmp"' EXIT
out=docs/reports
mkdir -p "$out"
echo "report-docs.sh: building and running the demo month (about 2 minutes on 2 cores)" >&2
go build -o "$tmp/gpuledger" ./cmd/gpuledger
"$tmp/gpuledger" demo -serve=false -month=2026-10 -out "$tmp/demo" -log.level=warn > "$tmp/demo.txt"
"$tmp/gpuledger" report -month 2026-10 -config examples/cluster.yaml -ledger.path "$tmp/demo/ledger" -out "$tmp/r" -format csv,xlsx,focus > /dev/null

total() { # the chargeback's TOTAL charge
	python3 -c 'import csv,sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["team"] == "TOTAL": print(r["charge"])' "$tmp/r/chargeback-2026-10.csv"
}
{
	echo "# at $commit: bash tools/report-docs.sh"
	echo "# gpuledger report -month 2026-10 -config examples/cluster.yaml -format focus (the demo month's ledger)"
	python3 - "$tmp/r/focus-2026-10.csv" <<'EOF'
import csv, sys
from decimal import Decimal
rows = list(csv.DictReader(open(sys.argv[1])))
total = sum(Decimal(r["EffectiveCost"]) for r in rows)
origins = {}
for r in rows:
    if r["AllocatedMethodDetails"]:
        k = (r["ResourceId"], r["ChargePeriodStart"])
        ratio = Decimal(r["AllocatedMethodDetails"].split('"AllocatedRatio":')[1].split(",")[0])
        origins[k] = origins.get(k, 0) + ratio
print(f"# {len(rows)} rows, {len(origins)} origin charges (a flavor's pool for a day), "
      f"{sum(1 for v in origins.values() if v == 1)} of them with AllocatedRatio summing to exactly 1")
print(f"# sum of EffectiveCost: {total}")
EOF
	echo "# the chargeback's TOTAL charge: $(total)"
	echo "# the first 8 rows:"
	head -9 "$tmp/r/focus-2026-10.csv"
} > "$out/focus-2026-10.txt"

port=$((20000 + RANDOM % 20000))
"$tmp/gpuledger" serve -config examples/cluster.yaml -ledger.path "$tmp/demo/ledger" -ingest.dir "$tmp/ingest" \
	-http.listenAddr "127.0.0.1:$port" -auth.disabled -log.level=warn > "$tmp/serve.log" 2>&1 &
echo $! > "$tmp/serve.pid"
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/livez" > /dev/null && break; sleep 0.2; done
url="/allocation?window=2026-10-01T00:00:00Z,2026-11-01T00:00:00Z&aggregate=team&accumulate=true"
curl -sf "http://127.0.0.1:$port$url" > "$tmp/allocation.json"
{
	echo "// at $commit: bash tools/report-docs.sh; GET $url on the demo month's ledger"
	python3 - "$tmp/allocation.json" "$(total)" <<'EOF'
import json, sys
from decimal import Decimal
a = json.load(open(sys.argv[1]))
s = sum(Decimal(str(round(v["totalCost"], 6))) for v in a["data"][0].values())
print(f"// totalCost summed: {s:.6f}; the chargeback's TOTAL charge: {sys.argv[2]}")
print(json.dumps(a, indent=1, sort_keys=True))
EOF
} > "$out/allocation-2026-10.json.txt"

soffice -env:UserInstallation="file://$tmp/profile" --headless --norestore --convert-to pdf --outdir "$tmp/r" "$tmp/r/chargeback-2026-10.xlsx" > /dev/null
rm -f "$out"/workbook-2026-10-page-*.png
pdftoppm -png -r 70 "$tmp/r/chargeback-2026-10.pdf" "$out/workbook-2026-10-page"
echo "# at $commit: bash tools/report-docs.sh; the demo month's workbook (gpuledger report -format xlsx) printed by LibreOffice $(soffice --version | awk '{print $2}'), pdftoppm -r 70: $(ls "$out"/workbook-2026-10-page-*.png | wc -l) pages" > "$out/workbook-2026-10.txt"
ls -l "$out" >&2
