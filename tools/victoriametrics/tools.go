//go:build tools

// Package tools pins the VictoriaMetrics binaries the integration tests run
// (victoria-metrics single-node, vmagent and vmalert). It is its own module so that
// their dependencies stay out of gpuledger's go.mod.
package tools

import (
	_ "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics"
	_ "github.com/VictoriaMetrics/VictoriaMetrics/app/vmagent"
	_ "github.com/VictoriaMetrics/VictoriaMetrics/app/vmalert"
)
