package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/internal/cpulimit"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestFindStaleLoops: on a sysfs and a mountinfo written here, the loop
// devices left by starved runs whose benchrun is gone are found with their
// mounts (an escaped space undone); a live run's, another file's and a
// name without a pid are left alone.
func TestFindStaleLoops(t *testing.T) {
	sys := t.TempDir()
	const parent = "/var/tmp"
	for dev, backing := range map[string]string{
		"loop0": "/var/tmp/etcdscope-bench-starved-111-5830/disk.img",
		"loop1": "/var/tmp/etcdscope-bench-starved-222-9911/disk.img", // benchrun 222 runs
		"loop2": "/home/u/disk.img",
		"loop3": "/var/tmp/etcdscope-bench-starved-333-0042/disk.img (deleted)",
		"loop4": "/var/tmp/etcdscope-bench-starved-4711/disk.img", // the old name, no pid
	} {
		d := filepath.Join(sys, dev, "loop")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "backing_file"), []byte(backing+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(sys, "loop5"), 0o755) // a free loop device: no loop/backing_file
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(mountinfo, []byte(strings.Join([]string{
		"22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw",
		"97 22 7:0 / /var/tmp/etcdscope-bench-starved-111-5830/mnt rw,relatime shared:50 - ext4 /dev/loop0 rw",
		`98 22 7:0 / /var/tmp/a\040b rw,relatime shared:51 - ext4 /dev/loop0 rw`,
		"99 22 7:1 / /var/tmp/etcdscope-bench-starved-222-9911/mnt rw,relatime shared:52 - ext4 /dev/loop1 rw",
		"100 22 7:2 / /mnt/u rw,relatime shared:53 - ext4 /dev/loop2 rw",
	}, "\n")+"\n"), 0o644)
	stale, err := findStaleLoops(sys, mountinfo, parent, func(pid int) bool { return pid == 222 })
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(stale, func(a, b staleLoop) int { return strings.Compare(a.dev, b.dev) })
	got := fmt.Sprint(stale)
	want := fmt.Sprint([]staleLoop{
		{dev: "/dev/loop0", backing: "/var/tmp/etcdscope-bench-starved-111-5830/disk.img",
			mounts: []string{"/var/tmp/etcdscope-bench-starved-111-5830/mnt", "/var/tmp/a b"}},
		{dev: "/dev/loop3", backing: "/var/tmp/etcdscope-bench-starved-333-0042/disk.img"},
	})
	if got != want {
		t.Errorf("stale loops\n got %s\nwant %s", got, want)
	}
}

// loopBacked reports whether loop device dev (/dev/loopN) has a backing
// file, as sysfs says.
func loopBacked(t *testing.T, dev string) bool {
	_, err := os.Stat(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// mounted reports whether mnt is a mount point, as the kernel's mount
// table says.
func mounted(t *testing.T, mnt string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == mnt {
			return true
		}
	}
	return false
}

// TestLoopFSInterrupt: the starved run's loop filesystem, set up for real
// (losetup, mkfs.ext4, mount), is unmounted, detached and its scratch
// directory removed by killChildren, what the SIGINT/SIGTERM handler runs,
// as the kernel's mount table and sysfs show; a second undo does nothing.
func TestLoopFSInterrupt(t *testing.T) {
	testenv.RequireRoot(t)
	dir, err := mkScratch("/var/tmp", fmt.Sprintf("%s%d-", starvedScratchPrefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer dropScratch(dir)
	fs, err := newLoopFS(dir, 64<<20, "ext4")
	if err != nil {
		t.Fatal(err)
	}
	defer fs.close()
	dev := fs.dev
	if !mounted(t, fs.mnt) || !loopBacked(t, dev) {
		t.Fatalf("%s on %s: mounted %v, backed %v", dev, fs.mnt, mounted(t, fs.mnt), loopBacked(t, dev))
	}
	killChildren()
	if mounted(t, fs.mnt) || loopBacked(t, dev) {
		t.Errorf("after the interrupt: %s still mounted %v, %s still backed %v", fs.mnt, mounted(t, fs.mnt), dev, loopBacked(t, dev))
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("scratch %s after the interrupt: %v", dir, err)
	}
	if err := fs.remove(); err != nil {
		t.Errorf("a second remove: %v", err)
	}
}

// TestRemoveStaleLoops: what a SIGKILLed run left (its loop device over
// an image in its scratch directory, mounted, made here with losetup and
// mount as the run makes them, under the pid of a process that has ended)
// is unmounted, detached and removed at the next start; the scratch
// directory of a run still running (this test's pid) is left alone.
func TestRemoveStaleLoops(t *testing.T) {
	testenv.RequireRoot(t)
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, fmt.Sprintf("%s%d-1", starvedScratchPrefix, ended.Process.Pid))
	mine := filepath.Join(parent, fmt.Sprintf("%s%d-2", starvedScratchPrefix, os.Getpid()))
	mnt := filepath.Join(dir, "mnt")
	for _, d := range []string{mnt, mine} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		t.Fatal(err)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("umount", mnt).Run(); exec.Command("losetup", "-d", dev).Run() })
	for _, c := range [][]string{{"mkfs.ext4", "-q", "-F", dev}, {"mount", dev, mnt}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	gone, err := removeStaleLoops("/sys/block", "/proc/self/mountinfo", parent, pidAlive)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("removed: %v", gone)
	if mounted(t, mnt) || loopBacked(t, dev) {
		t.Errorf("%s still mounted %v, %s still backed %v", mnt, mounted(t, mnt), dev, loopBacked(t, dev))
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed run's scratch %s: %v", dir, err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("a running run's scratch %s: %v", mine, err)
	}
	if !slices.Contains(gone, dev+" ("+img+")") || !slices.Contains(gone, dir) {
		t.Errorf("removed %v, want %s and %s named", gone, dev, dir)
	}
}

// TestRemoveStaleCgroups: the cgroup of a SIGKILLed run (made here with
// cpulimit.Make, as the run makes it, under the pid of a process that has
// ended) is removed at the next start, as cgroupfs shows; one of a run
// still running (this test's pid) stays.
func TestRemoveStaleCgroups(t *testing.T) {
	testenv.RequireRoot(t)
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	dead, _, err := cpulimit.Make(fmt.Sprintf("%s%d", starvedCgroupPrefix, ended.Process.Pid), starvedQuotaUs, starvedPeriodUs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dead) })
	mine, removeMine, err := cpulimit.Make(fmt.Sprintf("%s%d", starvedCgroupPrefix, os.Getpid()), starvedQuotaUs, starvedPeriodUs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(removeMine)
	gone, err := removeStaleCgroups([]string{filepath.Dir(dead)}, pidAlive)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) || !slices.Contains(gone, dead) {
		t.Errorf("the killed run's cgroup %s: %v (removed %v)", dead, err, gone)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("a running run's cgroup %s: %v", mine, err)
	}
}
