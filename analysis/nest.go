// Nesting of stacked levels: a stacked device's backing file (Backing), and
// the host-level fsyncs of it that nest under the flushes they served.

package analysis

import (
	"strconv"
	"strings"

	"github.com/etcdscope/etcdscope/event"
)

// Backing is the file under a stacked block device (a loop device's
// backing file): where its flushes become fsyncs of the host filesystem.
type Backing struct {
	Dev  event.Dev // the backing file's filesystem (s_dev)
	Ino  uint64
	Path string
	FS   string // that filesystem's type (mountinfo's name); "" unknown
}

// HostLevelTraced reports whether the host level sees the fsyncs a loop
// device's driver makes of a backing file on a filesystem of type fs:
// they come from kernel threads, which no syscall tracepoint sees, so only
// filesystems with sync_file tracepoints of their own (ext4's driver,
// which also mounts ext2 and ext3) show them (bpf/stacked.bpf.c). An
// unknown type ("") is given the benefit of the doubt.
func HostLevelTraced(fs string) bool {
	switch fs {
	case "", "ext4", "ext3", "ext2":
		return true
	}
	return false
}

// BackingLookup returns the backing file of a disk, ok=false for a disk
// that is not stacked (host.DeviceResolver.Backing in production).
type BackingLookup func(disk event.Dev) (Backing, bool)

// SetBackingLookup enables nesting: flush requests on disks that lookup
// knows as stacked get the host-level fsyncs (event.KernelFsync) made of
// their backing file while they were in flight.
func (a *Attributor) SetBackingLookup(lookup BackingLookup) { a.backing = lookup }

// nest attaches to each issued flush of a stacked disk the host-level
// fsyncs of its backing file that ran entirely while it was in flight.
func (a *Attributor) nest(rec *FsyncRecord) {
	if a.backing == nil {
		return
	}
	for i := range rec.Requests {
		r := &rec.Requests[i]
		if r.Role != RoleFlush || r.NotIssued || r.DM {
			continue
		}
		// r.Dev is "major:minor" (devString); fmt.Sscanf was a fifth of
		// nest's time.
		ma, mi, found := strings.Cut(r.Dev, ":")
		maj, err1 := strconv.ParseUint(ma, 10, 32)
		min, err2 := strconv.ParseUint(mi, 10, 32)
		if !found || err1 != nil || err2 != nil {
			continue
		}
		b, ok := a.backing(event.MkDev(uint32(maj), uint32(min)))
		if !ok {
			continue
		}
		if !HostLevelTraced(b.FS) {
			// Say so instead of leaving the level out silently.
			r.HostUntraced = b.FS
			continue
		}
		if len(a.hosts) == 0 {
			continue
		}
		// hosts are nearly sorted by EndNs (emit order): look only at those
		// that can end inside the flush, not at every retained one. Each
		// flush scanned them all, copying each record and formatting b.Dev
		// per host: 91% of the reader's CPU on ext4 over a loop device
		// (~300 µs per fsync), which starved the reader into losing events.
		dev := b.Dev.String()
		hosts := aroundSkew(a.hosts, r.IssueNs, r.CompleteNs, a.hostsOrder.skew(), func(h *FsyncRecord) uint64 { return h.EndNs })
		for j := range hosts {
			h := &hosts[j]
			if h.Dev == dev && h.Ino == b.Ino && h.StartNs >= r.IssueNs && h.EndNs <= r.CompleteNs {
				hr := *h
				if hr.Path == "" {
					hr.Path = b.Path
				}
				r.Host = append(r.Host, hr)
			}
		}
	}
}
