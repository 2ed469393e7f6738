package merge

import (
	"bufio"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestParseQEMUCmdlineLibvirt reads a real libvirt command line with a
// cache="unsafe" disk (testdata/qemu-libvirt-unsafe.cmdline, its source in
// its header): the partition is unsafe, the firmware files writeback.
func TestParseQEMUCmdlineLibvirt(t *testing.T) {
	f, err := os.Open("testdata/qemu-libvirt-unsafe.cmdline")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var argv []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			argv = append(argv, l)
		}
	}
	got := ParseQEMUCmdline(argv, "/var/lib/libvirt/qemu")
	want := []DriveCache{
		{Path: "/usr/share/OVMF/OVMF_CODE.fd", Cache: "writeback"},
		{Path: "/var/lib/libvirt/qemu/nvram/win10_VARS.fd", Cache: "writeback"},
		{Path: "/dev/disk/by-partuuid/05c3750b-060f-4703-95ea-6f5e546bf6e9", Cache: "unsafe"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestParseQEMUCmdlineForms(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		want []DriveCache
	}{
		{"-drive cache=unsafe, comma escaped", []string{"qemu", "-drive", "file=/v/a,,b.img,format=raw,if=virtio,cache=unsafe"},
			[]DriveCache{{"/v/a,b.img", "unsafe"}}},
		{"relative file, default mode", []string{"qemu", "--drive", "file=img/q.qcow2,if=virtio"},
			[]DriveCache{{"/srv/vm/img/q.qcow2", "writeback"}}},
		{"cache=none and directsync", []string{"qemu", "-drive", "file=/a,cache=none", "-drive", "file=/b,cache=directsync"},
			[]DriveCache{{"/a", "none"}, {"/b", "directsync"}}},
		{"dotted cache options", []string{"qemu", "-drive", "file=/a,cache.direct=on,cache.no-flush=off", "-drive", "file=/b,cache=writeback,cache.no-flush=on"},
			[]DriveCache{{"/a", "none"}, {"/b", "unsafe"}}},
		{"-blockdev key=value, no-flush on the format node", []string{"qemu",
			"-blockdev", "driver=file,filename=/v/b.raw,node-name=f0",
			"-blockdev", "driver=qcow2,node-name=q0,file=f0,cache.no-flush=on"},
			[]DriveCache{{"/v/b.raw", "unsafe"}}},
		{"-blockdev inline protocol node", []string{"qemu", "-blockdev", "driver=raw,node-name=r,file.driver=file,file.filename=/v/c.raw,cache.direct=on"},
			[]DriveCache{{"/v/c.raw", "none"}}},
		{"network and empty drives skipped", []string{"qemu", "-drive", "file=nbd://host:10809/x,if=virtio", "-drive", "if=none,id=cd0", "-drive"},
			nil},
		{"broken JSON ignored", []string{"qemu", "-blockdev", `{"driver":"file","filename":`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseQEMUCmdline(tc.argv, "/srv/vm"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestMergeUnsafeImage: the host wrote the guest's image and never
// flushed it while the guest flushed: every guest fsync is unmatched by
// design (host_drops_flushes), no clock is fitted and the summary says
// durability none; the image's cache=unsafe from the command line is
// warned about. An image the host never touched is still an error.
func TestMergeUnsafeImage(t *testing.T) {
	guest, _, _ := synth{n: 20, offsetNs: 1e9, jitter: true}.build(t)
	host := HostRecording{IO: []HostIO{
		{Op: "pwritev", Path: "/v/unsafe.qcow2", FS: "ext4", TID: 4, Ret: 4096, StartNs: 1, EndNs: 2},
		{Op: "pwritev", Path: "/v/unsafe.qcow2", FS: "ext4", TID: 5, Ret: 4096, StartNs: 3, EndNs: 4},
	}}
	res, err := Merge(guest, host, Options{Image: "/v/unsafe.qcow2"})
	if err != nil {
		t.Fatal(err)
	}
	if res.DroppedBy != "/v/unsafe.qcow2" || res.Matched != 0 || res.Unmatched[ReasonHostDropsFlushes] != 20 || res.GuestFlushes != 40 {
		t.Errorf("dropped by %q, matched %d, unmatched %v, guest flushes %d", res.DroppedBy, res.Matched, res.Unmatched, res.GuestFlushes)
	}
	// Nothing reached the host: the guest's device flush time is all
	// virtualization.
	for i, f := range res.Fsyncs {
		if f.Split.Sum() != f.TotalNs || f.Split.HostNs() != 0 || f.Split.VirtualizationNs != guest[i].Layers.DeviceFlushNs {
			t.Errorf("fsync at %d: split %+v sums to %d of %d", f.StartNs, f.Split, f.Split.Sum(), f.TotalNs)
		}
	}
	images := Images(host.IO, nil, nil, nil)
	ApplyDriveCaches(images, []DriveCache{{Path: "/v/unsafe.qcow2", Cache: "unsafe"}})
	sum := Summarize(res, images, "/v/unsafe.qcow2")
	if w := Warnings(sum.Images); sum.DroppedBy != "/v/unsafe.qcow2" || len(w) != 1 || w[0].Kind != WarnCacheUnsafe {
		t.Errorf("dropped by %q, warnings %+v", sum.DroppedBy, w)
	}
	if images[0].CacheFrom != CacheFromCommandLine {
		t.Errorf("cache from %q", images[0].CacheFrom)
	}
	// Without the command line the same image is only suspected.
	plain := Images(host.IO, nil, nil, nil)
	if w := Warnings(plain); len(w) != 1 || w[0].Kind != WarnNeverFlushed {
		t.Errorf("warnings without the command line: %+v", w)
	}
	if _, err := Merge(guest, host, Options{Image: "/v/other.img"}); err == nil || !strings.Contains(err.Error(), "no flushes") {
		t.Errorf("an image the host never wrote: %v", err)
	}
}
