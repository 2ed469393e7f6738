// The partition: Attribute gives each instant of a call to the deepest layer
// active then (the package doc's rule), by a sweep over the intervals of the
// requests, dm bios and journal windows it waited on.

package analysis

import (
	"cmp"
	"slices"

	"github.com/etcdscope/etcdscope/event"
)

// Attribute partitions f into layers from the events added so far and
// returns its record (Path and FileKind are left for the caller, who can
// read /proc).
func (a *Attributor) Attribute(f event.Fsync) FsyncRecord {
	rec, disks := a.newRecord(f)
	if f.EndNs < f.StartNs {
		return rec
	}
	s, e := f.StartNs, f.EndNs
	sw := &a.sw
	sw.init(s, e)
	a.used = a.used[:0]
	a.usedRm = a.usedRm[:0]
	all := a.allDisks(disks)
	// Requests collect in a.reqs and are copied out at the end: one
	// allocation of the right size instead of append's growth.
	a.reqs = a.reqs[:0]
	reqs := &a.reqs

	blocks := aroundSkew(a.blocks, s, e, a.blocksOrder.skew(), func(b *event.Block) uint64 { return b.CompleteNs })
	for i := range blocks {
		b := &blocks[i]
		if b.CompleteNs < s || b.CompleteNs > e || !containsDev(all, b.Dev) {
			continue
		}
		lower := !containsDev(disks, b.Dev) // on a disk beneath a dm disk
		role := roleOf(b, f.TID)
		if role == "" {
			continue
		}
		rf := a.reqFormat(b.Op, b.Flags)
		*reqs = append(*reqs, Request{
			Role: role, Dev: a.devString(b.Dev), Op: b.Op.String(), Flags: rf.flags,
			Rwbs: rf.rwbs, Sector: sectorOf(b), Bytes: b.Bytes,
			InsertNs: b.InsertNs, IssueNs: b.IssueNs, CompleteNs: b.CompleteNs,
			TID: b.TID, Comm: b.Comm,
		})
		ins := b.InsertNs
		if lower && role == RoleFlush && ins != 0 && b.IssueNs > ins {
			// The flush state machine inserts its flush request when
			// kblockd gets to it: the wait on the disk beneath began
			// when dm sent the flush there, not at the insert
			// (Debian's 6.12 under TCG: 4-9 ms later).
			if q, ok := a.flushWaitFrom(b.Dev, true, s, ins); ok && q < ins {
				ins = q
			}
		}
		req := &(*reqs)[len(*reqs)-1]
		req.InsertNs, req.NotIssued = sw.placeRequest(ins, b.IssueNs, b.CompleteNs, roleCats[role], lower,
			func(by uint64) (uint64, bool) { return a.flushWaitFrom(b.Dev, lower, s, by) })
		if lower && role != RoleFlush {
			// It waited on the disk beneath from its remap, when dm
			// queued its bio there (in a plug, until inserted or
			// issued from it).
			if r, ok := a.remapBefore(b, s); ok {
				sw.addAt(r, b.IssueNs, catQueue, true)
			}
		}
		if role == RoleFlush {
			countFlush(&rec, b.Op, b.Flags, b.IssueNs != 0)
		}
	}
	dm := a.attributeDM(&rec, f.TID, s, e, all)
	for _, j := range around(a.journals, s, e, journalKey) {
		switch j.Source {
		case event.JournalJBD2Commit:
			if j.Dev != f.Dev || j.EndNs < s || j.EndNs > e {
				continue
			}
			rec.Journal = append(rec.Journal, JournalWindow{Source: j.Source.String(), Dev: a.devString(j.Dev), Txn: j.Txn, StartNs: j.StartNs, EndNs: j.EndNs})
			sw.add(j.StartNs, j.EndNs, catJournalWindow)
		case event.JournalJBD2Wait:
			if j.TID != f.TID || j.StartNs < s || j.EndNs > e {
				continue
			}
			rec.Journal = append(rec.Journal, JournalWindow{Source: j.Source.String(), Dev: a.devString(j.Dev), Txn: j.Txn, StartNs: j.StartNs, EndNs: j.EndNs})
			sw.add(j.StartNs, j.EndNs, catJournalWindow)
		case event.JournalXFSLogForce:
			if j.Dev != f.Dev || j.TID != f.TID || j.StartNs < s || j.StartNs > e {
				continue
			}
			rec.Journal = append(rec.Journal, JournalWindow{Source: j.Source.String(), Dev: a.devString(j.Dev), StartNs: j.StartNs, EndNs: e})
			sw.add(j.StartNs, e, catJournalWindow)
		}
	}
	var call SchedSplit
	withSched := a.sched && f.Syscall != event.SysKthread // kernel threads' calls are not in inflight.h
	if withSched {
		call = a.schedSweep(f.TID, s, e)
	}
	var other SchedSplit
	var lowerLayers Layers
	rec.Layers, other, lowerLayers = sw.partition()
	if withSched {
		rec.Sched = &Sched{Call: call, Other: other}
	}
	if dm != nil {
		dm.HeldNs = rec.Layers.DMNs
		dm.Lower = lowerLayers
		rec.DM = dm
	}
	if len(*reqs) > 0 {
		rec.Requests = slices.Clone(*reqs)
		clear(*reqs) // drop references to the strings and host records
		// slices.SortFunc is the same pdqsort as the sort.Slice it
		// replaces: requests with equal IssueNs keep the order they had.
		slices.SortFunc(rec.Requests, func(x, y Request) int { return cmp.Compare(x.IssueNs, y.IssueNs) })
	}
	a.nest(&rec)
	if a.latestNs-a.prunedNs >= pruneEveryNs {
		a.prune()
	}
	return rec
}

// newRecord returns the record of call f with what the call itself says
// (no layers, no requests yet; TotalNs 0 when f ends before it starts),
// and the disks under its filesystem; f is no longer in flight.
func (a *Attributor) newRecord(f event.Fsync) (FsyncRecord, []event.Dev) {
	delete(a.inflight, f.TID)
	a.see(f.EndNs)
	name, disks := "", []event.Dev(nil)
	if a.lookup != nil {
		name, disks = a.lookup(f.Dev)
	}
	rec := FsyncRecord{
		Type: "fsync", Version: SchemaVersion,
		StartNs: f.StartNs, EndNs: f.EndNs, TotalNs: int64(f.EndNs - f.StartNs),
		PID: f.PID, TID: f.TID, Comm: f.Comm, Syscall: f.Syscall.String(),
		Datasync: f.Syscall == event.SysFdatasync, Ret: f.Ret, FD: f.FD,
		Dev: a.devString(f.Dev), DevName: name, FS: f.FSType, Ino: f.Ino,
		Requests: []Request{},
	}
	if f.IsBlockdev {
		rec.FS = "blockdev"
	}
	rec.Disks = a.diskStrings(f.Dev, disks)
	if f.EndNs < f.StartNs {
		rec.TotalNs = 0
	}
	return rec, disks
}

// journalKey is when a journal event was emitted: a jbd2 commit or wait
// at its end, an XFS log force (no end) at its start.
func journalKey(j *event.Journal) uint64 {
	if j.EndNs != 0 {
		return j.EndNs
	}
	return j.StartNs
}

func containsDev(ds []event.Dev, d event.Dev) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

// Categories of the sweep, in priority order (lower wins): a request's
// time first (the deepest thing a device was doing), then a dm target's
// hold of a bio (around its clone's requests), then the journal's windows
// (around the requests and bios of a commit).
const (
	catFlush = iota
	catQueue
	catData
	catJournal
	catDM
	catJournalWindow
	// Below every I/O layer, what splits "other" (SetSched): the thread
	// waiting for a CPU or running; uncovered time is then blocked.
	catRunnable
	catRunning
	numCats
)

// roleCats maps a request's role to its sweep category.
var roleCats = map[string]int{RoleFlush: catFlush, RoleData: catData, RoleJournal: catJournal}

// placeRequest adds to w the time a call spent on one request (the
// package doc's rule), inserted at ins, issued at iss (0: not seen) and
// completed at cpl, of category cat (catFlush, catData or catJournal;
// lower as addAt's): its queue wait from insert to issue; for a flush
// the flush state machine issued from kblockd with no insert, from the
// flush bio that asked for it, asked(iss); for one it completed without
// issuing it (it rode on a flush already in flight, device flush time),
// from asked(cpl); then issue to completion in cat. It returns the insert
// the request's record shows (ins, or the asking bio's queue time) and
// whether it was completed without being issued. Attribute and the
// kernel's entries (AttributeKPart, PartitionKPart) both place their
// requests here.
func (w *sweep) placeRequest(ins, iss, cpl uint64, cat int, lower bool, asked func(by uint64) (uint64, bool)) (insert uint64, notIssued bool) {
	insert, issue := ins, iss
	flush := cat == catFlush
	switch {
	case ins != 0 && iss > ins:
		w.addAt(ins, iss, catQueue, lower)
	case flush && ins == 0 && iss == 0:
		notIssued, issue = true, cpl
		if q, ok := asked(cpl); ok {
			insert, issue = q, q
		}
	case flush && ins == 0:
		if q, ok := asked(iss); ok {
			insert = q
			w.addAt(q, iss, catQueue, lower)
		}
	}
	if issue == 0 {
		issue = ins
	}
	w.addAt(issue, cpl, cat, lower)
	return insert, notIssued
}

// sweep assigns every instant of [s, e] to the highest-priority category
// whose intervals cover it.
type sweep struct {
	s, e   uint64
	points []sweepPoint
}

type sweepPoint struct {
	t     uint64
	cat   int
	delta int
	lower bool // a request of a disk beneath a dm disk
}

// init starts a sweep of [s, e], reusing the points slice.
func (w *sweep) init(s, e uint64) { w.s, w.e, w.points = s, e, w.points[:0] }

func (w *sweep) add(from, to uint64, cat int) { w.addAt(from, to, cat, false) }

// addAt adds an interval of category cat; lower marks the request of a
// disk beneath a dm disk, whose owned time partition also reports apart.
func (w *sweep) addAt(from, to uint64, cat int, lower bool) {
	if from < w.s {
		from = w.s
	}
	if to > w.e {
		to = w.e
	}
	if to <= from {
		return
	}
	w.points = append(w.points, sweepPoint{from, cat, +1, lower}, sweepPoint{to, cat, -1, lower})
}

// partition returns the layers of [s, e], other's split by scheduler
// state, and the part of the layers owned by requests of disks beneath a
// dm disk (an instant goes there when a lower request of its owning
// category is active).
func (w *sweep) partition() (all Layers, other SchedSplit, lower Layers) {
	// Points with equal t may come in any order: time is credited only
	// when t advances, after every delta at the previous t is applied.
	slices.SortFunc(w.points, func(x, y sweepPoint) int { return cmp.Compare(x.t, y.t) })
	var active, activeLower [numCats]int
	var owned, ownedLower [numCats + 1]int64 // last slot: other
	prev := w.s
	credit := func(d int64) {
		c := owner(&active)
		owned[c] += d
		if c < numCats && activeLower[c] > 0 {
			ownedLower[c] += d
		}
	}
	for _, p := range w.points {
		if p.t > prev {
			credit(int64(p.t - prev))
			prev = p.t
		}
		active[p.cat] += p.delta
		if p.lower {
			activeLower[p.cat] += p.delta
		}
	}
	if w.e > prev {
		credit(int64(w.e - prev))
	}
	other = SchedSplit{RunnableNs: owned[catRunnable], RunningNs: owned[catRunning], BlockedNs: owned[numCats]}
	return Layers{
			DeviceFlushNs:   owned[catFlush],
			BlockQueueNs:    owned[catQueue],
			DataWritebackNs: owned[catData],
			JournalNs:       owned[catJournal] + owned[catJournalWindow],
			DMNs:            owned[catDM],
			OtherNs:         other.Sum(),
		}, other, Layers{
			DeviceFlushNs:   ownedLower[catFlush],
			BlockQueueNs:    ownedLower[catQueue],
			DataWritebackNs: ownedLower[catData],
			JournalNs:       ownedLower[catJournal],
		}
}

func owner(active *[numCats]int) int {
	for c := 0; c < numCats; c++ {
		if active[c] > 0 {
			return c
		}
	}
	return numCats
}
