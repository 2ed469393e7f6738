//go:build vmtest

package tracer

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHypervisorTracerOnVMKernel runs TestHypervisorTracerSyscalls's
// calls on the VM's kernel (its programs name files through the same
// fd lookup as the fsync programs, with the probe-read fallback on 5.10),
// in ext4 on a loop device: the guest's tmpfs takes no O_DIRECT before
// 6.6.
func TestHypervisorTracerOnVMKernel(t *testing.T) {
	img, err := os.CreateTemp("/tmp", "vm-hv-*.img")
	if err != nil {
		t.Fatal(err)
	}
	img.Truncate(64 << 20)
	img.Close()
	if out, err := exec.Command("mke2fs", "-q", "-F", "-t", "ext4", img.Name()).CombinedOutput(); err != nil {
		t.Fatalf("mke2fs: %v\n%s", err, out)
	}
	dev, detach, err := attachLoop(img.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	mnt := t.TempDir()
	if err := unix.Mount(dev, mnt, "ext4", 0, ""); err != nil {
		t.Fatalf("mount %s: %v", dev, err)
	}
	defer unix.Unmount(mnt, 0)
	hypervisorSyscalls(t, mnt)
}
