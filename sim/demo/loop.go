package demo

import (
	"os"
	"path/filepath"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	"github.com/gpuledger/gpuledger/sim"
)

// ClosedLoop is sim.Simulation's Loop for `gpuledger simulate -loop`:
// each policy's telemetry goes through ingest's pipeline into an embedded
// ledger of its own, <dir>/ledger-<policy>, cleared first.
func ClosedLoop(dir string) func(policy string) (ledger.Store, sim.IngesterFactory, func() error, error) {
	return func(policy string) (ledger.Store, sim.IngesterFactory, func() error, error) {
		path := filepath.Join(dir, "ledger-"+policy)
		if err := os.RemoveAll(path); err != nil {
			return nil, nil, nil, err
		}
		store, err := embedded.Open(path, embedded.Options{})
		if err != nil {
			return nil, nil, nil, err
		}
		return store, func(m *attribution.Model, o attribution.Options, now func() time.Time) (sim.Ingester, error) {
			return ingest.NewPipeline(m, o, store, ingest.PipelineOptions{ReorderWindow: -1, Now: now})
		}, store.Close, nil
	}
}
