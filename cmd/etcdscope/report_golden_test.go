package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
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

// TestReportMinLatencyRecording: a recording written with --min-latency
// holds only the slow calls, and its summary line covers every call. The
// report of such a recording is the summary's: the same bytes as the report
// of the whole recording (its records rebuild the summary), where a table
// of the slow calls alone would read as the run's (a fresh user's check:
// "12 calls", p50 1.2 ms, of a run of 10894 at p50 0.24 ms).
func TestReportMinLatencyRecording(t *testing.T) {
	full := filepath.Join(goldenDir, "ext4.report.jsonl")
	b, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	var kept, dropped int
	var slow bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		var rec struct {
			Type    string `json:"type"`
			TotalNs int64  `json:"total_ns"`
		}
		if len(line) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Type == "fsync" && rec.TotalNs < 1e6 {
			dropped++
			continue
		}
		kept++
		slow.Write(line)
	}
	if dropped == 0 || kept < 3 {
		t.Fatalf("the 1 ms cut kept %d lines and dropped %d: want both", kept, dropped)
	}
	filtered := filepath.Join(t.TempDir(), "slow.jsonl")
	if err := os.WriteFile(filtered, slow.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--output", "json"}} {
		want := reportOutput(t, append(args, full)...)
		got := reportOutput(t, append(args, filtered)...)
		if !bytes.Equal(got, want) {
			t.Errorf("report %v of the calls over 1 ms (%d dropped) differs from the whole recording's:\n%s", args, dropped, golden.FirstDiff(got, want))
		}
	}
}

// TestReportMinLatencyBudget: --fail-over-budget on a --min-latency
// recording judges the run's summary, with the table and with --html: 200
// calls of 1 ms and 1 of 20 ms have a p99 of 1 ms (ok, exit 0), though
// the one record over the 5 ms cut is over the budget.
func TestReportMinLatencyBudget(t *testing.T) {
	var recs []analysis.FsyncRecord
	for i := 0; i < 201; i++ {
		ns := int64(1e6)
		if i == 100 {
			ns = 20e6
		}
		recs = append(recs, analysis.FsyncRecord{Type: "fsync", Version: analysis.SchemaVersion, StartNs: uint64(i) * 3e7, EndNs: uint64(i)*3e7 + uint64(ns), TotalNs: ns,
			PID: 1, TID: 1, Comm: "etcd", Syscall: "fdatasync", Dev: "259:0", FS: "ext4", FileKind: analysis.KindWAL, Layers: analysis.Layers{DeviceFlushNs: ns}})
	}
	sum := analysis.BuildReport(recs, 0, 0, nil)
	if sum.Groups[0].Verdict != "ok" {
		t.Fatalf("the whole run's verdict %q, want ok", sum.Groups[0].Verdict)
	}
	var b bytes.Buffer
	var enc analysis.FsyncEncoder
	b.Write(append(enc.Append(nil, &recs[100]), '\n'))
	line, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(append(line, '\n'))
	dir := t.TempDir()
	slow := filepath.Join(dir, "slow.jsonl")
	if err := os.WriteFile(slow, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for _, args := range [][]string{{"--fail-over-budget", slow}, {"--fail-over-budget", "--html", filepath.Join(dir, "p.html"), slow}} {
		saved := os.Stdout
		os.Stdout = devnull
		err := runReport(args)
		os.Stdout = saved
		if err != nil {
			t.Errorf("report %v: %v, want the summary's ok verdict (exit 0)", args, err)
		}
	}
}

// TestReportCutCapture: a capture cut mid-line (copied while it was being
// written, or by a size limit) is bad input, exit 2, naming the cut line:
// it used to exit 1 blaming a tracer and BPF object mismatch, which a
// replay has no part in. The fsync report of what did decode is printed
// first.
func TestReportCutCapture(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"ext4", "1 capture line(s) could not be decoded (a capture cut short ends in a partial line: copy it whole)"},
		{"peers", "its window and lost events are unknown, and 1 line(s) could not be decoded (a capture cut short ends in a partial line: copy it whole)"},
	} {
		b, err := os.ReadFile(filepath.Join(goldenDir, c.name+".capture.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		// Cut in the middle of the tenth line.
		nl := 0
		for i := range b {
			if b[i] == '\n' {
				if nl++; nl == 9 {
					b = b[:i+40]
					break
				}
			}
		}
		cut := filepath.Join(t.TempDir(), c.name+".capture.jsonl")
		if err := os.WriteFile(cut, b, 0o600); err != nil {
			t.Fatal(err)
		}
		saved, savedPeers := os.Stdout, peersStdout
		devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout, peersStdout = devnull, devnull
		err = runReport([]string{cut})
		os.Stdout, peersStdout = saved, savedPeers
		devnull.Close()
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s cut mid-line: %v, want a usage error (exit 2) with %q", c.name, err, c.want)
		}
	}
}

// idleRecording: `etcdscope fsync --pid <etcd> --duration 3s --output
// json` of an idle etcd v3.6.16 member (testdata/loopback3).
const idleRecording = "../../testdata/loopback3/fsync-idle.jsonl"

// TestReportIdleFsyncRecording: a recording of `fsync --output json` made
// while etcd was idle holds its summary line only; report prints the
// report of zero calls (as the live run did), exit 0, not an error.
func TestReportIdleFsyncRecording(t *testing.T) {
	out := string(reportOutput(t, idleRecording))
	if !strings.HasPrefix(out, "etcdscope fsync report: 0 calls, 0 lost events") {
		t.Errorf("report of an idle recording:\n%s", out)
	}
	js := reportOutput(t, "--output", "json", idleRecording)
	var sum struct {
		Type   string `json:"type"`
		Fsyncs *int   `json:"fsyncs"`
	}
	if err := json.Unmarshal(js, &sum); err != nil || sum.Type != "summary" || sum.Fsyncs == nil || *sum.Fsyncs != 0 {
		t.Errorf("JSON of an idle recording (%v): %s", err, js)
	}
}
