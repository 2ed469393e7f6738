package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/render"
)

// TestStackedLoop follows each flush down a stacked device: a filesystem
// on a loop device whose backing file lives on this machine's ext4. The
// loop driver turns every flush into an fsync of the backing file, traced
// through ext4's sync_file tracepoints. For every traced fsync the host
// fsyncs nest inside the guest flush they served, each level's split sums
// to its total, and the report has an upper and a backing row.
func TestStackedLoop(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tc := range []struct {
		name, fs   string
		mkfs       []string
		mountOpts  string
		prealloc   bool
		rawBlockIO bool
		args       []string // more fsync flags
	}{
		{name: "ext4-sparse", fs: "ext4", mkfs: []string{"-q", "-F"}},
		// A loop disk holds no kernel slot: the per-request records and
		// the host level stay (bench/findings.md 33).
		{name: "ext4-kernel-partition", fs: "ext4", mkfs: []string{"-q", "-F"}, args: []string{"--kernel-partition"}},
		{name: "ext4-fallocated", fs: "ext4", mkfs: []string{"-q", "-F"}, prealloc: true},
		{name: "xfs", fs: "xfs", mkfs: []string{"-q", "-f"}},
		{name: "btrfs", fs: "btrfs", mkfs: []string{"-q", "-f"}},
		{name: "btrfs-nodatacow", fs: "btrfs", mkfs: []string{"-q", "-f"}, mountOpts: "nodatacow"},
		{name: "raw", rawBlockIO: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := loopDevice(t, "/var/tmp", 512<<20)
			if tc.prealloc {
				backing := run(t, "losetup", "--noheadings", "--output", "BACK-FILE", dev)
				run(t, "fallocate", "-l", "512M", backing)
			}
			var recs []analysis.FsyncRecord
			var rep analysis.Report
			if tc.rawBlockIO {
				tr := startFsync(t, "--comm", "fio")
				out, err := exec.Command(testenv.LookPath(t, "fio", "fio"), "--name=raw", "--filename="+dev,
					"--rw=write", "--ioengine=sync", "--fdatasync=1", "--bs=4k", "--size=4m", "--output-format=json").CombinedOutput()
				if err != nil {
					t.Fatalf("fio: %v\n%s", err, out)
				}
				recs, rep = tr.stop()
			} else {
				mnt := mountStacked(t, dev, tc.fs, tc.mountOpts, tc.mkfs...)
				out, err := exec.Command(etcdscope(t), append([]string{"fsync", "--output", "json", "--interval", "0",
					"--workload", "wal", "--dir", mnt, "--duration", "3s"}, tc.args...)...).Output()
				if err != nil {
					t.Fatalf("etcdscope: %v", err)
				}
				recs, rep = parseOutput(t, out)
			}
			checkPartition(t, recs)
			kdev, _ := kernelDev(t, dev)
			ours := fmt.Sprintf("%d:%d", kdev>>20, kdev&(1<<20-1))
			var flushes, nested, fsyncs int
			for _, r := range recs {
				if len(r.Disks) != 1 || r.Disks[0] != ours {
					continue // another fio on this machine
				}
				fsyncs++
				for _, q := range r.Requests {
					if q.Role != analysis.RoleFlush || q.NotIssued || q.Dev != r.Disks[0] {
						continue
					}
					flushes++
					if len(q.Host) > 0 {
						nested++
					}
					for _, h := range q.Host {
						// A flush issued before the fsync began (for the
						// guest's own journal) still nests its host work;
						// the fsync counts only the part inside its window.
						if h.StartNs < q.IssueNs || h.EndNs > q.CompleteNs || h.EndNs > r.EndNs {
							t.Fatalf("host fsync [%d,%d] is not inside its flush [%d,%d] of fsync [%d,%d]",
								h.StartNs, h.EndNs, q.IssueNs, q.CompleteNs, r.StartNs, r.EndNs)
						}
						if h.Layers.Sum() != h.TotalNs {
							t.Fatalf("host layers %+v sum to %d, total %d", h.Layers, h.Layers.Sum(), h.TotalNs)
						}
						if h.Syscall != "vfs_fsync" || h.FS != "ext4" {
							t.Fatalf("host record %s on %s, want vfs_fsync on the host ext4", h.Syscall, h.FS)
						}
					}
				}
			}
			upper, backing := levelRows(rep)
			if upper == nil || backing == nil {
				t.Fatalf("report has no upper/backing rows: %+v", rep.Levels)
			}
			t.Logf("%s: %d fsyncs; %d of %d issued flushes nest a host fsync; upper %s/%s p50 %s ms p99 %s ms %.2f flushes/fsync; backing %s/%s p50 %s ms p99 %s ms %.2f flushes/fsync, %.0f%% of upper's device flush",
				tc.name, fsyncs, nested, flushes, upper.Device, upper.FS, render.Ms(upper.Total.P50), render.Ms(upper.Total.P99), upper.FlushesPerFsync,
				backing.Device, backing.FS, render.Ms(backing.Total.P50), render.Ms(backing.Total.P99), backing.FlushesPerFsync, 100*backing.NestedShare)
			// Every issued flush reaches the loop driver, which syncs the
			// backing file for it; allow the few in flight at the edges.
			if flushes == 0 || nested < flushes*95/100 {
				t.Fatalf("only %d of %d flushes nest a host fsync", nested, flushes)
			}
		})
	}
}

// mountStacked makes fstype on dev and mounts it with opts (may be "").
func mountStacked(t *testing.T, dev, fstype, opts string, mkfsArgs ...string) string {
	t.Helper()
	if opts == "" {
		return mountFS(t, dev, fstype, mkfsArgs...)
	}
	testenv.LookPath(t, "mkfs."+fstype, fstype+"-progs")
	run(t, "mkfs."+fstype, append(append([]string{}, mkfsArgs...), dev)...)
	mnt := t.TempDir()
	run(t, "mount", "-t", fstype, "-o", opts, dev, mnt)
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	if err := os.MkdirAll(filepath.Join(mnt, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	return mnt
}

// TestStackedLoopUntraced: a loop device whose backing file is on a
// filesystem whose fsyncs the host level cannot see (FUSE, through bindfs;
// XFS, which has no sync_file exit tracepoint) still has a level of its
// own in the report: a backing row that says it is not traced and why
// (analysis.UntracedBackingFS; the table words it), and
// each of its flush requests names the backing filesystem
// (host_untraced), instead of a report with the level silently left out.
func TestStackedLoopUntraced(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tc := range []struct{ name, wantFS string }{{"fuse", "fuse"}, {"xfs", "xfs"}} {
		t.Run(tc.name, func(t *testing.T) {
			var dir string
			switch tc.name {
			case "fuse":
				bindfs := testenv.LookPath(t, "bindfs", "bindfs")
				src, err := os.MkdirTemp("/var/tmp", "etcdscope-fuse-src-")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(src) })
				dir = t.TempDir()
				run(t, bindfs, src, dir)
				t.Cleanup(func() { exec.Command("umount", dir).Run() })
			case "xfs":
				dir = mountFS(t, loopDevice(t, "/var/tmp", 320<<20), "xfs", "-q", "-f")
			}
			dev := loopDevice(t, dir, 128<<20)
			mnt := mountFS(t, dev, "ext4", "-q", "-F")
			out, err := exec.Command(etcdscope(t), "fsync", "--output", "json", "--interval", "0",
				"--workload", "wal", "--dir", mnt, "--duration", "2s").Output()
			if err != nil {
				t.Fatalf("etcdscope: %v", err)
			}
			recs, rep := parseOutput(t, out)
			checkPartition(t, recs)
			kdev, _ := kernelDev(t, dev)
			ours := fmt.Sprintf("%d:%d", kdev>>20, kdev&(1<<20-1))
			var flushes, named int
			for _, r := range recs {
				for _, q := range r.Requests {
					if q.Role != analysis.RoleFlush || q.NotIssued || q.Dev != ours {
						continue
					}
					flushes++
					if len(q.Host) > 0 {
						t.Fatalf("flush on %s nests host fsyncs %+v: the host level on %s is not traceable", ours, q.Host, tc.wantFS)
					}
					if strings.HasPrefix(q.HostUntraced, tc.wantFS) {
						named++
					}
				}
			}
			var row *analysis.LevelRow
			for i := range rep.Levels {
				if rep.Levels[i].Level == analysis.LevelBacking && rep.Levels[i].Device == ours {
					row = &rep.Levels[i]
				}
			}
			t.Logf("%s: %d of %d flushes on %s name host_untraced; backing row %+v", tc.name, named, flushes, ours, row)
			if flushes == 0 || named != flushes {
				t.Errorf("%d of %d flushes on the loop device name the untraced %s host level", named, flushes, tc.wantFS)
			}
			if row == nil || !strings.HasPrefix(row.FS, tc.wantFS) || row.Untraced != analysis.UntracedBackingFS {
				t.Errorf("report levels %+v: want a backing row for %s on %s saying it is not traced", rep.Levels, ours, tc.wantFS)
			}
		})
	}
}

// levelRows returns the report's upper and backing rows (nil where absent).
func levelRows(rep analysis.Report) (upper, backing *analysis.LevelRow) {
	for i := range rep.Levels {
		switch rep.Levels[i].Level {
		case analysis.LevelUpper:
			upper = &rep.Levels[i]
		case analysis.LevelBacking:
			backing = &rep.Levels[i]
		}
	}
	return upper, backing
}
