package ingest

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gpuledger/gpuledger/attribution"
)

// ParseBytes reads a size such as 1073741824, 512MiB, 4GiB or 2GB.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	// Written so that NaN fails: every comparison with it is false.
	if n := f * float64(mult); err != nil || !(n >= 1) || !(n < 1<<62) {
		return 0, fmt.Errorf("%q is not a size; want bytes, or a number with KiB, MiB, GiB (or KB, MB, GB), such as 4GiB", s)
	}
	return int64(f * float64(mult)), nil
}

// SystemMemory is the memory this process may use: its cgroup's limit
// (v2 memory.max, v1 memory.limit_in_bytes), else the machine's
// (/proc/meminfo's MemTotal); and where that came from. 0 when none can
// be read.
func SystemMemory() (int64, string) {
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(v, 10, 64)
		// "max", or v1's page-rounded MaxInt64 for no limit.
		if err != nil || n <= 0 || n >= 1<<62 {
			continue
		}
		return n, path
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64); err == nil {
				return kb << 10, "/proc/meminfo"
			}
		}
	}
	return 0, ""
}

// MemoryBudget is what a memory limit gives each part of a live
// pipeline.
type MemoryBudget struct {
	Limit int64
	// Inflight is the remote-write bytes in flight (as sent and decoded),
	// Buffer the reorder window's bytes, Pods the pods remembered.
	Inflight, Buffer int64
	Pods             int
	// GoLimit is the garbage collector's soft limit.
	GoLimit int64
}

// BudgetFor shares limit out: an eighth to the bodies in flight (at most
// maxInflight), a quarter to the reorder window, an eighth to the pods
// remembered (at most maxPods); the rest is for the runtime, the decoders,
// the ledger (SQLite's pages are outside Go's heap) and a snapshot's
// writing. The collector is told 80% of it.
func BudgetFor(limit, maxInflight int64, maxPods int) MemoryBudget {
	return MemoryBudget{Limit: limit, Inflight: min(maxInflight, limit/8), Buffer: limit / 4,
		Pods: int(min(int64(maxPods), max(limit/8/attribution.PodBytes, 1000))), GoLimit: limit / 10 * 8}
}

// MemoryBudgetOf is the budget of a limit given as text (ParseBytes;
// empty: the cgroup's, else the machine's, else 4 GiB), and where the
// limit came from.
func MemoryBudgetOf(limitText string, maxInflight int64) (MemoryBudget, string, error) {
	limit, from := int64(0), "the flag"
	if limitText != "" {
		n, err := ParseBytes(limitText)
		if err != nil {
			return MemoryBudget{}, "", err
		}
		limit = n
	} else if limit, from = SystemMemory(); limit == 0 {
		limit, from = 4<<30, "a default (no cgroup limit or /proc/meminfo read)"
	}
	if limit < 256<<20 {
		return MemoryBudget{}, "", fmt.Errorf("%d bytes (from %s): want at least 256MiB", limit, from)
	}
	return BudgetFor(limit, maxInflight, 500_000), from, nil
}
