package event

// KPart is one traced call's layer partition assembled in the kernel
// (bpf/kpart.h; tracer.FsyncConfig.KernelPartition), by the rule
// analysis.Attribute implements, which stays the reference: same events
// in, same nanoseconds and counts out. It follows the call's Fsync in the
// stream; TID and StartNs name the call.
type KPart struct {
	TID     uint32
	StartNs uint64 // CLOCK_MONOTONIC ns, the call's Fsync.StartNs
	EndNs   uint64
	// Reason is KPartOK when the fields below are the partition; else why
	// they are not (all zero, or Dropped set).
	Reason          KPartReason
	DeviceFlushNs   uint64
	BlockQueueNs    uint64
	DataWritebackNs uint64
	JournalNs       uint64 // journal requests and jbd2 commit windows
	OtherNs         uint64
	Flushes         uint32 // REQ_OP_FLUSH or REQ_PREFLUSH requests counted
	FUAWrites       uint32 // issued REQ_FUA-only writes counted
	Requests        uint32 // requests counted, every role
	JournalWindows  uint32 // jbd2 commits counted
	Entries         uint32 // requests, flush bios and commits the call's slot held
	Dropped         uint32 // entries past the slot's bound (KPartOverflow)
	// Slot, with tracer.FsyncConfig.KernelPartitionEntries, is what the
	// call's slot held, the layers and counts above zero until
	// analysis.PartitionKPart sweeps it. The tracer's buffer: valid
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
	KPartStacked              // its disk is bio-based (device-mapper)
	KPartNoSlot               // every in-flight slot was held
	KPartOverflow             // more entries than a slot holds
)

var kpartReasonNames = [...]string{"ok", "no_disk", "stacked", "no_slot", "overflow"}

// String names the reason.
func (r KPartReason) String() string {
	if int(r) < len(kpartReasonNames) {
		return kpartReasonNames[r]
	}
	return "unknown"
}
