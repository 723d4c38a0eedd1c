#!/usr/bin/env bash
# Builds helm at the version pinned in tools/helm/go.mod into a cache folder
# keyed on that version, and prints the folder. A warm cache returns at once.
#   tools/build-helm.sh            # into ${GPULEDGER_CACHE:-$HOME/.cache/gpuledger}
set -euo pipefail
here=$(cd "$(dirname "$0")/helm" && pwd)
version=$(awk '/helm.sh\/helm\/v3 v/{print $NF}' "$here/go.mod")
dest="${GPULEDGER_CACHE:-$HOME/.cache/gpuledger}/helm-$version"
if [ -x "$dest/helm" ]; then
	echo "$dest"
	exit 0
fi
mkdir -p "$dest"
cd "$here"
echo "building helm $version (a few minutes the first time)" >&2
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version" -o "$dest/helm.tmp" helm.sh/helm/v3/cmd/helm
mv "$dest/helm.tmp" "$dest/helm"
echo "$dest"
