#!/usr/bin/env bash
# The scale estimate of docs/scale: BenchmarkGPUMonth (ledger/clickhouse)
# writes a month of one cluster of 1,000 and of 10,000 GPUs into a
# ClickHouse of its own, three runs each (three fleets drawn with different
# seeds); its output goes to docs/scale/bench-gpu-month.txt and
# tools/scaleestimate's reading of it to docs/scale/estimate.txt, both with
# the command and commit in their header. The ingest figures it is given
# are docs/ingest/benchmarks.md's at 10,000 GPUs, the less favourable of
# each: samples per CPU-second of its first table (1 sender, 1.545M, from
# before the later speed-ups), peak memory per series the highest of its
# last table (893 B).
# Needs clickhouse-server (Debian's package). Usage: bash tools/scale-estimate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rev="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo ' (with uncommitted changes)')"
chv=$(dpkg-query -W -f='${Version}' clickhouse-server 2>/dev/null || echo unknown)
mkdir -p docs/scale
bench=docs/scale/bench-gpu-month.txt
cmd="GPULEDGER_BENCH_GPUS=1000,10000 go test -run '^\$' -bench BenchmarkGPUMonth -benchtime 1x -count 3 -timeout 60m ./ledger/clickhouse/"
echo "running: $cmd (about 10 minutes on 2 cores)" >&2
{
	echo "# bash tools/scale-estimate.sh at $rev, on $(nproc) cores, ClickHouse $chv (Debian's package) on 127.0.0.1; the command:"
	echo "# $cmd"
	GPULEDGER_BENCH_GPUS=1000,10000 go test -run '^$' -bench BenchmarkGPUMonth -benchtime 1x -count 3 -timeout 60m ./ledger/clickhouse/ | grep -E '^(Benchmark|ok|FAIL)'
} > "$bench.tmp"
mv "$bench.tmp" "$bench"
est=(go run ./tools/scaleestimate -in "$bench" -samplesPerCPUSecond 1545000 -bytesPerSeries 893)
{
	echo "# bash tools/scale-estimate.sh at $rev; the command:"
	echo "# ${est[*]}"
	echo
	"${est[@]}"
} > docs/scale/estimate.txt
echo "wrote $bench and docs/scale/estimate.txt" >&2
