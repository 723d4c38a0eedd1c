# Sourced by the scripts that write docs/ from the demo's October: builds
# gpuledger, simulates the month into a scratch directory ($dir, removed on
# exit; its ledger at $dir/gpuledger-demo/ledger), and sets $rev (the
# commit, for the output's header), $bin and $cfg.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rev="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo ' (with uncommitted changes)')"
make build > /dev/null
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bin=$PWD/bin/gpuledger
cfg=$PWD/examples/cluster.yaml
(cd "$dir" && "$bin" demo -serve=false -month 2026-10 -config "$cfg" -log.level=warn > demo.log 2>&1)
