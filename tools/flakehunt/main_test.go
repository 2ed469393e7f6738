package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestReadAndTable: two rounds' events (as go test -json prints them) give
// pass counts, the worst time and the margin closest to its bound.
func TestReadAndTable(t *testing.T) {
	round1 := `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: flakehunt: margin exit 1.5s of 2s\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":3.5}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: 7 calls off\n"}
{"Action":"fail","Package":"p","Test":"TestB","Elapsed":1}
{"Action":"skip","Package":"p","Test":"TestC","Elapsed":0}
{"Action":"pass","Package":"p","Elapsed":5}
`
	round2 := `{"Action":"output","Package":"p","Test":"TestA","Output":"flakehunt: margin exit 800ms of 2s\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":4.25}
{"Action":"pass","Package":"p","Test":"TestB","Elapsed":0.5}
`
	results := map[string]*result{}
	margins := map[string]margin{}
	var fails bytes.Buffer
	if n := read(strings.NewReader(round1), results, margins, &fails); n != 1 {
		t.Errorf("round 1: %d failed, want 1", n)
	}
	if n := read(strings.NewReader(round2), results, margins, &fails); n != 0 {
		t.Errorf("round 2: %d failed, want 0", n)
	}
	if a := results["p TestA"]; a == nil || a.pass != 2 || a.worst != 4.25 {
		t.Errorf("TestA: %+v, want 2 passes, worst 4.25 s", a)
	}
	if b := results["p TestB"]; b == nil || b.pass != 1 || b.fail != 1 {
		t.Errorf("TestB: %+v, want 1 pass and 1 failure", b)
	}
	if m := margins["exit"]; m.text != "1.5s of 2s" {
		t.Errorf("margin: %+v, want the 1.5s run", m)
	}
	if !strings.Contains(fails.String(), "FAIL p TestB") || !strings.Contains(fails.String(), "7 calls off") {
		t.Errorf("the failure's output is not reported: %q", fails.String())
	}
	var out bytes.Buffer
	writeTable(&out, 2, results, margins)
	for _, want := range []string{"| p TestB | 1/2 | 1 | 0 | 1.00 s |", "| p TestA | 2/2 | 0 | 0 | 4.25 s |", "| p TestC | 0/2 | 0 | 1 |", "| exit | 1.5s of 2s | 25% |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
