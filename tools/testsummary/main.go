// Command testsummary reads `go test -json` on stdin, prints what plain
// `go test` would (each package's result, the output of failed tests and of
// build failures), and ends with what was skipped and why, so that a
// package whose every test was skipped does not pass unnoticed as "ok". It
// exits 1 when a test, a package or a build failed.
//
//	go test -json ./... | go run ./tools/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type key struct{ pkg, test string }

func main() {
	failed, err := summarise(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

func summarise(r io.Reader, w io.Writer) (failed bool, err error) {
	output := map[key][]string{}
	skipped := map[key]string{}
	ran := map[string]int{}   // tests run per package (passed or failed)
	skips := map[string]int{} // tests skipped per package
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			// go test prints build errors and some messages as plain text.
			fmt.Fprintln(w, string(line))
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output", "build-output":
			output[k] = append(output[k], e.Output)
		case "skip":
			if e.Test != "" {
				skips[e.Package]++
				skipped[k] = reason(output[k])
			}
			delete(output, k)
		case "pass":
			if e.Test != "" {
				ran[e.Package]++
				delete(output, k)
				continue
			}
			fmt.Fprintf(w, "ok  \t%s\t%.3fs%s\n", e.Package, e.Elapsed, skipNote(ran[e.Package], skips[e.Package]))
		case "fail", "build-fail":
			failed = true
			if e.Test != "" {
				ran[e.Package]++
			}
			fmt.Fprint(w, strings.Join(output[k], ""))
			delete(output, k)
			if e.Test == "" && e.Action == "fail" {
				fmt.Fprintf(w, "FAIL\t%s\t%.3fs\n", e.Package, e.Elapsed)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	if len(skipped) > 0 {
		keys := make([]key, 0, len(skipped))
		for k := range skipped {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].pkg != keys[j].pkg {
				return keys[i].pkg < keys[j].pkg
			}
			return keys[i].test < keys[j].test
		})
		fmt.Fprintf(w, "\n%d tests skipped:\n", len(keys))
		for _, k := range keys {
			fmt.Fprintf(w, "  %s %s: %s\n", strings.TrimPrefix(k.pkg, "github.com/gpuledger/gpuledger/"), k.test, skipped[k])
		}
	}
	return failed, nil
}

// reason is the skip message among a skipped test's output lines.
func reason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "--- SKIP") || strings.HasPrefix(l, "=== ") {
			continue
		}
		// "file_test.go:12: message"
		if _, msg, ok := strings.Cut(l, ": "); ok && strings.Contains(l[:strings.Index(l, ": ")], ".go:") {
			return msg
		}
		return l
	}
	return "(no reason given)"
}

func skipNote(ran, skipped int) string {
	switch {
	case skipped == 0:
		return ""
	case ran == 0:
		return fmt.Sprintf("\t(all %d tests skipped)", skipped)
	}
	return fmt.Sprintf("\t(%d skipped)", skipped)
}
