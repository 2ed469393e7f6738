package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/report"
)

// writeMinimalFsyncs writes n minimal fsync records, the pid of call i
// pid(i): what a hostile recording is made of (no requests, no path).
func writeMinimalFsyncs(t *testing.T, n int, pid func(i int) int) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "rec.jsonl")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range n {
		p := pid(i)
		fmt.Fprintf(w, `{"type":"fsync","v":1,"start_ns":%d,"end_ns":%d,"total_ns":1000,"pid":%d,"tid":%d,"comm":"x","syscall":"fsync","ret":0,"dev":"8:0","fs":"ext4","file_kind":"other","layers":{"other_ns":1000}}`+"\n",
			i*10_000, i*10_000+1000, p, p)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return name
}

// reportGroupsBoundBytes bounds the peak RSS of `etcdscope report` (table,
// --output json) of a recording of 50,000 one-call pids: the report keeps
// analysis.MaxGroups groups apart and folds the rest into one. Measured
// (this test binary as etcdscope, 2026-12-06, 2 cores shared with other
// agents): 3 runs × 2 outputs, 30-36 MiB, worst 36 MiB: a 44% margin.
// Before, every group was held and printed: 411 MiB table, 439 MiB JSON
// (etcdscope binary, one run each).
const reportGroupsBoundBytes = 64 << 20

// reportGroupsPageBoundBytes bounds the same recording's page (--html):
// 32 groups and other drawn. Measured as above: 3 runs, 84-88 MiB, worst
// 88 MiB, a 31% margin. Before: 766 MiB and a 196 MB page.
const reportGroupsPageBoundBytes = 128 << 20

// reportPageCallsBoundBytes bounds the page of 600,000 minimal calls in
// one group: past report.MaxPageCalls the page draws a sample. Measured
// as above: 3 runs, 77-85 MiB, worst 85 MiB: a 34% margin. Before, every
// call was held (~365 bytes each): 1.3 M calls 458 MiB.
const reportPageCallsBoundBytes = 128 << 20

// TestReportGroupsMemoryBounded: `report` of a recording any local user
// can make, 50,000 processes that fsync once each, prints MaxGroups groups
// and other, counting the 49,968 folded, every call counted, in bounded
// peak RSS (the child's VmHWM); and a page of 600,000 calls draws a
// sample and says so.
func TestReportGroupsMemoryBounded(t *testing.T) {
	const pids = 50_000
	rec := writeMinimalFsyncs(t, pids, func(i int) int { return 10_000 + i })
	page := filepath.Join(t.TempDir(), "page.html")
	folded := pids - analysis.MaxGroups
	for _, c := range []struct {
		args  []string
		want  string
		bound int64
	}{
		{[]string{"report", rec}, fmt.Sprintf("other (%d groups folded", folded), reportGroupsBoundBytes},
		{[]string{"report", "--output", "json", rec}, fmt.Sprintf(`"folded_groups":%d`, folded), reportGroupsBoundBytes},
		{[]string{"report", "--html", page, rec}, fmt.Sprintf("other (%d groups folded", folded), reportGroupsPageBoundBytes},
	} {
		out := runBounded(t, c.args, page, c.bound)
		if !strings.Contains(out, c.want) {
			t.Errorf("etcdscope %v: no %q in\n%.300s", c.args, c.want, out)
		}
	}
	const calls = 600_000
	rec = writeMinimalFsyncs(t, calls, func(int) int { return 1 })
	out := runBounded(t, []string{"report", "--html", page, rec}, page, reportPageCallsBoundBytes)
	want := fmt.Sprintf("a uniform sample of %d of the %d calls", report.MaxPageCalls, calls)
	if !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("%d fsync/fdatasync calls", calls)) {
		t.Errorf("the page of %d calls does not say %q or count them all", calls, want)
	}
}

// runBounded runs etcdscope args (this test binary) and fails the test if
// it fails or its peak RSS passes bound; it returns stdout, or the page
// when args write one.
func runBounded(t *testing.T, args []string, page string, bound int64) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	rss, err := childPeakRSS(t, cmd)
	if rss == 0 {
		t.Fatalf("etcdscope %v wrote no status: %v\n%s", args, err, stderr.String())
	}
	t.Logf("%v: %.1f s, peak RSS %d MiB", args[:len(args)-1], time.Since(start).Seconds(), rss>>20)
	if err != nil {
		t.Fatalf("etcdscope %v: %v\n%s", args, err, stderr.String())
	}
	if rss > bound {
		t.Errorf("etcdscope %v: peak RSS %d MiB, bound %d MiB", args, rss>>20, bound>>20)
	}
	if args[1] == "--html" {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return stdout.String()
}
