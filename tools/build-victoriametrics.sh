#!/usr/bin/env bash
# Builds victoria-metrics, vmagent and vmalert at the version pinned in
# tools/victoriametrics/go.mod into a cache folder keyed on that version, and
# prints the folder. A warm cache returns at once.
#   tools/build-victoriametrics.sh            # into ${GPULEDGER_CACHE:-$HOME/.cache/gpuledger}
set -euo pipefail
here=$(cd "$(dirname "$0")/victoriametrics" && pwd)
version=$(awk '/github.com\/VictoriaMetrics\/VictoriaMetrics v/{print $NF}' "$here/go.mod")
dest="${GPULEDGER_CACHE:-$HOME/.cache/gpuledger}/victoriametrics-$version"
apps="victoria-metrics vmagent vmalert"
missing=""
for app in $apps; do
	[ -x "$dest/$app" ] || missing="$missing $app"
done
if [ -z "$missing" ]; then
	echo "$dest"
	exit 0
fi
mkdir -p "$dest"
cd "$here"
if [ ! -f go.sum ] || ! grep -q "VictoriaMetrics/VictoriaMetrics $version" go.sum; then
	GOFLAGS=-mod=mod go mod tidy >&2
fi
ldflags="-s -w -X github.com/VictoriaMetrics/VictoriaMetrics/lib/buildinfo.Version=victoria-metrics-$version"
for app in $missing; do
	echo "building $app $version (a few minutes the first time)" >&2
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$dest/$app.tmp" "github.com/VictoriaMetrics/VictoriaMetrics/app/$app"
	mv "$dest/$app.tmp" "$dest/$app"
done
echo "$dest"
