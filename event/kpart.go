package event

// KPart is what one traced call's kernel slot held while it was in
// flight (bpf/kpart.h; tracer.FsyncConfig.KernelPartition): the requests,
// flush bios and jbd2 commits its partition is made of, which
// analysis.Attributor.AttributeKPart sweeps by the rules
// analysis.Attribute implements. In its own record after the call's
// Fsync (KindKPart), or in the call's (KindFsyncKPart); TID and StartNs
// name the call.
type KPart struct {
	TID     uint32
	StartNs uint64 // CLOCK_MONOTONIC ns, the call's Fsync.StartNs
	EndNs   uint64
	// Reason is KPartOK when Slot is complete; else why it is empty.
	Reason  KPartReason
	Entries uint32 // requests, flush bios and commits the call's slot held
	Dropped uint32 // entries past the slot's bound (KPartOverflow)
	// Slot is what the call's slot held: the tracer's buffer, valid
	// until its next Read.
	Slot []KPEntry
}

// KPEntry is bpf/events.h's struct kp_entry: one thing a call's slot
// held while it was in flight.
type KPEntry struct {
	// A, B, C by Type: a request's insert, issue and final completion
	// (0: not seen); a flush bio's block_getrq in A; a jbd2 commit's
	// start and end in A and B. CLOCK_MONOTONIC ns.
	A, B, C  uint64
	Type     KPEntryType
	Cat      KPCat // KPEntryRequest: its role for the call
	Preflush bool  // KPEntryRequest: REQ_OP_FLUSH or REQ_PREFLUSH (else FUA only)
}

// KPEntryType is bpf/events.h's enum kp_entry_type.
type KPEntryType uint8

// Values of enum kp_entry_type.
const (
	KPEntryRequest       KPEntryType = iota + 1 // a request's final completion
	KPEntryFlushBio                             // a flush bio got its request
	KPEntryJournalCommit                        // a jbd2 commit of the call's filesystem
)

// KPCat is bpf/events.h's enum kp_cat: a request's role for a call, in
// the sweep's priority order.
type KPCat uint8

// Values of enum kp_cat.
const (
	KPCatFlush KPCat = iota
	KPCatQueue
	KPCatData
	KPCatJournal
	KPCatJournalWindow
	KPCatOther
)

// KPartReason is bpf/fsync.h's enum kpart_reason: why a call has no
// kernel-made partition.
type KPartReason uint8

// Values of enum kpart_reason.
const (
	KPartOK       KPartReason = iota
	KPartNoDisk               // its filesystem names no disk
	KPartStacked              // its disk is bio-based (device-mapper) or a loop device
	KPartNoSlot               // every in-flight slot was held
	KPartOverflow             // more entries than a slot holds
	KPartLost                 // its slot was freed before its exit
)

var kpartReasonNames = [...]string{"ok", "no_disk", "stacked", "no_slot", "overflow", "lost"}

// String names the reason.
func (r KPartReason) String() string {
	if int(r) < len(kpartReasonNames) {
		return kpartReasonNames[r]
	}
	return "unknown"
}
