package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/gpuledger/gpuledger/"

// allowed lists, per package, the project packages and third-party modules
// its non-test code may import (DESIGN.md: imports point one way, and each
// third-party library lives in one package). The standard library is always
// allowed, except in attribution, which must stay pure.
var allowed = map[string][]string{
	"attribution":     {"ledger"},
	"ledger":          {},
	"ledger/embedded": {"ledger", "modernc.org/sqlite"},
	// shopspring/decimal is clickhouse-go's value type for Decimal columns.
	"ledger/clickhouse": {"ledger", "github.com/ClickHouse/clickhouse-go/v2", "github.com/shopspring/decimal"},
	// chtest gives tests a database on the ClickHouse CI starts.
	"ledger/clickhouse/chtest": {"github.com/ClickHouse/clickhouse-go/v2", "internal/testenv"},
	// testenv locates real servers and reference data for tests.
	"internal/testenv":             {},
	"internal/flagutil":            {},
	"internal/buildinfo":           {},
	"ledger/backend":               {"ledger", "ledger/embedded", "ledger/clickhouse", "internal/flagutil"},
	"ledger/embedded/embeddedtest": {"ledger", "ledger/embedded"},
	"ledger/ledgertest":            {"ledger", "github.com/google/go-cmp"},
	"config":                       {"ledger", "attribution", "internal/flagutil", "go.yaml.in/yaml/v3"},
	// ingest reads remote write's snappy blocks and compresses the
	// write-ahead log's cut bodies with klauspost/compress' s2 (faster
	// than VictoriaMetrics' lib/encoding/snappy, which cannot compress);
	// from VictoriaMetrics it takes the exposition parser.
	"ingest": {"attribution", "ledger", "internal/flagutil", "github.com/VictoriaMetrics/VictoriaMetrics/lib", "github.com/klauspost/compress/s2"},
	// sim's closed loop takes attribution's cost model (and ingest's
	// pipeline through an interface, so that ingest's tests may import
	// sim); its what-ifs answer capacity's verdicts.
	"sim": {"config", "admission", "ledger", "ingest", "attribution", "capacity", "internal/flagutil"},
	// demo runs the whole loop: the simulated cluster's telemetry
	// through ingest into the ledger.
	"sim/demo": {"sim", "config", "ingest", "attribution", "ledger", "ledger/embedded"},
	// simtoreal drives the same jobs through the simulator and a real
	// Kueue: the one place both meet.
	"sim/simtoreal":     {"sim", "admission/kube", "internal/kubetest", "ledger/embedded", "internal/flagutil"},
	"admission":         {"ledger"},
	"admission/kube":    {"admission", "ledger", "config", "k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go"},
	"internal/kubetest": {"internal/testenv", "k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go"},
	"reports":           {"ledger", "capacity", "github.com/xuri/excelize/v2"},
	// capacity reads its rules from the configuration's capacity section.
	"capacity": {"ledger", "config", "attribution", "internal/flagutil"},
	"api":      {"ledger", "config", "internal/flagutil", "reports", "ingest", "attribution", "capacity", "api/mcp", "github.com/labstack/echo/v4", "github.com/VictoriaMetrics/metrics"},
	// api/mcp serves the API's read routes as MCP tools, calling them
	// in-process: it imports none of gpuledger's packages.
	"api/mcp":       {"github.com/modelcontextprotocol/go-sdk"},
	"cmd/gpuledger": {"*"},
}

// impure are standard packages attribution may not import: it does no I/O
// and keeps no clock.
var impure = []string{"os", "io", "net", "log", "database", "syscall", "runtime", "sync"}

func TestImportLayout(t *testing.T) {
	root := "../.."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || path == filepath.Join(root, "tools")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		rules, ok := allowed[rel]
		if !ok {
			t.Errorf("package %s is not in the layout table; add it to allowed (and to DESIGN/README)", rel)
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !importAllowed(rel, rules, p) {
				t.Errorf("%s imports %s, which the layout does not allow", path, p)
			}
		}
		if rel == "attribution" {
			src, _ := os.ReadFile(path)
			if strings.Contains(string(src), "time.Now(") {
				t.Errorf("%s calls time.Now: attribution takes time in, it keeps no clock", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func importAllowed(pkg string, rules []string, imp string) bool {
	if len(rules) == 1 && rules[0] == "*" {
		return true
	}
	first, _, _ := strings.Cut(imp, "/")
	if !strings.Contains(first, ".") { // standard library
		if pkg != "attribution" {
			return true
		}
		for _, bad := range impure {
			if imp == bad || strings.HasPrefix(imp, bad+"/") {
				return false
			}
		}
		return true
	}
	for _, r := range rules {
		if strings.HasPrefix(imp, module) && imp == module+r {
			return true
		}
		if !strings.HasPrefix(imp, module) && (imp == r || strings.HasPrefix(imp, r+"/")) {
			return true
		}
	}
	return false
}

// cmdLines is the most non-test lines cmd/gpuledger may hold: a ratchet
// on the way to 1,000 (issue 38: cmd parses flags, wires packages and
// prints; decisions live in their packages). Lower it as logic moves out;
// never raise it.
const cmdLines = 1000

func TestCmdStaysThin(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		total += strings.Count(string(b), "\n")
	}
	if total > cmdLines {
		t.Errorf("cmd/gpuledger holds %d non-test lines, over %d: move the logic to the package that owns it (DESIGN.md), with its tests", total, cmdLines)
	}
}
