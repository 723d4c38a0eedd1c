#!/usr/bin/env bash
# Where the demo's CPU time goes: BenchmarkDemoWeek (a week of the example
# cluster through the whole loop at 15 s scrapes: the simulator's
# exporters' text, ingest's parser and attribution, the embedded ledger)
# under Go's CPU profiler; writes docs/ingest/demo-profile.txt with the
# command, the commit, the benchmark's line and pprof's top functions by
# cumulative and by own time.
# Usage: bash tools/demo-profile.sh (about 30 seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=docs/ingest/demo-profile.txt
(cd sim/demo && go test -c -o "$tmp/demo.test" .)
(cd sim/demo && "$tmp/demo.test" -test.run '^$' -test.bench DemoWeek -test.benchtime 1x -test.cpuprofile "$tmp/cpu.prof") > "$tmp/bench"
{
	echo "# at $(git rev-parse --short HEAD), on $(nproc) cores: bash tools/demo-profile.sh"
	echo "# go test -run '^\$' -bench DemoWeek -benchtime 1x -cpuprofile cpu.prof ./sim/demo; go tool pprof -top"
	echo
	grep '^Benchmark' "$tmp/bench"
	echo
	echo "## by cumulative time (what each part of the loop costs, callees included)"
	go tool pprof -top -cum -nodecount 30 "$tmp/demo.test" "$tmp/cpu.prof" 2>/dev/null | sed -n '/flat%/,$p'
	echo
	echo "## by own time"
	go tool pprof -top -nodecount 20 "$tmp/demo.test" "$tmp/cpu.prof" 2>/dev/null | sed -n '/flat%/,$p'
} > "$out"
echo "wrote $out"
