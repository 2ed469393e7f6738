// Tests of nest.go: host fsyncs under a loop device's flush, and a backing
// file the host level cannot see.

package analysis

import (
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

// TestNestHostFsync: a kernel-thread fsync of a loop device's backing file
// that ran inside a flush of that loop device nests under the flush; one
// outside the flush, or of another file, does not.
func TestNestHostFsync(t *testing.T) {
	hostFS := event.MkDev(254, 0)
	a := NewAttributor(func(d event.Dev) (string, []event.Dev) {
		switch d {
		case fsDev:
			return "loop0", []event.Dev{diskDev}
		case hostFS:
			return "vda", []event.Dev{hostFS}
		}
		return "", nil
	})
	a.SetBackingLookup(func(d event.Dev) (Backing, bool) {
		if d == diskDev {
			return Backing{Dev: hostFS, Ino: 77, Path: "/var/tmp/img"}, true
		}
		return Backing{}, false
	})
	host := func(ino uint64, s, e uint64) event.KernelFsync {
		return event.KernelFsync{Fsync: event.Fsync{Syscall: event.SysKthread, TID: 9, Comm: "kworker/u8:1", Dev: hostFS, FSType: "ext4", Ino: ino, StartNs: s, EndNs: e}}
	}
	a.Add(event.FsyncEnter{TID: tid, StartNs: 1000})
	a.Add(host(77, 1100, 1300)) // inside the flush [1050, 1400]
	a.Add(host(78, 1100, 1300)) // another file
	a.Add(host(77, 1450, 1500)) // after the flush
	a.Add(blk(1, event.OpFlush, event.ReqPreflush, 0, 1050, 1400, 3, "kworker/0:0H"))
	rec := a.Attribute(fsyncEv(1000, 2000))
	if len(rec.Requests) != 1 || len(rec.Requests[0].Host) != 1 {
		t.Fatalf("requests %+v", rec.Requests)
	}
	h := rec.Requests[0].Host[0]
	if h.StartNs != 1100 || h.Path != "/var/tmp/img" || h.Syscall != "vfs_fsync" || h.DevName != "vda" {
		t.Fatalf("host record %+v", h)
	}
	levels := BuildLevels([]FsyncRecord{rec})
	if len(levels) != 2 || levels[0].Level != LevelUpper || levels[1].Level != LevelBacking || levels[1].Device != "vda" {
		t.Fatalf("levels %+v", levels)
	}
	// backing's 200 ns nest in upper's 350 ns of device flush.
	if got := levels[1].NestedShare; got < 0.57 || got > 0.58 {
		t.Fatalf("nested share %v", got)
	}
}

// TestNestUntracedBacking: a flush on a loop device whose backing file is
// on a filesystem the host level cannot see is marked with that
// filesystem, and the levels table gets a backing row saying so (a typed
// reason, UntracedBackingFS; render words it), even when no
// host fsync at all was seen (there is none to see).
func TestNestUntracedBacking(t *testing.T) {
	a := NewAttributor(lookup)
	a.SetBackingLookup(func(d event.Dev) (Backing, bool) {
		return Backing{Dev: event.MkDev(0, 52), Ino: 77, Path: "/mnt/fuse/img", FS: "fuse.bindfs"}, d == diskDev
	})
	a.Add(event.FsyncEnter{TID: tid, StartNs: 1000})
	a.Add(blk(1, event.OpFlush, event.ReqPreflush, 0, 1050, 1400, 3, "kworker/0:0H"))
	rec := a.Attribute(fsyncEv(1000, 2000))
	if len(rec.Requests) != 1 || rec.Requests[0].HostUntraced != "fuse.bindfs" || len(rec.Requests[0].Host) != 0 {
		t.Fatalf("requests %+v", rec.Requests)
	}
	levels := BuildLevels([]FsyncRecord{rec})
	if len(levels) != 1 || levels[0].Level != LevelBacking || levels[0].FS != "fuse.bindfs" || levels[0].Untraced != UntracedBackingFS {
		t.Fatalf("levels %+v", levels)
	}
	if !HostLevelTraced("ext4") || !HostLevelTraced("") || HostLevelTraced("xfs") || HostLevelTraced("nfs4") {
		t.Error("HostLevelTraced")
	}
}
