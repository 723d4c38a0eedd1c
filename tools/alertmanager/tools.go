//go:build tools

// Package tools pins the Alertmanager the capacity tests push alerts to. It
// is its own module so that Alertmanager's dependencies stay out of
// gpuledger's go.mod.
package tools

import (
	_ "github.com/prometheus/alertmanager/cmd/alertmanager"
)
