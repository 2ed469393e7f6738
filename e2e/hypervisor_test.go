package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/merge"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/render"
)

// TestHypervisorMerge is the two-kernel test. On the host, `etcdscope
// hypervisor` traces every qemu-system-x86 process while the VM rig
// (vmtest/run.sh, Debian's 6.1 kernel under TCG) boots with drives
// prepared here with mkfs.ext4: a raw image (cache=none, aio=native) as
// vda, a qcow2 image (QEMU's default cache=writeback, aio=threads) as vdb,
// a raw image under cache=unsafe as vdc, and two loop block devices over
// the same filesystem, cache=none, aio=native (vdd) and aio=io_uring
// (vde). Inside, vmtest/guestfio runs fio's etcd job on each under the
// guest's `etcdscope fsync` and prints the recordings on the console.
// QEMU writes its own trace events to a file (qemuTraceEvents): the
// oracle. Checks: the hypervisor tracer finds each image's format, cache
// and aio mode; the merge matches ≥ 95% of guest fsyncs on each drive;
// every split sums to the guest fsync's wall time within 1%; against
// QEMU's trace (checkAgainstQEMU), every pair's host flush lies in a job
// of one QEMU flush request of the drive's virtqueue, that request inside
// the guest window under merge's clock within its stated error, and the
// host part no longer than QEMU spent; one line passes through QEMU's
// intervals of every drive (the clocks are linear); every two drives'
// fits agree within their stated errors (Clock.ErrorAt) and each drive's
// pairs nest under the others' clocks. It logs guest fsync and QEMU flush
// request p50/p99 for aio=native against aio=io_uring on the same backing.
// ETCDSCOPE_HV_KEEP=dir keeps the console, both recordings, QEMU's trace
// and the clock samples there; without it, a failed run keeps them in
// /var/tmp/etcdscope-hv-failed-*. TestHypervisorMergeReplay merges them
// again (ETCDSCOPE_HV_REPLAY=dir).
func TestHypervisorMerge(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.LookPath(t, "qemu-system-x86_64", "qemu-system-x86")
	qemuImg := testenv.LookPath(t, "qemu-img", "qemu-utils")
	mkfs := testenv.LookPath(t, "mkfs.ext4", "e2fsprogs")
	root := testenv.RepoRoot(t)
	// Not tmpfs: the raw image is opened with O_DIRECT.
	dir, err := os.MkdirTemp("/var/tmp", "etcdscope-hv-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	raw, qcow := filepath.Join(dir, "raw.img"), filepath.Join(dir, "q.qcow2")
	// A third drive under cache=unsafe: QEMU opens it as writeback and
	// drops the guest's flushes; only its command line says so.
	unsafe := filepath.Join(dir, "unsafe.img")
	scratch := filepath.Join(dir, "q.raw")
	for _, img := range []string{raw, scratch, unsafe} {
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, 128<<20); err != nil {
			t.Fatal(err)
		}
		run(t, mkfs, "-q", "-F", "-L", "esguestfio", img)
	}
	run(t, qemuImg, "convert", "-O", "qcow2", scratch, qcow)
	os.Remove(scratch)
	// Two block devices on the same backing (loop devices over files on
	// /var/tmp, the local model of an LVM volume), cache=none, one with
	// aio=native and one with aio=io_uring: what io_uring costs a guest
	// fsync there, measured side by side, and io_uring's flushes merged.
	var blockdevs [2]string
	for i := range blockdevs {
		img := filepath.Join(dir, fmt.Sprintf("blk%d.img", i))
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, 128<<20); err != nil {
			t.Fatal(err)
		}
		run(t, mkfs, "-q", "-F", "-L", "esguestfio", img)
		blockdevs[i] = loopDeviceOf(t, img)
	}
	nativeDev, uringDev := blockdevs[0], blockdevs[1]

	ready := filepath.Join(dir, "ready")
	var hostOut, hostErr bytes.Buffer
	hv := exec.Command(etcdscope(t), "hypervisor", "--comm", "qemu-system-x86", "--output", "json", "--ready-file", ready)
	hv.Stdout, hv.Stderr = &hostOut, &hostErr
	if err := hv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if hv.ProcessState == nil {
			hv.Process.Kill()
			hv.Wait()
		}
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcdscope hypervisor not ready after 20 s; stderr:\n%s", hostErr.String())
		}
	}

	// QEMU's own trace events (Debian builds the log backend: one line
	// per event, tid@realtime seconds.microseconds with -msg
	// timestamp=on): the oracle of the split's values.
	qtrace, qevents := filepath.Join(dir, "qemu.trace"), filepath.Join(dir, "qemu.events")
	if err := os.WriteFile(qevents, []byte(strings.Join(qemuTraceEvents, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clockBefore := sampleRealtimeMono()
	vm := exec.Command(filepath.Join(root, "vmtest", "run.sh"))
	vm.Dir = root
	// The VM's budget, and the guest test's inside it. Measured beside 4
	// CPU hogs (2026-12-07, 11 runs): passing runs 119-164 s in QEMU at
	// host load 8-12 (2m07s-5m03s with the build); three runs killed at
	// the 300 s this was, at load 18.7-22.5, two of them with 3 and 4 of
	// the 5 drives done (one drive's fio alone 82 s): ~400-450 s needed
	// there. 600 s, a third over that; the guest's own -test.timeout (6m
	// by default) raised past it.
	vm.Env = append(os.Environ(), "VMTEST_PKGS=./vmtest/guestfio", "VMTEST_TIMEOUT=600", "VMTEST_TEST_TIMEOUT=9m",
		"VMTEST_QEMU_ARGS=-msg timestamp=on -trace events="+qevents+",file="+qtrace,
		"VMTEST_DRIVES=file="+raw+",format=raw,if=virtio,cache=none,aio=native;file="+qcow+",format=qcow2,if=virtio;file="+unsafe+",format=raw,if=virtio,cache=unsafe"+
			";file="+nativeDev+",format=raw,if=virtio,cache=none,aio=native;file="+uringDev+",format=raw,if=virtio,cache=none,aio=io_uring")
	var console, vmErr bytes.Buffer
	vm.Stdout, vm.Stderr = &console, &vmErr
	start := time.Now()
	vmRunErr := vm.Run()
	t.Logf("VM run: %v (%v)", time.Since(start).Round(time.Second), vmRunErr)
	// The rig's own account (seconds in QEMU, host load at boot and end):
	// what VMTEST_TIMEOUT above is measured against.
	for _, l := range strings.Split(console.String()+vmErr.String(), "\n") {
		if strings.HasPrefix(l, "vmtest: kernel ") && strings.Contains(l, "s in QEMU") {
			t.Log(strings.TrimSpace(l))
		}
	}
	clockAfter := sampleRealtimeMono()
	hv.Process.Signal(syscall.SIGINT)
	if err := hv.Wait(); err != nil {
		t.Fatalf("etcdscope hypervisor: %v\n%s", err, hostErr.String())
	}
	if vmRunErr != nil {
		t.Fatalf("vmtest/run.sh: %v\n%s\n%s", vmRunErr, tail(console.String(), 60), tail(vmErr.String(), 20))
	}
	for _, l := range strings.Split(console.String(), "\n") {
		if strings.HasPrefix(l, "VMTEST kernel") || strings.Contains(l, "guestfio_test.go") {
			t.Log(strings.TrimSpace(l))
		}
	}
	guests := guestRecordings(t, console.String())
	// QEMU stamps realtime, the tracers monotonic: the two advance
	// together unless the clock is set or slewed, which the samples
	// around the run show. ε: QEMU's µs truncation, the samples' own
	// read gap, and the change between them.
	step := (clockAfter.MonoNs - clockAfter.RealNs) - (clockBefore.MonoNs - clockBefore.RealNs)
	if math.Abs(float64(step)) > 100e3 {
		t.Fatalf("CLOCK_REALTIME moved %d ns against CLOCK_MONOTONIC during the run (set or slewed): QEMU's trace cannot be placed", step)
	}
	eps := 2000 + int64(math.Abs(float64(step)))
	tf, err := os.Open(qtrace)
	if err != nil {
		t.Fatalf("QEMU's trace: %v", err)
	}
	qflushes, err := qemuTrace(tf, clockBefore, clockAfter)
	tf.Close()
	if err != nil {
		t.Fatalf("QEMU's trace %s: %v", qtrace, err)
	}
	t.Logf("QEMU's trace: %d virtio-blk flush requests; realtime moved %d ns against monotonic over the run, ε = %.1f µs", len(qflushes), step, float64(eps)/1e3)

	hostRaw := bytes.Clone(hostOut.Bytes())
	keepRun := func(keep string) {
		os.MkdirAll(keep, 0o755)
		os.WriteFile(filepath.Join(keep, "console.txt"), console.Bytes(), 0o644)
		os.WriteFile(filepath.Join(keep, "host.jsonl"), hostRaw, 0o644)
		if b, err := os.ReadFile(qtrace); err == nil {
			os.WriteFile(filepath.Join(keep, "qemu.trace"), b, 0o644)
		}
		cb, _ := json.Marshal(map[string]any{"before": clockBefore, "after": clockAfter,
			"images": map[string]string{"vda": raw, "vdb": qcow, "vdc": unsafe, "vdd": nativeDev, "vde": uringDev}})
		os.WriteFile(filepath.Join(keep, "clocks.json"), cb, 0o644)
	}
	if keep := os.Getenv("ETCDSCOPE_HV_KEEP"); keep != "" {
		keepRun(keep)
	} else {
		// A failure under load (a flake hunt) is kept to be replayed: the
		// merge is pure Go over these files (analysis/merge's
		// TestMergeIOUringUnderLoad is one such run). Before dir goes.
		defer func() {
			if !t.Failed() {
				return
			}
			if keep, err := os.MkdirTemp("/var/tmp", "etcdscope-hv-failed-"); err == nil {
				keepRun(keep)
				t.Logf("recordings kept in %s (console.txt, host.jsonl, qemu.trace, clocks.json)", keep)
			}
		}()
	}
	host, err := merge.ReadHost(&hostOut)
	if err != nil {
		t.Fatal(err)
	}
	// Other QEMUs may run on this machine: keep the one that opened our images.
	host = onlyQEMUOf(t, host, raw, qcow, unsafe, nativeDev, uringDev)
	images := merge.Images(host.IO, host.Fsyncs, func(p string) string {
		b := make([]byte, 4)
		f, err := os.Open(p)
		if err != nil {
			return ""
		}
		defer f.Close()
		f.Read(b)
		return merge.FormatFromMagic(b)
	}, nil)
	// From the open flags alone, unsafe looks like writeback.
	want := map[string][3]string{raw: {"raw", "none", "native"}, qcow: {"qcow2", "writeback", "threads"}, unsafe: {"raw", "writeback", "threads"},
		nativeDev: {"raw", "none", "native"}, uringDev: {"raw", "none", "io_uring"}}
	for _, im := range images {
		t.Logf("image %s: format %s cache=%s aio=%s, %d writes, %d io_submit, %d flushes, %d threads",
			im.Path, im.Format, im.Cache, im.AIO, im.Writes, im.IOSubmits, im.Flushes, im.Threads)
		if w, ok := want[im.Path]; ok {
			if got := [3]string{im.Format, im.Cache, im.AIO}; got != w {
				t.Errorf("%s: found format/cache/aio %v, QEMU was given %v", im.Path, got, w)
			}
			delete(want, im.Path)
		}
	}
	if len(want) > 0 {
		t.Errorf("the hypervisor recording shows no I/O on %v", want)
	}
	if host.Summary != nil && (host.Summary.LostEvents != 0 || host.Summary.FsyncLostEvents != 0) {
		t.Errorf("host tracer lost events: %d hypervisor, %d fsync", host.Summary.LostEvents, host.Summary.FsyncLostEvents)
	}

	// The recording's own summary read QEMU's command line: unsafe named
	// as such, with the durability warning, and no host flush of it.
	unsafeSeen := false
	if host.Summary == nil {
		t.Fatal("the hypervisor recording has no summary")
	}
	for _, im := range host.Summary.Images {
		if im.Path != unsafe {
			continue
		}
		unsafeSeen = true
		t.Logf("summary: %s cache=%s (from %s), %d writes, %d flushes", im.Path, im.Cache, im.CacheFrom, im.Writes, im.Flushes)
		if im.Cache != "unsafe" || im.CacheFrom != merge.CacheFromCommandLine || im.Flushes != 0 || im.Writes == 0 {
			t.Errorf("%s: cache=%s from %s, %d writes, %d flushes; want unsafe from the command line, written, never flushed", im.Path, im.Cache, im.CacheFrom, im.Writes, im.Flushes)
		}
	}
	if w := strings.Join(host.Summary.Warnings, "\n"); !unsafeSeen || !strings.Contains(w, unsafe+": cache=unsafe") || !strings.Contains(w, "durability: none") {
		t.Errorf("summary images %v; warnings %q: want %s named cache=unsafe with durability none", host.Summary.Images, w, unsafe)
	}

	clocks := map[string]merge.Clock{}
	results := map[string]merge.Result{}
	oracle := map[string]qemuOracleStats{}
	for _, tc := range []struct{ dev, image string }{{"vda", raw}, {"vdb", qcow}, {"vdd", nativeDev}, {"vde", uringDev}} {
		t.Run(tc.dev, func(t *testing.T) {
			recs, ok := guests[tc.dev]
			if !ok || len(recs) == 0 {
				t.Fatalf("no guest recording for %s on the console", tc.dev)
			}
			res, err := merge.Merge(recs, host, merge.Options{GuestDev: tc.dev, Image: tc.image})
			if err != nil {
				t.Fatal(err)
			}
			sum := merge.Summarize(res, images, tc.image)
			var tbl bytes.Buffer
			render.Merge(&tbl, &sum)
			t.Logf("%s ↔ %s:\n%s", tc.dev, tc.image, tbl.String())
			clocks[tc.dev] = res.Clock
			results[tc.dev] = res
			st := checkAgainstQEMU(t, tc.dev, res, qflushes, eps)
			oracle[tc.dev] = st
			j, q, r := stats.Summarize(st.JobMinusFdatasyncNs), stats.Summarize(st.RequestNs), stats.Summarize(st.RequestMinusHostNs)
			t.Logf("%s against QEMU's trace (virtqueue %s): %d of %d pairs in a QEMU flush request, %d outside their guest window by more than the clock's error + ε (closest: %.1f µs inside); "+
				"QEMU request p50 %s p99 %s ms; its host job less the paired host flush p50 %.1f p99 %.1f µs; request less merge's host part p50 %.1f p99 %.1f µs per fsync; "+
				"host_image_writes %.3f ms against QEMU's other jobs in those requests %.3f ms",
				tc.dev, st.VQ, st.Found, st.Pairs, st.ClockViolations, -float64(st.WorstClockExcessNs)/1e3,
				render.Ms(q.P50), render.Ms(q.P99), float64(j.P50)/1e3, float64(j.P99)/1e3, float64(r.P50)/1e3, float64(r.P99)/1e3,
				float64(st.ImageWritesNs)/1e6, float64(st.QEMUWritesBeforeNs)/1e6)
			// qcow2 writes its metadata back inside the flush window, before
			// the fdatasync: host I/O for the flush, counted apart.
			var imgNs int64
			withWrites := 0
			for _, f := range res.Fsyncs {
				imgNs += f.Split.HostImageWritesNs
				if f.Split.HostImageWritesNs > 0 {
					withWrites++
				}
			}
			t.Logf("%s: %d of %d guest fsyncs had image writes inside their flush windows, %.3f ms in all", tc.dev, withWrites, res.GuestFsyncs, float64(imgNs)/1e6)
			if tc.dev == "vdb" && withWrites == 0 {
				t.Errorf("qcow2: no metadata write inside any flush window (QEMU writes its L2/refcount caches back on flush)")
			}
			// 95%. Measured 2026-12-07 on 8 runs (7 beside 2-4 CPU hogs,
			// load 7-12; one idle), merged again by TestHypervisorMergeReplay:
			// with c05535e's merge 4 of 32 drives fell under it (vde 87.5%,
			// vdd 80.0%, vda 71.4%, vdd 30.8%: a widened window took its
			// neighbour's host flush, and the fit kept wrong pairs); with
			// 8a12501's, 31 of 32 at 100% (clock ±40.7-89.9 µs) and run 8's
			// vdd at 39.3% (tracking lost the clock in long windows: fixed in
			// e15e6e6, shown on a derived reproduction, analysis/merge
			// TestTrackKeepsClockInLongWindows); 3 live runs after, 12 of 12
			// drives at 100% (docs/testing.md).
			if frac := float64(res.Matched) / float64(res.GuestFsyncs); frac < 0.95 {
				t.Errorf("matched %d of %d guest fsyncs (%.1f%% < 95%%): %v", res.Matched, res.GuestFsyncs, 100*frac, res.Unmatched)
			}
			for _, f := range res.Fsyncs {
				if d := math.Abs(float64(f.Split.Sum() - f.TotalNs)); d > 0.01*float64(f.TotalNs) {
					t.Errorf("fsync at %d: split sums to %d ns, wall time %d ns", f.StartNs, f.Split.Sum(), f.TotalNs)
				}
			}
			// The CLI on the same recordings says the same.
			gPath, hPath := filepath.Join(dir, tc.dev+".guest.jsonl"), filepath.Join(dir, "host.jsonl")
			writeJSONL(t, gPath, recs)
			os.WriteFile(hPath, hostRaw, 0o644)
			out, err := exec.Command(etcdscope(t), "merge", "--guest", gPath, "--host", hPath, "--guest-dev", tc.dev,
				"--image", tc.image, "--output", "json").Output()
			if err != nil {
				t.Fatalf("etcdscope merge: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			var cli merge.Summary
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &cli); err != nil || cli.Type != "merge_summary" {
				t.Fatalf("etcdscope merge: last line %q: %v", lines[len(lines)-1], err)
			}
			if cli.Matched != res.Matched || cli.GuestFsyncs != res.GuestFsyncs || len(lines) != res.GuestFsyncs+1 {
				t.Errorf("etcdscope merge: %d of %d matched in %d lines; the library: %d of %d", cli.Matched, cli.GuestFsyncs, len(lines), res.Matched, res.GuestFsyncs)
			}
		})
	}
	// What aio=io_uring costs against aio=native on the same backing (two
	// block devices over one filesystem): guest fsync p50/p99 of each, and
	// the merge's warning on io_uring over a block device.
	if n, u := guests["vdd"], guests["vde"]; len(n) > 0 && len(u) > 0 {
		sn, su := fsyncStats(n), fsyncStats(u)
		t.Logf("guest fsync on a block device, cache=none: aio=native p50 %s p99 %s ms (%d); aio=io_uring p50 %s p99 %s ms (%d): io_uring/native p50 %.2fx, p99 %.2fx",
			render.Ms(sn.P50), render.Ms(sn.P99), sn.Count, render.Ms(su.P50), render.Ms(su.P99), su.Count,
			float64(su.P50)/float64(sn.P50), float64(su.P99)/float64(sn.P99))
		qn, qu := stats.Summarize(oracle["vdd"].RequestNs), stats.Summarize(oracle["vde"].RequestNs)
		t.Logf("QEMU's flush requests there (pop to completion): aio=native p50 %s p99 %s ms; aio=io_uring p50 %s p99 %s ms",
			render.Ms(qn.P50), render.Ms(qn.P99), render.Ms(qu.P50), render.Ms(qu.P99))
		if w := strings.Join(render.MergeWarnings(images), "\n"); !strings.Contains(w, uringDev+": aio=io_uring on a block device") {
			t.Errorf("no io_uring-over-block-device warning for %s: %q", uringDev, w)
		}
	} else {
		t.Errorf("no guest recordings for vdd/vde (%d, %d records)", len(n), len(u))
	}

	// vdc, cache=unsafe: every guest fsync unmatched by design, its device
	// time all virtualization; merge without --image refuses to guess.
	t.Run("vdc unsafe", func(t *testing.T) {
		recs := guests["vdc"]
		if len(recs) == 0 {
			t.Fatal("no guest recording for vdc on the console")
		}
		res, err := merge.Merge(recs, host, merge.Options{GuestDev: "vdc", Image: unsafe})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("vdc: %d guest fsyncs, %d guest flushes, unmatched %v, dropped by %s", res.GuestFsyncs, res.GuestFlushes, res.Unmatched, res.DroppedBy)
		if res.DroppedBy != unsafe || res.Matched != 0 || res.GuestFlushes == 0 || res.Unmatched[merge.ReasonHostDropsFlushes] == 0 {
			t.Errorf("vdc under cache=unsafe: dropped by %q, %d matched, %d guest flushes, unmatched %v", res.DroppedBy, res.Matched, res.GuestFlushes, res.Unmatched)
		}
		for _, f := range res.Fsyncs {
			if f.Split.HostNs() != 0 || f.Split.Sum() != f.TotalNs {
				t.Errorf("fsync at %d: host part %d ns of %d (split sums to %d)", f.StartNs, f.Split.HostNs(), f.TotalNs, f.Split.Sum())
			}
		}
		gPath, hPath := filepath.Join(dir, "vdc.guest.jsonl"), filepath.Join(dir, "host.jsonl")
		writeJSONL(t, gPath, recs)
		os.WriteFile(hPath, hostRaw, 0o644)
		out, err := exec.Command(etcdscope(t), "merge", "--guest", gPath, "--host", hPath, "--guest-dev", "vdc", "--image", unsafe).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "DURABILITY: none") {
			t.Errorf("etcdscope merge --image %s: %v\n%s", unsafe, err, out)
		}
		cmd := exec.Command(etcdscope(t), "merge", "--guest", gPath, "--host", hPath, "--guest-dev", "vdc")
		out, err = cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "pick the guest disk's image with --image") {
			t.Errorf("etcdscope merge without --image: exit %d (%v), want 2 naming --image:\n%s", cmd.ProcessState.ExitCode(), err, out)
		}
	})

	// One guest, one host: every two drives' fits must agree within their
	// stated errors (ErrorAt: the guest flushes its drives one after the
	// other, so each fit is extrapolated over the other's span), and each
	// drive's pairs must nest inside their guest windows under the clock
	// fitted on another drive alone.
	devs := []string{"vda", "vdb", "vdd", "vde"}
	for _, dev := range devs {
		for _, other := range devs {
			oc, res := clocks[other], results[dev]
			if other == dev || oc.Pairs == 0 {
				continue
			}
			inside, pairs, apart := 0, 0, 0
			var worstDiff, worstErr float64
			for _, f := range res.Fsyncs {
				for _, p := range f.Pairs {
					pairs++
					off, e := oc.Offset(p.GuestIssueNs), oc.ErrorAt(p.GuestIssueNs)
					s, end := int64(p.Host[0].StartNs)-off, int64(p.Host[len(p.Host)-1].EndNs)-off
					if s >= int64(p.GuestIssueNs)-e && end <= int64(p.GuestCompleteNs)+e {
						inside++
					}
					// The two fits at this pair.
					d := math.Abs(float64(off - res.Clock.Offset(p.GuestIssueNs)))
					allow := float64(e + res.Clock.ErrorAt(p.GuestIssueNs))
					if d > allow {
						apart++
					}
					if d-allow > worstDiff-worstErr || pairs == 1 {
						worstDiff, worstErr = d, allow
					}
				}
			}
			t.Logf("%s's pairs under %s's clock: %d of %d nest in their guest windows within its error there; the two fits differ by %.1f µs where closest to their errors (±%.1f µs together)",
				dev, other, inside, pairs, worstDiff/1e3, worstErr/1e3)
			// The pairs the drive's own fit left out (no line fits them) may
			// fail to nest under another's too; every other pair must.
			if left := pairs - res.Clock.Pairs; pairs == 0 || inside < pairs-max(left, 0) {
				t.Errorf("%s: only %d of %d host flushes nest under %s's clock within its stated error (%d left out of %s's own fit)", dev, inside, pairs, other, left, dev)
			}
			if apart > 0 {
				t.Errorf("%s and %s: the fits differ by more than their stated errors at %d of %d pairs (by %.1f µs against ±%.1f µs)", dev, other, apart, pairs, worstDiff/1e3, worstErr/1e3)
			}
		}
	}
	// The oracle's own clock: one line through QEMU's intervals of every
	// drive's pairs (3640 in a run). If one fits, the clocks are linear
	// over the whole run, as merge assumes; each drive's fit is then
	// compared with it over the drive's own pairs.
	var ivs []offsetInterval
	for _, dev := range devs {
		ivs = append(ivs, oracle[dev].Intervals...)
	}
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].G < ivs[j].G })
	if len(ivs) == 0 {
		t.Fatal("no pair of any drive found in QEMU's trace")
	}
	qa, qb, qgap := qemuLine(ivs)
	t.Logf("QEMU's clock over all %d pairs: drift %+.2f ppm, %s", len(ivs), qb, map[bool]string{true: fmt.Sprintf("every interval holds it (band %.1f µs wide)", -qgap/1e3),
		false: fmt.Sprintf("misses by %.1f µs", qgap/1e3)}[qgap <= 0])
	if qgap > float64(2*eps) {
		t.Errorf("no line passes through QEMU's intervals of all drives (misses by %.1f µs): the guest and host clocks are not linear over the run", qgap/1e3)
	}
	for _, dev := range devs {
		var worst float64
		for _, iv := range oracle[dev].Intervals {
			q := qa + qb*1e-6*float64(int64(iv.G-ivs[0].G))
			worst = math.Max(worst, math.Abs(float64(clocks[dev].Offset(iv.G))-q))
		}
		t.Logf("%s's fit (drift %+.2f ±%.2f ppm, error ±%.1f µs) lies within %.1f µs of QEMU's clock at its pairs", dev, clocks[dev].DriftPPM, clocks[dev].DriftErrorPPM,
			float64(clocks[dev].ErrorNs)/1e3, worst/1e3)
	}
}

// guestRecordings extracts the guest JSON Lines the guest test printed
// between ETCDSCOPE-GUEST-BEGIN/END markers, by device.
func guestRecordings(t *testing.T, console string) map[string][]analysis.FsyncRecord {
	t.Helper()
	out := map[string][]analysis.FsyncRecord{}
	sc := bufio.NewScanner(strings.NewReader(console))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	dev := ""
	var buf bytes.Buffer
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, "ETCDSCOPE-GUEST-BEGIN dev="):
			dev = strings.TrimPrefix(line, "ETCDSCOPE-GUEST-BEGIN dev=")
			buf.Reset()
		case strings.HasPrefix(line, "ETCDSCOPE-GUEST-END"):
			recs, _, err := analysis.ReadJSONL(&buf)
			if err != nil {
				t.Fatalf("guest recording of %s: %v", dev, err)
			}
			var want int
			fmt.Sscanf(line[strings.Index(line, "records="):], "records=%d", &want)
			t.Logf("guest %s: %d fsync records (%s)", dev, len(recs), line)
			out[dev] = recs
			dev = ""
		case dev != "":
			buf.WriteString(line)
			buf.WriteByte('\n')
		}
	}
	return out
}

// onlyQEMUOf keeps the records of the process that did I/O on images.
func onlyQEMUOf(t *testing.T, h merge.HostRecording, images ...string) merge.HostRecording {
	t.Helper()
	pids := map[uint32]bool{}
	for _, io := range h.IO {
		for _, im := range images {
			if io.Path == im {
				pids[io.PID] = true
			}
		}
	}
	if len(pids) != 1 {
		t.Fatalf("want one QEMU process doing I/O on %v, found pids %v", images, pids)
	}
	var out merge.HostRecording
	out.Header, out.Summary = h.Header, h.Summary
	for _, io := range h.IO {
		if pids[io.PID] {
			out.IO = append(out.IO, io)
		}
	}
	for _, f := range h.Fsyncs {
		if pids[f.PID] {
			out.Fsyncs = append(out.Fsyncs, f)
		}
	}
	return out
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestHypervisorMergeBadInput: bad flags exit 2 naming the fix, before
// anything is traced.
func TestHypervisorMergeBadInput(t *testing.T) {
	dir := t.TempDir()
	guest := filepath.Join(dir, "g.jsonl")
	os.WriteFile(guest, []byte(`{"type":"fsync","v":1}`+"\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"hypervisor"}, "--pid"},
		{[]string{"hypervisor", "--pid", "-3"}, "not a process id"},
		{[]string{"hypervisor", "--comm", "qemu-system-x86_64"}, "15-byte"},
		{[]string{"hypervisor", "--pid", "1", "--output", "yaml"}, "table or json"},
		{[]string{"merge", "--guest", guest}, "--host"},
		{[]string{"merge", "--guest", guest, "--host", guest}, "not a hypervisor recording"},
		{[]string{"merge", "--guest", guest, "--host", filepath.Join(dir, "none")}, "no such file"},
	} {
		cmd := exec.Command(etcdscope(t), tc.args...)
		out, err := cmd.CombinedOutput()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("etcdscope %v: exit %d, %q; want exit 2 naming %q", tc.args, code, out, tc.want)
		}
	}
}

func writeJSONL(t *testing.T, path string, recs []analysis.FsyncRecord) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for i := range recs {
		enc.Encode(&recs[i])
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fsyncStats summarises the wall time of guest fsync records.
func fsyncStats(recs []analysis.FsyncRecord) stats.Summary {
	var ns []int64
	for _, r := range recs {
		ns = append(ns, r.TotalNs)
	}
	return stats.Summarize(ns)
}
