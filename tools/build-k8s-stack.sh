#!/usr/bin/env bash
# Builds the Kubernetes test stack at the versions pinned in tools/k8s/*/go.mod
# (etcd, kube-apiserver, the Kueue controller) into a cache folder keyed on
# those files, copies Kueue's CRDs and webhook manifests from its module next
# to them, and prints the folder. A warm cache returns at once; a cold one
# takes about 17 minutes on 2 cores (kube-apiserver's link needs ~3 GB).
#   tools/build-k8s-stack.sh            # into ${GPULEDGER_CACHE:-$HOME/.cache/gpuledger}
set -euo pipefail
here=$(cd "$(dirname "$0")/k8s" && pwd)
for m in etcd apiserver kueue; do
	if [ ! -f "$here/$m/go.sum" ]; then
		(cd "$here/$m" && GOFLAGS=-mod=mod go mod tidy >&2)
	fi
done
key=$(cat "$here"/*/go.mod "$here"/*/go.sum | sha256sum | cut -c1-12)
dest="${GPULEDGER_CACHE:-$HOME/.cache/gpuledger}/k8s-stack-$key"
if [ -x "$dest/etcd" ] && [ -x "$dest/kube-apiserver" ] && [ -x "$dest/kueue" ] && [ -f "$dest/kueue-webhooks.yaml" ]; then
	echo "$dest"
	exit 0
fi
mkdir -p "$dest"
build() { # module-folder output package [ldflags]
	echo "building $2 (minutes the first time)" >&2
	(cd "$here/$1" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "${4:--s -w}" -o "$dest/$2.tmp" "$3")
	mv "$dest/$2.tmp" "$dest/$2"
}
build etcd etcd go.etcd.io/etcd/server/v3
kv=$(awk '/k8s.io\/kubernetes v/{print $NF}' "$here/apiserver/go.mod")
minor=$(echo "$kv" | cut -d. -f2)
build apiserver kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver \
	"-s -w -X k8s.io/component-base/version.gitVersion=$kv -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
build kueue kueue sigs.k8s.io/kueue/cmd/kueue
src=$(cd "$here/kueue" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
rm -rf "$dest/kueue-crds"
cp -r "$src/config/components/crd/bases" "$dest/kueue-crds"
cp "$src/config/components/webhook/manifests.yaml" "$dest/kueue-webhooks.yaml"
chmod -R u+w "$dest/kueue-crds" "$dest/kueue-webhooks.yaml"
echo "$dest"
