#!/usr/bin/env bash
# The explanation of the demo month (docs/explain/demo-explain.txt): runs
# the demo (-serve=false), then gpuledger explain on one team's month and
# on one of its workloads, down to the GPUs. Writes the commit and each
# command into the file.
#   bash tools/explain-demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/lib/docs-build.sh explain-demo.sh
"$tmp/gpuledger" demo -serve=false -month=2026-10 -out "$tmp/demo" -log.level=warn > /dev/null
out=docs/explain/demo-explain.txt
{
	echo "# at $(git rev-parse --short HEAD): bash tools/explain-demo.sh (gpuledger demo -serve=false -month=2026-10, then:)"
	echo "# gpuledger explain -ledger.path DEMO/ledger -team ml-research -month 2026-10 -limit 8"
	"$tmp/gpuledger" explain -config examples/cluster.yaml -ledger.path "$tmp/demo/ledger" -team ml-research -month 2026-10 -limit 8 2>/dev/null
	echo
	echo "# gpuledger explain -ledger.path DEMO/ledger -team ml-research -workload research/train-0580 -month 2026-10"
	"$tmp/gpuledger" explain -config examples/cluster.yaml -ledger.path "$tmp/demo/ledger" -team ml-research -workload research/train-0580 -month 2026-10 2>/dev/null
	echo
	echo "# gpuledger explain -ledger.path DEMO/ledger -team nlp -workload nlp-serving/serve-0010-7d9f8b6c5 -month 2026-10"
	"$tmp/gpuledger" explain -config examples/cluster.yaml -ledger.path "$tmp/demo/ledger" -team nlp -workload nlp-serving/serve-0010-7d9f8b6c5 -month 2026-10 -limit 6 2>/dev/null
} > "$out"
echo "wrote $out" >&2
