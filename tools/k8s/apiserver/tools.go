//go:build tools

// Package tools pins the kube-apiserver the Kubernetes tests run. Kubernetes'
// staging modules are replaced by their published versions, as the
// kubernetes module itself requires v0.0.0 of each. It is its own module so
// that Kubernetes' dependencies stay out of gpuledger's go.mod.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
