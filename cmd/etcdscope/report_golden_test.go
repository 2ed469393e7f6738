package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/internal/golden"
)

// goldenDir holds captures recorded on loop-device filesystems and a
// loopback peers run (scripts/record-captures.sh), with what
// `etcdscope report` printed for them when they were recorded: the replay
// of the same kernel events must print the same bytes.
const goldenDir = "../../testdata/capture"

// reportOutput runs `etcdscope report args...` and returns what it wrote
// to stdout.
func reportOutput(t *testing.T, args ...string) []byte {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved, savedPeers := os.Stdout, peersStdout
	os.Stdout, peersStdout = f, f
	err = runReport(args)
	os.Stdout, peersStdout = saved, savedPeers
	if err != nil {
		t.Fatalf("etcdscope report %s: %v", strings.Join(args, " "), err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReportCaptureGoldens(t *testing.T) {
	caps, err := filepath.Glob(filepath.Join(goldenDir, "*.capture.jsonl"))
	if err != nil || len(caps) < 5 {
		t.Fatalf("want the five golden captures in %s, found %v (%v)", goldenDir, caps, err)
	}
	for _, c := range caps {
		name := strings.TrimSuffix(filepath.Base(c), ".capture.jsonl")
		t.Run(name, func(t *testing.T) {
			jsonGolden := filepath.Join(goldenDir, name+".report.jsonl")
			if name == "peers" {
				jsonGolden = filepath.Join(goldenDir, name+".report.json")
			}
			for _, g := range []struct {
				golden string
				args   []string
			}{
				{filepath.Join(goldenDir, name+".report.txt"), []string{c}},
				{jsonGolden, []string{"--output", "json", c}},
			} {
				want, err := os.ReadFile(g.golden)
				if err != nil {
					t.Fatal(err)
				}
				got := reportOutput(t, g.args...)
				if !bytes.Equal(got, want) {
					t.Errorf("report %v differs from %s:\n%s", g.args, g.golden, golden.FirstDiff(got, want))
				}
			}
		})
	}
}
