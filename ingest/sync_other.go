//go:build !linux

package ingest

import "os"

// syncData makes what was appended to f durable: fsync where fdatasync is
// not offered.
func syncData(f *os.File) error { return f.Sync() }
