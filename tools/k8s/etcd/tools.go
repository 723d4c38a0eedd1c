//go:build tools

// Package tools pins the etcd the Kubernetes tests run under kube-apiserver.
// It is its own module so that etcd's dependencies stay out of gpuledger's
// go.mod.
package tools

import _ "go.etcd.io/etcd/server/v3"
