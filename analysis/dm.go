// Device-mapper: the disks stacked beneath a call's disks, and the dm bios
// and remaps that make a call's dm level (DMLevel).

package analysis

import (
	"slices"
	"sort"

	"github.com/etcdscope/etcdscope/event"
)

// allDisks returns disks and, through the remaps seen, every disk stacked
// beneath them (device-mapper over a loop device, dm over dm), in
// a.all: valid until the next call.
func (a *Attributor) allDisks(disks []event.Dev) []event.Dev {
	a.all = append(a.all[:0], disks...)
	for i := 0; i < len(a.all) && i < 64; i++ {
		for _, d := range a.lower[a.all[i]] {
			if !slices.Contains(a.all, d) {
				a.all = append(a.all, d)
			}
		}
	}
	return a.all
}

// attributeDM adds to rec's requests and to the sweep the bios of dm
// disks among all that the call waited on (completed inside [s, e], with
// a role by roleOf's rule), each with the first unclaimed remap of the
// same kind from its disk inside its window, and returns the call's dm
// level (nil when there was none).
func (a *Attributor) attributeDM(rec *FsyncRecord, tid uint32, s, e uint64, all []event.Dev) *DMLevel {
	if len(a.dmbios) == 0 {
		return nil
	}
	var lvl *DMLevel
	bios := around(a.dmbios, s, e, func(b *event.DMBio) uint64 { return b.CompleteNs })
	for i := range bios {
		b := &bios[i]
		if b.CompleteNs < s || b.CompleteNs > e || !containsDev(all, b.Dev) {
			continue
		}
		role := dmRoleOf(b, tid)
		if role == "" {
			continue
		}
		if lvl == nil {
			name := ""
			if a.lookup != nil {
				name, _ = a.lookup(b.Dev)
			}
			lvl = &DMLevel{Dev: a.devString(b.Dev), DevName: name}
			for _, t := range a.lower[b.Dev] {
				tn := ""
				if a.lookup != nil {
					tn, _ = a.lookup(t)
				}
				lvl.Targets = append(lvl.Targets, a.devString(t))
				lvl.TargetNames = append(lvl.TargetNames, tn)
			}
		}
		lvl.Bios++
		rf := a.reqFormat(b.Op, b.Flags)
		req := Request{Role: role, Dev: a.devString(b.Dev), Op: b.Op.String(), Flags: rf.flags, Rwbs: rf.rwbs,
			Bytes: b.Bytes, IssueNs: b.QueueNs, CompleteNs: b.CompleteNs, DM: true, TID: b.TID, Comm: b.Comm}
		if r, ok := a.remapOf(b); ok {
			req.RemapNs, req.Target = r.RemapNs, a.devString(r.Target)
		}
		a.reqs = append(a.reqs, req)
		if role == RoleFlush {
			countFlush(rec, b.Op, b.Flags, true)
		}
		a.sw.add(b.QueueNs, b.CompleteNs, catDM)
	}
	return lvl
}

// remapOf returns the first remap from b's disk inside b's window, of the
// same kind (a flush for a flush bio: dm sends an empty flush down before
// a flush's data), that no other bio of this call claimed, and claims it.
func (a *Attributor) remapOf(b *event.DMBio) (event.BioRemap, bool) {
	flush := b.IsFlush()
	lo := sort.Search(len(a.remaps), func(i int) bool { return a.remaps[i].RemapNs >= b.QueueNs })
	for i := lo; i < len(a.remaps); i++ {
		r := &a.remaps[i]
		if r.RemapNs > b.CompleteNs {
			break
		}
		rf := r.Op == event.OpFlush || r.Flags&(event.ReqPreflush|event.ReqFUA) != 0
		if r.Dev != b.Dev || rf != flush || slices.Contains(a.usedRm, i) {
			continue
		}
		a.usedRm = append(a.usedRm, i)
		return *r, true
	}
	return event.BioRemap{}, false
}

// remapBefore returns when the latest remap onto b's disk at b's sector
// inside [from, b.IssueNs] sent b's bio there.
func (a *Attributor) remapBefore(b *event.Block, from uint64) (uint64, bool) {
	hi := sort.Search(len(a.remaps), func(i int) bool { return a.remaps[i].RemapNs > b.IssueNs })
	for i := hi - 1; i >= 0; i-- {
		r := &a.remaps[i]
		if r.RemapNs < from {
			break
		}
		if r.Target == b.Dev && r.Sector == b.Sector {
			return r.RemapNs, true
		}
	}
	return 0, false
}

// flushWaitFrom returns when a flush request on disk, at or before by,
// began to wait there: when the flush bio that asked for it got its
// request (flushAsked, which claims it), or, on a disk beneath a dm disk
// (lower), when dm sent the flush down (its remap) if that came first.
// The bio can get its request late after the remap, whether or not an
// insert follows (TCG: 5.2 ms before an insert; on Debian's 6.12, issued
// from kblockd without one, 0.06-0.48 ms by etcdscope's stamps on every
// call and 2.35 ms by ftrace's on one first call): that gap is the disk
// beneath's, as ftrace's hold (remap − queue) counts it.
func (a *Attributor) flushWaitFrom(disk event.Dev, lower bool, from, by uint64) (uint64, bool) {
	q, ok := a.flushAsked(disk, from, by)
	if !lower {
		return q, ok
	}
	if r, rok := a.flushRemapBefore(disk, from, by); rok && (!ok || r < q) {
		return r, true
	}
	return q, ok
}

// flushRemapBefore returns when the latest flush remap (an empty flush or
// a REQ_PREFLUSH write dm sent down) onto disk inside [from, to] was made:
// a flush request beneath waits on that disk from then.
func (a *Attributor) flushRemapBefore(disk event.Dev, from, to uint64) (uint64, bool) {
	hi := sort.Search(len(a.remaps), func(i int) bool { return a.remaps[i].RemapNs > to })
	for i := hi - 1; i >= 0; i-- {
		r := &a.remaps[i]
		if r.RemapNs < from {
			break
		}
		if r.Target == disk && (r.Op == event.OpFlush || r.Flags&event.ReqPreflush != 0) {
			return r.RemapNs, true
		}
	}
	return 0, false
}
