#!/usr/bin/env bash
# The backfill rate on a VictoriaMetrics export of a month: writes GPUS
# GPUs' telemetry of October 2026 (a scrape every 15 s, tools/benchingest
# -exportFile), imports it into the pinned VictoriaMetrics
# (tools/build-victoriametrics.sh) through /api/v1/import, exports it back
# through /api/v1/export, and runs gpuledger ingest on the month RUNS times
# at each commit, alternately, as separate processes: from the exported
# file (-from file://) and from the running VictoriaMetrics (-from http://,
# its own CPU not counted). Writes docs/ingest/backfill-rate.txt with the
# commands, each run's wall, CPU and samples/s, min/median/max, and whether
# the two commits' ledgers give the same chargeback.
# Usage: bash tools/backfill-rate.sh BEFORE AFTER [RUNS] [GPUS]
set -euo pipefail
cd "$(dirname "$0")/.."
before=$(git rev-parse --short "${1:?usage: tools/backfill-rate.sh BEFORE AFTER [RUNS] [GPUS]}")
after=$(git rev-parse --short "${2:?usage: tools/backfill-rate.sh BEFORE AFTER [RUNS] [GPUS]}")
runs=${3:-3}
gpus=${4:-64}
vm=$(bash tools/build-victoriametrics.sh)
tmp=$(mktemp -d)
vmpid=
trap '{ [ -z "$vmpid" ] || kill "$vmpid"; } 2>/dev/null || true; git worktree remove --force "$tmp/src" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for rev in "$before" "$after"; do
	git worktree add -q --detach "$tmp/src" "$rev"
	(cd "$tmp/src" && go build -o "$tmp/gpuledger-$rev" ./cmd/gpuledger)
	git worktree remove --force "$tmp/src"
done
go build -o "$tmp/benchingest" ./tools/benchingest
echo "writing $gpus GPUs' month of telemetry" >&2
"$tmp/benchingest" -exportFile "$tmp/written.jsonl" -gpus "$gpus" -days 31 >&2

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$vm/victoria-metrics" -storageDataPath "$tmp/vmdata" -httpListenAddr "127.0.0.1:$port" -retentionPeriod 100y \
	-search.maxExportDuration 1000h -loggerLevel ERROR > "$tmp/vm.log" 2>&1 &
vmpid=$!
url=http://127.0.0.1:$port
for _ in $(seq 100); do curl -fs "$url/health" > /dev/null && break; sleep 0.1; done
echo "importing into VictoriaMetrics on $url" >&2
curl -fsS -X POST -T "$tmp/written.jsonl" "$url/api/v1/import"
curl -fsS "$url/internal/force_flush"
rm "$tmp/written.jsonl"
start=2026-10-01T00:00:00Z end=2026-11-01T00:00:00Z
curl -fsS -G "$url/api/v1/export" --data-urlencode 'match[]={__name__=~".+"}' \
	--data-urlencode "start=$start" --data-urlencode "end=$end" -o "$tmp/export.jsonl"
cfg=$tmp/written.jsonl.yaml

out=docs/ingest/backfill-rate.txt
{
	echo "# bash tools/backfill-rate.sh $before $after $runs $gpus, on $(nproc) cores, VictoriaMetrics $("$vm/victoria-metrics" -version | head -1)"
	echo "# the month: benchingest -exportFile -gpus $gpus -days 31, imported into VictoriaMetrics and exported back ($(du -m "$tmp/export.jsonl" | cut -f1) MiB of /api/v1/export, $(wc -l < "$tmp/export.jsonl") lines)"
	echo "# each run: gpuledger ingest -from SOURCE -start $start -end $end -config <the fleet's configuration> -ledger.path <new>"
	echo
	for src in "file://$tmp/export.jsonl" "$url"; do
		kind=${src%%:*}
		for i in $(seq "$runs"); do
			for rev in "$before" "$after"; do
				d=$tmp/run-$kind-$rev-$i
				mkdir -p "$d"
				/usr/bin/time -f "%e %U %S" -o "$d/time" "$tmp/gpuledger-$rev" ingest -from "$src" -start "$start" -end "$end" \
					-config "$cfg" -ledger.path "$d/ledger" -log.level=warn > "$d/out" 2> "$d/err"
				read -r wall user sys < "$d/time"
				samples=$(sed -n 's/.* ledger rows, \([0-9]*\) samples attributed.*/\1/p' "$d/out")
				cpu=$(echo "$user + $sys" | bc)
				echo "$kind $rev run $i: $samples samples, wall $wall s, CPU $cpu s, $(echo "$samples / $wall" | bc) samples/s of wall, $(echo "$samples / $cpu" | bc) samples/s of CPU"
				echo "$kind $rev $cpu $(echo "$samples / $wall" | bc)" >> "$tmp/cpu"
				"$tmp/gpuledger-$rev" report -month 2026-10 -config "$cfg" -ledger.path "$d/ledger" -out "$d/report" > "$d/report.out" 2>&1 ||
					{ echo "gpuledger report failed: $(cat "$d/report.out")" >&2; exit 1; }
			done
		done
		echo
	done
	for kind in file http; do
		for rev in "$before" "$after"; do
			stats() { sort -n | awk '{v[NR] = $1} END {printf "min %s, median %s, max %s", v[1], v[int((NR + 1) / 2)], v[NR]}'; }
			cpu=$(awk -v k="$kind" -v r="$rev" '$1 == k && $2 == r {print $3}' "$tmp/cpu" | stats)
			rate=$(awk -v k="$kind" -v r="$rev" '$1 == k && $2 == r {print $4}' "$tmp/cpu" | stats)
			echo "$kind $rev: CPU seconds $cpu; samples/s of wall $rate; $runs runs"
		done
	done
	for kind in file http; do
		if cmp -s "$tmp/run-$kind-$before-1/report/chargeback-2026-10.csv" "$tmp/run-$kind-$after-1/report/chargeback-2026-10.csv"; then
			echo "$kind: the chargeback CSVs of the two commits are byte-identical"
		else
			echo "$kind: the chargeback CSVs of the two commits differ"
		fi
	done
	if cmp -s "$tmp/run-file-$after-1/report/chargeback-2026-10.csv" "$tmp/run-http-$after-1/report/chargeback-2026-10.csv"; then
		echo "file and http: the chargeback CSVs are byte-identical"
	else
		echo "file and http: the chargeback CSVs differ"
	fi
} | tee "$out"
echo "wrote $out" >&2
