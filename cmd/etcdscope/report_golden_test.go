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

// TestReportCaptureDiskCaches: a capture whose end line carries the live
// run's disk write cache modes (fsync --capture writes them) replays with
// the live run's "disk ... write cache" line; the golden captures, made
// before, have none and replay without it (TestReportCaptureGoldens).
func TestReportCaptureDiskCaches(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(goldenDir, "ext4.capture.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	const end = `{"type":"end","v":1,"lost_events":0,"missed_events":0}`
	if !bytes.HasSuffix(bytes.TrimSpace(b), []byte(end)) {
		t.Fatalf("ext4.capture.jsonl does not end with %s", end)
	}
	b = bytes.Replace(b, []byte(end), []byte(`{"type":"end","v":1,"lost_events":0,"missed_events":0,"disk_caches":[{"dev":"7:0","name":"loop0","write_cache":"write back"}]}`), 1)
	c := filepath.Join(t.TempDir(), "ext4.capture.jsonl")
	if err := os.WriteFile(c, b, 0o600); err != nil {
		t.Fatal(err)
	}
	const line = "disk loop0 (7:0): write cache write back, no FUA"
	if got := reportOutput(t, c); !bytes.Contains(got, []byte(line)) {
		t.Errorf("replay lacks %q:\n%s", line, got)
	}
	if got := reportOutput(t, filepath.Join(goldenDir, "ext4.capture.jsonl")); bytes.Contains(got, []byte("disk loop0 (7:0): write cache")) {
		t.Errorf("a capture without disks printed a write cache line:\n%s", got)
	}
}
