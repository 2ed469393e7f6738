package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestABDeltaAndMean: progDelta subtracts by program id (a program loaded
// after the first sample counts from zero), and the section's geometric
// mean weighs a round of each attach order alike: 0.5 and 2.0 give 1.00,
// as their pair does.
func TestABDeltaAndMean(t *testing.T) {
	before := []progStat{{ID: 1, Name: "a", RunTimeNs: 100, RunCnt: 1}}
	after := []progStat{{ID: 1, Name: "a", RunTimeNs: 1100, RunCnt: 11}, {ID: 2, Name: "b", RunTimeNs: 50, RunCnt: 5}}
	d := progDelta(before, after)
	if len(d) != 2 || d[0].RunTimeNs != 1000 || d[0].RunCnt != 10 || d[1].RunTimeNs != 50 || d[1].RunCnt != 5 {
		t.Fatalf("progDelta: %+v", d)
	}
	ab := &abRun{Base: "base", New: "new", Rounds: []abRound{
		{Fsyncs: 10, Base: []progStat{{Name: "a", RunTimeNs: 2000, RunCnt: 20}}, New: []progStat{{Name: "a", RunTimeNs: 1000, RunCnt: 20}}},
		{NewFirst: true, Fsyncs: 10, Base: []progStat{{Name: "a", RunTimeNs: 1000, RunCnt: 20}}, New: []progStat{{Name: "a", RunTimeNs: 2000, RunCnt: 20}}},
	}}
	var b strings.Builder
	ab.markdown(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) })
	out := b.String()
	for _, want := range []string{"| 1 | BASE | 10 | 200 | 100 | 0.50 |", "| 2 | NEW | 10 | 100 | 200 | 2.00 |",
		"geometric mean over the rounds: **1.00**", "| a | 2.00 | 75 | 150 | 2.00 | 75 | 150 |",
		"median of 1 pairs: **1.000** [1.000, 1.000]"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

// TestPairRatios: one geometric mean per pair of rounds, an odd last
// round left out.
func TestPairRatios(t *testing.T) {
	got := pairRatios([]float64{0.5, 2, 0.8, 1.25, 0.9})
	if len(got) != 2 || got[0] != 1 || got[1] != 1 {
		t.Fatalf("pairRatios: %v", got)
	}
}
