#!/usr/bin/env bash
# Builds Alertmanager at the version pinned in tools/alertmanager/go.mod into
# a cache folder keyed on that version, and prints the folder. A warm cache
# returns at once.
#   tools/build-alertmanager.sh            # into ${GPULEDGER_CACHE:-$HOME/.cache/gpuledger}
#
# The module on the proxy does not carry the web UI's built assets
# (ui/app/dist, embedded with go:embed; they come from an npm build), so the
# source is copied and given a placeholder page in their place: the API v2,
# which is what gpuledger talks to, is unchanged.
set -euo pipefail
here=$(cd "$(dirname "$0")/alertmanager" && pwd)
version=$(awk '/github.com\/prometheus\/alertmanager v/{print $NF}' "$here/go.mod")
dest="${GPULEDGER_CACHE:-$HOME/.cache/gpuledger}/alertmanager-$version"
if [ -x "$dest/alertmanager" ]; then
	echo "$dest"
	exit 0
fi
mkdir -p "$dest"
cd "$here"
GOFLAGS=-mod=mod go mod download github.com/prometheus/alertmanager
src=$(GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' github.com/prometheus/alertmanager)
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
for ui in elm mantine; do
	mkdir -p "$work/ui/app/dist/$ui"
	echo '<!doctype html><title>Alertmanager</title><p>The web UI is not built into this binary; use the API v2.' > "$work/ui/app/dist/$ui/index.html"
done
echo "building alertmanager $version (a few minutes the first time)" >&2
cd "$work"
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${version#v}" -o "$dest/alertmanager.tmp" ./cmd/alertmanager
mv "$dest/alertmanager.tmp" "$dest/alertmanager"
echo "$dest"
