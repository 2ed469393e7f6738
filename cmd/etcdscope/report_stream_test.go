package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/internal/golden"
	"github.com/etcdscope/etcdscope/report"
)

// TestReportRecordingGoldens: `etcdscope report` of a golden recording
// (the JSON Lines the capture's replay wrote) prints the capture's golden
// table, and with --output json the recording's own summary line: the
// recording streamed through the report sink gives the bytes the whole
// recording held in memory gave.
func TestReportRecordingGoldens(t *testing.T) {
	for _, name := range []string{"ext4", "xfs", "btrfs", "ext4-stacked"} {
		t.Run(name, func(t *testing.T) {
			rec := filepath.Join(goldenDir, name+".report.jsonl")
			b, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			lines := bytes.SplitAfter(bytes.TrimSpace(b), []byte("\n"))
			wantJSON := append(bytes.TrimSpace(lines[len(lines)-1]), '\n')
			wantTable, err := os.ReadFile(filepath.Join(goldenDir, name+".report.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if got := reportOutput(t, rec); !bytes.Equal(got, wantTable) {
				t.Errorf("report %s differs from %s.report.txt:\n%s", rec, name, golden.FirstDiff(got, wantTable))
			}
			if got := reportOutput(t, "--output", "json", rec); !bytes.Equal(got, wantJSON) {
				t.Errorf("report --output json %s differs from its summary line:\n%s", rec, golden.FirstDiff(got, wantJSON))
			}
		})
	}
}

// reportStreamBoundBytes bounds the peak RSS of `etcdscope report` (the
// table and --output json) of a 200 MB recording, whatever its size: the
// recording streams through the report's builders, whose series keep at
// most stats.ExactLimit exact values each and then fio's fixed bins.
// Measured (this test binary as etcdscope, 2026-12-06, 2 cores shared with
// other agents' tests): 5 runs of both outputs (10 children), 45-46 MiB,
// worst 46 MiB: a 28% margin (300 MB: 44-47 MiB in 10 runs). Before, the
// whole recording was held: 519 MB for this one, 714 MB for 300 MB
// (etcdscope binary, one run each), 1.37 GB for the 600 MB.
const reportStreamBoundBytes = 64 << 20

// reportPageBoundBytes bounds the peak RSS of `etcdscope report --html` of
// the same recording: the page draws every call (the slowest 1% of each
// group, a heatmap over time), so it keeps 72 bytes of each (report.Call)
// beside the report's state: 7 MiB for these 104,566 calls, twice while
// the slice grows. Measured (as above): 5 runs, 63-67 MiB, worst 67 MiB: a
// 30% margin (300 MB: 62-68 MiB in 5 runs). Before, every record was held,
// and again by group: 686 MB for this one, 935 MB for 300 MB.
const reportPageBoundBytes = 96 << 20

// TestReportMemoryBounded: `report` of a recording of hundreds of MB
// (the golden ext4 recording's fsyncs repeated to 200 MB, its summary
// line last) exits 0 with every call counted, in peak RSS (the child's
// VmHWM) under reportStreamBoundBytes; the page (--html) under
// reportPageBoundBytes.
func TestReportMemoryBounded(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(goldenDir, "ext4.report.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var fsyncs, rest []byte
	per := 0
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if bytes.HasPrefix(line, []byte(`{"type":"fsync"`)) {
			fsyncs = append(fsyncs, line...)
			per++
		} else {
			rest = append(rest, line...)
		}
	}
	if per == 0 {
		t.Fatal("the golden ext4 recording has no fsync records")
	}
	const size = 200 << 20
	rec := filepath.Join(t.TempDir(), "big.jsonl")
	f, err := os.Create(rec)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	copies := 0
	for n := 0; n < size; n += len(fsyncs) {
		w.Write(fsyncs)
		copies++
	}
	w.Write(rest)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	calls := copies * per
	page := filepath.Join(t.TempDir(), "page.html")
	for _, args := range [][]string{{"report", rec}, {"report", "--output", "json", rec}, {"report", "--html", page, rec}} {
		cmd := exec.Command(os.Args[0], args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		rss, err := childPeakRSS(t, cmd)
		if rss == 0 {
			t.Fatalf("etcdscope %v wrote no status: %v\n%s", args, err, stderr.String())
		}
		t.Logf("%v: %d calls in %.1f s, peak RSS %d MiB", args[:len(args)-1], calls, time.Since(start).Seconds(), rss>>20)
		if err != nil {
			t.Fatalf("etcdscope %v: %v\n%s", args, err, stderr.String())
		}
		want, out, bound := fmt.Sprintf("etcdscope fsync report: %d calls,", calls), stdout.String(), int64(reportStreamBoundBytes)
		switch args[1] {
		case "--output":
			want = fmt.Sprintf(`"fsyncs":%d,`, calls)
		case "--html":
			b, _ := os.ReadFile(page)
			want, out, bound = fmt.Sprintf("%d fsync/fdatasync calls", calls), string(b), reportPageBoundBytes
		}
		if !strings.Contains(out, want) {
			t.Errorf("etcdscope %v: no %q in\n%.300s", args, want, out)
		}
		if rss > bound {
			t.Errorf("etcdscope %v of a %d MB recording: peak RSS %d MiB, bound %d MiB", args, size>>20, rss>>20, bound>>20)
		}
	}
}

// childPeakRSS runs cmd, this test binary as etcdscope (TestMain), and
// returns its peak resident set in bytes: VmHWM, which the child writes as
// it exits (ETCDSCOPE_TEST_HWM); 0 when it did not (killed). Not rusage's
// Maxrss: Go starts a child with vfork (CLONE_VM), and exec records the
// old mm's high-water mark, the parent's, in the child's maxrss (Linux
// exec_mmap), so a child of a test binary that has grown reads as big as
// its parent (106 MiB here for a child whose VmHWM was 45 MiB).
func childPeakRSS(t *testing.T, cmd *exec.Cmd) (int64, error) {
	t.Helper()
	hwm := filepath.Join(t.TempDir(), "status")
	cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1", "ETCDSCOPE_TEST_HWM="+hwm)
	err := cmd.Run()
	st, rerr := os.ReadFile(hwm)
	if rerr != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, perr := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if perr != nil {
				t.Fatalf("VmHWM %q: %v", v, perr)
			}
			return kb << 10, err
		}
	}
	t.Fatalf("no VmHWM in the child's status")
	return 0, err
}

// TestReportPageStreamed: the page `report --html` draws from a streamed
// recording (report.Input.Report and Calls) is, but for its generation
// time, the page package report draws from the whole recording held
// (Fsyncs and Writes), for each golden recording.
func TestReportPageStreamed(t *testing.T) {
	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	for _, name := range []string{"ext4", "xfs", "btrfs", "ext4-stacked"} {
		rec := filepath.Join(goldenDir, name+".report.jsonl")
		f, err := os.Open(rec)
		if err != nil {
			t.Fatal(err)
		}
		recs, writes, sum, err := analysis.ReadJSONLWrites(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := report.Render(&want, report.Input{Title: filepath.Base(rec), Fsyncs: recs, Writes: writes, Summary: sum}); err != nil {
			t.Fatal(err)
		}
		page := filepath.Join(t.TempDir(), "page.html")
		reportOutput(t, "--html", page, rec)
		got, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		g, w := stamp.ReplaceAll(got, []byte("T")), stamp.ReplaceAll(want.Bytes(), []byte("T"))
		if !bytes.Equal(g, w) {
			t.Errorf("%s: the streamed page differs from the page of the whole recording:\n%s", name, golden.FirstDiff(g, w))
		}
	}
}
