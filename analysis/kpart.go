package analysis

import "github.com/etcdscope/etcdscope/event"

// kpCats maps the kernel's categories (event.KPCat) to the sweep's.
var kpCats = [...]int{
	event.KPCatFlush:         catFlush,
	event.KPCatQueue:         catQueue,
	event.KPCatData:          catData,
	event.KPCatJournal:       catJournal,
	event.KPCatJournalWindow: catJournalWindow,
}

// PartitionKPart fills k's layers and counts from k.Slot, what its call's
// slot held in the kernel (tracer.FsyncConfig.KernelPartitionEntries):
// Attribute's rules for a plain disk, with Attribute's sweep, on the
// entries the kernel chose (bench/findings.md 32: the sweep here, not in
// the kernel's exit). k is left as it is without Slot, or when the kernel
// did not partition the call (Reason). Not safe for use concurrently with
// a's other methods (it uses Attribute's scratch).
func (a *Attributor) PartitionKPart(k *event.KPart) {
	if k.Reason != event.KPartOK || len(k.Slot) == 0 || k.EndNs < k.StartNs {
		return
	}
	s, e := k.StartNs, k.EndNs
	sw := &a.sw
	sw.init(s, e)
	var claimed uint64 // flush bios claimed (bit: entry), as flushAsked's a.used
	flushAsked := func(by uint64) (uint64, bool) {
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
			k.JournalWindows++
			sw.add(x.A, x.B, catJournalWindow)
			continue
		case x.Type != event.KPEntryRequest || x.C < s || x.C > e || int(x.Cat) >= len(kpCats):
			continue
		}
		ins, iss, cpl := x.A, x.B, x.C
		flush := x.Cat == event.KPCatFlush
		k.Requests++
		issue := iss
		switch {
		case ins != 0 && iss > ins:
			sw.add(ins, iss, catQueue)
		case flush && ins == 0 && iss == 0:
			// completed by the flush state machine without being issued
			issue = cpl
			if q, ok := flushAsked(cpl); ok {
				issue = q
			}
		case flush && ins == 0:
			// issued from kblockd: asked for by the latest flush bio
			if q, ok := flushAsked(iss); ok {
				sw.add(q, iss, catQueue)
			}
		}
		if issue == 0 {
			issue = ins
		}
		if flush {
			switch {
			case x.Preflush:
				k.Flushes++
			case iss != 0:
				k.FUAWrites++
			}
		}
		sw.add(issue, cpl, kpCats[x.Cat])
	}
	l, _, _ := sw.partition()
	k.DeviceFlushNs, k.BlockQueueNs, k.DataWritebackNs = uint64(l.DeviceFlushNs), uint64(l.BlockQueueNs), uint64(l.DataWritebackNs)
	k.JournalNs, k.OtherNs = uint64(l.JournalNs), uint64(l.OtherNs)
}
