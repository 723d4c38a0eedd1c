//go:build tools

// Package tools pins the Kueue controller the Kubernetes tests run, and
// with it the CRDs and webhook manifests in its module. It is its own
// module so that Kueue's dependencies stay out of gpuledger's go.mod.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
