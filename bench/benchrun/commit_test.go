package main

import (
	"strings"
	"testing"
)

// TestCommitMarkdown: the added latency per put pairs each traced run with
// the untraced run of the same round, and the per-put columns divide by
// the run's puts.
func TestCommitMarkdown(t *testing.T) {
	r := results{MicroRounds: 3, Commit: map[string][]commitRun{
		"untraced":         {{Puts: 200, P50Ns: 1_000_000}, {Puts: 200, P50Ns: 2_000_000}, {Puts: 200, P50Ns: 1_500_000}},
		"etcdscope-commit": {{Puts: 200, P50Ns: 1_100_000, BPFRuns: 3200, BPFNs: 3_200_000}, {Puts: 200, P50Ns: 2_050_000, BPFRuns: 3200, BPFNs: 3_200_000}, {Puts: 200, P50Ns: 1_700_000, BPFRuns: 3200, BPFNs: 3_200_000}},
	}}
	d := r.commitDeltas("etcdscope-commit")
	if len(d) != 3 || d[0] != 100 || d[1] != 50 || d[2] != 200 {
		t.Fatalf("deltas %v µs, want [100 50 200]", d)
	}
	md := r.commitMarkdown()
	for _, want := range []string{"| etcdscope-commit | 1700 µs | +100 ", "(+50..+200) | 16.0 | 16.0 |", "| untraced | 1500 µs | — |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// etcd's CPU per put, paired per round: against untraced, and serve
	// --commit-pid against serve alone.
	r = results{Commit: map[string][]commitRun{
		"untraced":               {{Puts: 200, P50Ns: 1_000_000, EtcdCPUSec: 0.02}, {Puts: 200, P50Ns: 1_000_000, EtcdCPUSec: 0.04}},
		"etcdscope-serve":        {{Puts: 200, P50Ns: 1_000_000, EtcdCPUSec: 0.02}, {Puts: 200, P50Ns: 1_000_000, EtcdCPUSec: 0.04}},
		"etcdscope-serve-commit": {{Puts: 200, P50Ns: 1_100_000, EtcdCPUSec: 0.03}, {Puts: 100, P50Ns: 1_100_000, EtcdCPUSec: 0.03}},
	}}
	if x := r.commitRatios("etcdscope-serve-commit", "etcdscope-serve", etcdCPUPerPut); len(x) != 2 || x[0] != 1.5 || x[1] != 1.5 {
		t.Fatalf("etcd CPU ratios %v, want [1.5 1.5] (per put: 150/100 µs, 300/200 µs)", x)
	}
	md = r.commitMarkdown()
	for _, want := range []string{"| untraced | 150 | — | — | — |", "| etcdscope-serve-commit | 225 | +75 [+50, +100] (+50..+100) | 1.50x [1.50, 1.50] (1.50..1.50) | 1.10x ", "| serve-commit vs serve | | +75 "} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	r = results{CommitWhy: "no etcd binary at /x (make etcd)"}
	if md := r.commitMarkdown(); !strings.Contains(md, "Not measured: no etcd binary") {
		t.Errorf("a skipped section does not say why:\n%s", md)
	}
}
