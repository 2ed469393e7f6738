package e2e

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdscope/etcdscope/analysis/merge"
)

// TestHypervisorMergeReplay merges again the recordings a TestHypervisorMerge
// run kept (ETCDSCOPE_HV_REPLAY=dir: ETCDSCOPE_HV_KEEP's, or the
// /var/tmp/etcdscope-hv-failed-* dir a failed run leaves) with this tree's
// merge, and checks each drive against QEMU's trace as the live test does:
// a change to analysis/merge measured on real runs, without root or a VM
// (the vde io_uring flake of 2026-12-06 was found and mended this way).
func TestHypervisorMergeReplay(t *testing.T) {
	dir := os.Getenv("ETCDSCOPE_HV_REPLAY")
	if dir == "" {
		t.Skip("SKIPPED: set ETCDSCOPE_HV_REPLAY to a kept TestHypervisorMerge run")
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var run struct {
		Before, After clockSample
		Images        map[string]string
	}
	if err := json.Unmarshal(read("clocks.json"), &run); err != nil {
		t.Fatal(err)
	}
	guests := guestRecordings(t, string(read("console.txt")))
	host, err := merge.ReadHost(bytes.NewReader(read("host.jsonl")))
	if err != nil {
		t.Fatal(err)
	}
	step := (run.After.MonoNs - run.After.RealNs) - (run.Before.MonoNs - run.Before.RealNs)
	eps := 2000 + int64(math.Abs(float64(step)))
	qf, err := qemuTrace(bytes.NewReader(read("qemu.trace")), run.Before, run.After)
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"vda", "vdb", "vdd", "vde"} {
		t.Run(dev, func(t *testing.T) {
			res, err := merge.Merge(guests[dev], host, merge.Options{GuestDev: dev, Image: run.Images[dev]})
			if err != nil {
				t.Fatal(err)
			}
			c, st := res.Clock, checkAgainstQEMU(t, dev, res, qf, eps)
			frac := float64(res.Matched) / float64(res.GuestFsyncs)
			t.Logf("%s: matched %d of %d guest fsyncs (%.1f%%), guest flushes %d of %d, host flushes %d of %d; clock drift %+.2f ±%.2f ppm, error ±%.1f µs, consistent %v, %d pairs; %d of %d pairs in a QEMU flush request",
				dev, res.Matched, res.GuestFsyncs, 100*frac, res.GuestFlushesMatched, res.GuestFlushes, res.HostFlushesMatched, res.HostFlushes,
				c.DriftPPM, c.DriftErrorPPM, float64(c.ErrorNs)/1e3, c.Consistent, c.Pairs, st.Found, st.Pairs)
			if frac < 0.95 {
				t.Errorf("matched %d of %d guest fsyncs (%.1f%% < 95%%): %v", res.Matched, res.GuestFsyncs, 100*frac, res.Unmatched)
			}
		})
	}
}
