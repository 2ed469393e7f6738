package analysis

import (
	"cmp"
	"slices"

	"github.com/etcdscope/etcdscope/event"
)

// kpCats maps the kernel's categories (event.KPCat) to the sweep's.
var kpCats = [...]int{
	event.KPCatFlush:         catFlush,
	event.KPCatQueue:         catQueue,
	event.KPCatData:          catData,
	event.KPCatJournal:       catJournal,
	event.KPCatJournalWindow: catJournalWindow,
}

// kpRoles names the roles of the kernel's request categories.
var kpRoles = [...]string{event.KPCatFlush: RoleFlush, event.KPCatData: RoleData, event.KPCatJournal: RoleJournal}

// AttributeKPart returns the record of call f from k, what its kernel slot
// held (tracer.FsyncConfig.KernelPartition; k.Reason KPartOK):
// Attribute's record of f, its layers, flushes and FUA writes swept from
// the entries the kernel chose with Attribute's rules for a plain disk
// (sweep.placeRequest) and Attribute's sweep (bench/findings.md 32: the
// sweep here, not in the kernel's exit). What the entries do not keep is
// not in it: a Request has its role, disk, op (FLUSH; WRITE, with FUA for
// a FUA-only write) and times, no sector, bytes, other flags or
// submitter; a JournalWindow no transaction id. Not safe for use
// concurrently with a's other methods.
func (a *Attributor) AttributeKPart(f event.Fsync, k *event.KPart) FsyncRecord {
	rec, _ := a.newRecord(f)
	if f.EndNs < f.StartNs {
		return rec
	}
	s, e := f.StartNs, f.EndNs
	disk := ""
	if len(rec.Disks) == 1 {
		disk = rec.Disks[0]
	}
	sw := &a.sw
	sw.init(s, e)
	a.reqs = a.reqs[:0]
	var claimed uint64 // flush bios claimed (bit: entry), as flushAsked's a.used
	asked := func(by uint64) (uint64, bool) {
		best := -1
		for i, y := range k.Slot {
			if y.Type != event.KPEntryFlushBio || y.A > by || y.A < s || i >= 64 || claimed&(1<<i) != 0 {
				continue
			}
			if best < 0 || y.A > k.Slot[best].A {
				best = i
			}
		}
		if best < 0 {
			return 0, false
		}
		claimed |= 1 << best
		return k.Slot[best].A, true
	}
	for _, x := range k.Slot {
		switch {
		case x.Type == event.KPEntryJournalCommit:
			if x.B < s || x.B > e {
				continue
			}
			sw.add(x.A, x.B, catJournalWindow)
			rec.Journal = append(rec.Journal, JournalWindow{Source: event.JournalJBD2Commit.String(), Dev: rec.Dev, StartNs: x.A, EndNs: x.B})
			continue
		case x.Type != event.KPEntryRequest || x.C < s || x.C > e || int(x.Cat) >= len(kpRoles) || kpRoles[x.Cat] == "":
			continue
		}
		insert, notIssued := sw.placeRequest(x.A, x.B, x.C, kpCats[x.Cat], false, asked)
		op, flags := event.OpWrite, event.ReqFlags(0)
		if x.Cat == event.KPCatFlush {
			if x.Preflush {
				op = event.OpFlush
			} else {
				flags = event.ReqFUA
			}
			countFlush(&rec, op, flags, x.B != 0)
		}
		rf := a.reqFormat(op, flags)
		a.reqs = append(a.reqs, Request{Role: kpRoles[x.Cat], Dev: disk, Op: op.String(), Flags: rf.flags, Rwbs: rf.rwbs,
			InsertNs: insert, IssueNs: x.B, CompleteNs: x.C, NotIssued: notIssued})
	}
	rec.Layers, _, _ = sw.partition()
	if len(a.reqs) > 0 {
		rec.Requests = slices.Clone(a.reqs)
		slices.SortFunc(rec.Requests, func(x, y Request) int { return cmp.Compare(x.IssueNs, y.IssueNs) })
	}
	if a.latestNs-a.prunedNs >= pruneEveryNs {
		a.prune()
	}
	return rec
}
