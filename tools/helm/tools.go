//go:build tools

// Package tools pins the helm the chart tests run (helm lint, helm
// template). It is its own module so that helm's dependencies stay out of
// gpuledger's go.mod.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
