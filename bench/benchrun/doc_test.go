package main

import (
	"encoding/json"
	"os"
	"testing"
)

// TestPerformanceDocRendered: docs/performance.md is exactly what
// `benchrun -from bench/results.json` renders with bench/findings.md, so a
// hand edit of the generated file (lost at the next `make bench`) fails
// here: edit findings.md, the results' notes or report.go instead.
func TestPerformanceDocRendered(t *testing.T) {
	b, err := os.ReadFile("../results.json")
	if err != nil {
		t.Fatal(err)
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	r.Options = options{findings: "../findings.md"}
	doc, err := os.ReadFile("../../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.markdown(); got != string(doc) {
		t.Fatalf("docs/performance.md differs from what bench/results.json and bench/findings.md render (%d vs %d bytes): run `go run ./bench/benchrun -from bench/results.json -out docs/performance.md`", len(doc), len(got))
	}
}
