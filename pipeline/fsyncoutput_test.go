package pipeline_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/pipeline"
)

// TestFsyncOutput replays a golden fsync capture through the loop with
// fsync's outputs as --output json --interval 1s --capture FILE wires
// them: one JSON line per record and the summary on stdout, the interval
// lines on stderr, and a capture that reads back with every record.
func TestFsyncOutput(t *testing.T) {
	f, err := os.Open(filepath.Join(goldenDir, "ext4.capture.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := capture.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	capPath := filepath.Join(t.TempDir(), "out.capture.jsonl")
	out, err := pipeline.NewFsyncOutput(pipeline.FsyncOutputConfig{Stdout: &stdout, Stderr: &stderr, JSON: true, Interval: true,
		CapturePath: capPath, CaptureHeader: capture.Header{Tracer: capture.TracerFsync, Command: "fsync"}})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Abandon()
	p := pipeline.NewFsyncLoop(pipeline.FsyncLoopConfig{Host: pipeline.ReplayHost(rd), Sinks: out.Sinks(), Capture: out.Capture()})
	if err := p.Run(pipeline.ReadFunc(rd.ReadEvent)); err != nil {
		t.Fatal(err)
	}
	end, _ := rd.End()
	out.IntervalLine(replaySource{end})
	if err := out.CloseLines(nil); err != nil {
		t.Fatal(err)
	}
	const window = 40 * time.Second // the run's, longer than its calls' span
	rep, err := out.Report(pipeline.Stats{Lost: end.LostEvents, Missed: end.MissedEvents}, window, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if rep.Fsyncs == 0 || len(lines) != int(rep.Fsyncs)+1 || !strings.Contains(lines[len(lines)-1], `"type":"summary"`) {
		t.Errorf("%d calls, %d JSON lines, the last: %.200s", rep.Fsyncs, len(lines), lines[len(lines)-1])
	}
	// The recording and the capture carry the run's window, which the
	// page states (the new-user walk: a 40 s recording read "over 19.969s").
	if !strings.Contains(lines[len(lines)-1], `"window_ns":40000000000`) {
		t.Errorf("the summary lacks the run's window_ns: %.300s", lines[len(lines)-1])
	}
	if !strings.Contains(stderr.String(), "fsyncs=") {
		t.Errorf("no interval line on stderr: %q", stderr.String())
	}
	// The capture is in place and holds the same calls.
	cf, err := os.Open(capPath)
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	crd, err := capture.NewReader(bufio.NewReader(cf))
	if err != nil {
		t.Fatal(err)
	}
	rs := pipeline.NewReportSink(false)
	if err := pipeline.NewFsyncLoop(pipeline.FsyncLoopConfig{Host: pipeline.ReplayHost(crd), Sinks: []pipeline.FsyncSink{rs}}).Run(pipeline.ReadFunc(crd.ReadEvent)); err != nil {
		t.Fatal(err)
	}
	if got := rs.Report(0, 0, nil).Fsyncs; got != rep.Fsyncs {
		t.Errorf("the capture replays %d calls, the run had %d", got, rep.Fsyncs)
	}
	if cend, ok := crd.End(); !ok || cend.WindowNs != int64(window) {
		t.Errorf("the capture's end: %+v, %v; want window_ns %d", cend, ok, int64(window))
	}
}
