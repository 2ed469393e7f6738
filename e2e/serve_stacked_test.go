package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// loopFlushes reads the flush requests a disk completed from its
// /sys/block/NAME/stat (Documentation/block/stat.rst: field 16, flush
// I/Os): for a loop device, each is one vfs_fsync of the backing file.
func loopFlushes(t *testing.T, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/sys/block/" + name + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 16 {
		testenv.Missing(t, fmt.Sprintf("/sys/block/%s/stat has no flush fields (kernel older than 5.5)", name))
	}
	n, err := strconv.ParseUint(f[15], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func sumHist(f *dto.MetricFamily, match map[string]string) (count uint64, sum float64) {
	for _, m := range f.GetMetric() {
		if labelsMatch(m, match) {
			count += m.GetHistogram().GetSampleCount()
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return count, sum
}

// TestServeStackedLevels: serve exports the stacked levels of ext4 on a
// loop device. fdatasyncs on the loop filesystem make the loop driver
// fsync its backing file once per flush request; the upper series must count
// the calls whose flushes nested such fsyncs (at most the calls made, and
// most of them: every journalled fdatasync flushes), the backing series the
// nested host fsyncs, which cannot exceed the flush requests the loop
// device itself counted (/sys/block/loopN/stat, the kernel's oracle) and
// are at least one per upper call; backing time is part of upper's
// device-flush time.
func TestServeStackedLevels(t *testing.T) {
	testenv.RequireRoot(t)
	dev := loopDevice(t, "/var/tmp", 256<<20)
	mnt := mountFS(t, dev, "ext4", "-q", "-F")
	loop := filepath.Base(dev)

	s := startServe(t, "--pid", strconv.Itoa(os.Getpid()))
	f, err := os.Create(filepath.Join(mnt, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flushes0 := loopFlushes(t, loop)
	const calls = 200
	buf := make([]byte, 2300)
	for i := 0; i < calls; i++ {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			t.Fatal(err)
		}
	}
	flushes := loopFlushes(t, loop) - flushes0
	upper := map[string]string{"level": analysis.LevelUpper, "device": loop, "fs": "ext4"}
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams = s.scrape(t)
		if histCount(fams["etcdscope_fsync_duration_seconds"], map[string]string{"device": loop}) >= calls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fdatasync count on %s did not reach %d in 10 s; stderr:\n%s", loop, calls, s.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	st := fams["etcdscope_stacked_fsync_duration_seconds"]
	if st == nil {
		t.Fatalf("no etcdscope_stacked_fsync_duration_seconds after %d fdatasyncs on ext4 over %s; stderr:\n%s", calls, loop, s.stderr.String())
	}
	n1, _ := sumHist(st, upper)
	n2, sum2 := sumHist(st, map[string]string{"level": analysis.LevelBacking})
	var backingDev string
	for _, m := range st.GetMetric() {
		if l := labelsOf(m); l["level"] == analysis.LevelBacking {
			backingDev = l["device"] + " " + l["fs"]
		}
	}
	var nestIn float64
	for _, m := range fams["etcdscope_stacked_nesting_device_flush_seconds_total"].GetMetric() {
		nestIn += m.GetCounter().GetValue()
	}
	var upperFlush float64
	for _, m := range fams["etcdscope_stacked_layer_seconds_total"].GetMetric() {
		if l := labelsOf(m); l["level"] == analysis.LevelUpper && l["layer"] == "device_flush" {
			upperFlush += m.GetCounter().GetValue()
		}
	}
	t.Logf("%d fdatasyncs; %s counted %d flush requests; upper %s/ext4: %d calls; backing %s: %d fsyncs, %.6f s, in %.6f s of upper device flush",
		calls, loop, flushes, loop, n1, backingDev, n2, sum2, nestIn)
	if n1 < calls/2 || n1 > calls {
		t.Errorf("upper counted %d calls with nested backing fsyncs, want most of the %d made", n1, calls)
	}
	if n2 < n1 || n2 > flushes {
		t.Errorf("backing counted %d fsyncs, want between the %d upper calls and the %d flushes %s completed", n2, n1, flushes, loop)
	}
	if nestIn <= 0 || sum2 > nestIn*1.000001 || nestIn > upperFlush*1.000001 {
		t.Errorf("backing time %.6f s, nesting device flush %.6f s, upper device flush %.6f s: want 0 < backing <= nesting <= upper", sum2, nestIn, upperFlush)
	}
	for _, m := range fams["etcdscope_lost_events_total"].GetMetric() {
		if v := m.GetCounter().GetValue(); v != 0 {
			t.Logf("lost events %v for %v (counts above may be short)", v, labelsOf(m))
		}
	}
}
