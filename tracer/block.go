package tracer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 -type blk_event -type flush_bio_event -type dm_bio_event -type bio_remap_event -type es_op -type es_req_flag -type blk_stat block ../bpf/block.bpf.c

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
)

// loadBlock loads the block object (bpf/block.bpf.c: every block request's
// insert, issue and completion, and every flush bio's request) over the shared ring,
// keeping only cfg.Disk's requests when it is set, and only busy disks'
// completions and flush bios unless cfg.EveryBlock.
func (t *FsyncTracer) loadBlock(shared ebpf.CollectionOptions, cfg FsyncConfig) error {
	spec, err := loadBlock()
	if err != nil {
		return fmt.Errorf("reading block object: %w", err)
	}
	if err := sizeEvents(spec, shared.MapReplacements["events"].MaxEntries()); err != nil {
		return err
	}
	vars, err := blockQueueArgs(shared.Cache)
	if err != nil {
		return err
	}
	vars["targ_dev"], vars["every_block"], vars["kpart"] = uint32(cfg.Disk), cfg.EveryBlock, t.kpart
	if testDMOneSlot {
		vars["dm_slot_mask"] = uint32(0)
	}
	if err := setVariables(spec, vars); err != nil {
		return err
	}
	if err := applyCompat(spec); err != nil { // es_task_btf: the submitter's comm; es_spin_lock: the slots' locks (bpf/compat.h, bpf/block.bpf.c)
		return err
	}
	if err := spec.LoadAndAssign(&t.block, &shared); err != nil {
		return explainLoad("block programs", err)
	}
	return nil
}

// testDMOneSlot puts every dm bio's start in one slot of dm_starts
// (bpf/block.bpf.c's dm_slot_mask), for TestDMSlotsRace: bios queued and
// completed on two CPUs then meet in it.
var testDMOneSlot bool

// attachBlock attaches the block-layer tp_btf programs (required): the
// request programs and block_getrq always; block_bio_queue, _remap and
// _complete, which run for every bio of every disk (every bio of a
// partition is remapped onto its disk), only once a stacked disk
// (device-mapper, md) exists (host.StackedDisks): only there do they
// record anything. Without one at start, watchStacked attaches them when
// one appears (an LVM volume activated after serve started).
func (t *FsyncTracer) attachBlock() error {
	progs := []struct {
		p    *ebpf.Program
		name string
	}{
		// The end of a request's life first: each attach waits for an
		// RCU grace period, and a request issued while block_rq_issue was
		// attached but block_rq_complete not yet kept its slot as issued,
		// to be counted an unseen completion when its address came back
		// (3 to 4 a run at 30k requests/s, docs/performance.md).
		{t.block.BlockRqComplete, "block_rq_complete"}, {t.block.BlockRqRequeue, "block_rq_requeue"},
		{t.block.BlockRqIssue, "block_rq_issue"}, {t.block.BlockRqInsert, "block_rq_insert"},
		{t.block.BlockGetrq, "block_getrq"},
	}
	stacked := len(host.StackedDisks("/sys")) > 0
	if stacked {
		progs = append(progs, []struct {
			p    *ebpf.Program
			name string
		}{{t.block.BlockBioQueue, "block_bio_queue"}, {t.block.BlockBioRemap, "block_bio_remap"},
			{t.block.BlockBioComplete, "block_bio_complete"}}...)
	}
	for _, p := range progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p.p})
		if err != nil {
			return fmt.Errorf("attaching tp_btf program %s: %w", p.p, err)
		}
		t.links = append(t.links, l)
		t.probes = append(t.probes, event.Probe{Name: "tp_btf/" + p.name, Attached: true})
	}
	if !stacked {
		t.stopWatch = make(chan struct{})
		t.watchDone = make(chan struct{})
		go t.watchStacked(stackedPoll)
	}
	return nil
}

// stackedPoll bounds how late watchStacked sees a stacked disk: an LVM
// volume activated while serve runs is followed below its level within
// this time. Where the kernel's uevents can be received it looks soon
// after a block device's uevent and again stackedPoll after that look
// (a dm device's "dm" directory is made after its add uevent);
// elsewhere it looks every stackedPoll.
const stackedPoll = 2 * time.Second

// stackedSettle lets the uevents of one change (dmsetup create: add,
// then change at resume) come in before the look they share, and
// stackedGap keeps looks that apart in a burst of uevents (loop devices
// set up one after another): at most 4 a second then, and none while
// no block device changes.
const (
	stackedSettle = 100 * time.Millisecond
	stackedGap    = 250 * time.Millisecond
)

// watchStacked attaches the bio programs once host.StackedDisks finds a
// disk, then returns; it returns too when the tracer closes (stopWatch).
// It looks stackedPoll after it starts, then after block uevents
// (host.BlockUevents): stackedSettle after one (stackedGap after the
// last look at the soonest), and stackedPoll after each look that
// uevents led to. Without the uevent socket it looks every stackedPoll
// (each look reads /sys/block: 14% of an idle tracer's CPU at one every
// 2 s, bench/findings.md 28, 31). A failed attach is kept for Close (the
// tracer goes on without the dm level, as before a stacked disk
// existed).
func (t *FsyncTracer) watchStacked(every time.Duration) {
	defer close(t.watchDone)
	// The first look: a disk made before the socket joined.
	due := time.Now().Add(every) // when look fires; zero: it will not
	look := time.NewTimer(every)
	defer look.Stop()
	arm := func(at time.Time) {
		if due.IsZero() || at.Before(due) {
			look.Reset(time.Until(at))
			due = at
		}
	}
	var lastLook time.Time
	pending := false // a uevent came since the last look
	changed := make(chan struct{}, 1)
	if ue, err := host.OpenBlockUevents(); err == nil {
		go func() {
			for ue.Next() == nil {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}()
		defer ue.Close() // ends the goroutine's Next
	} else {
		changed = nil
	}
	for {
		select {
		case <-t.stopWatch:
			return
		case <-changed:
			pending = true
			now := time.Now()
			arm(later(now.Add(stackedSettle), lastLook.Add(stackedGap)))
			continue
		case lastLook = <-look.C:
			due = time.Time{}
			if changed == nil || pending {
				arm(lastLook.Add(every))
				pending = false
			}
		}
		if len(host.StackedDisks("/sys")) == 0 {
			continue
		}
		var errs []error
		for _, p := range []*ebpf.Program{t.block.BlockBioQueue, t.block.BlockBioRemap, t.block.BlockBioComplete} {
			l, err := link.AttachTracing(link.TracingOptions{Program: p})
			if err != nil {
				errs = append(errs, fmt.Errorf("attaching tp_btf program %s: %w", p, err))
				continue
			}
			t.lateLinks = append(t.lateLinks, l)
		}
		t.lateErr = errors.Join(errs...)
		return
	}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// block decodes struct blk_event (bpf/block.h).
func (d *decoder) block(b *event.Block, e *blockBlkEvent) {
	*b = event.Block{
		Rq: e.Rq, Dev: event.Dev(e.Dev), Op: event.Op(e.Op), Flags: event.ReqFlags(e.Flags),
		CmdFlags: e.CmdFlags, Sector: e.Sector, Bytes: e.Bytes, Error: e.Error, Final: e.Final != 0,
		InsertNs: e.InsertNs, IssueNs: e.IssueNs, CompleteNs: e.CompleteNs,
		PID: e.Pid, TID: e.Tid, Comm: d.intern(cbytes(e.Comm[:])),
	}
}

// decodeFlushBio decodes struct flush_bio_event (bpf/block.h).
func decodeFlushBio(f *event.FlushBio, e *blockFlushBioEvent) {
	*f = event.FlushBio{Dev: event.Dev(e.Dev), Op: event.Op(e.Op), Flags: event.ReqFlags(e.Flags),
		PID: e.Pid, TID: e.Tid, QueueNs: e.QueueNs}
}

// dmBio decodes struct dm_bio_event (bpf/block.h).
func (d *decoder) dmBio(b *event.DMBio, e *blockDmBioEvent) {
	*b = event.DMBio{Bio: e.Bio, Dev: event.Dev(e.Dev), Op: event.Op(e.Op), Flags: event.ReqFlags(e.Flags),
		Bytes: e.Bytes, Error: e.Error, PID: e.Pid, TID: e.Tid, Comm: d.intern(cbytes(e.Comm[:])),
		QueueNs: e.QueueNs, CompleteNs: e.CompleteNs}
}

// decodeRemap decodes struct bio_remap_event (bpf/block.h).
func decodeRemap(r *event.BioRemap, e *blockBioRemapEvent) {
	*r = event.BioRemap{Dev: event.Dev(e.Dev), Target: event.Dev(e.Target), Op: event.Op(e.Op), Flags: event.ReqFlags(e.Flags),
		TID: e.Tid, Sector: e.Sector, RemapNs: e.RemapNs}
}

// BlockStats counts what the block programs did since the tracer started
// (bpf/block.bpf.c's per-CPU block_stats, summed over CPUs): every
// block_rq_complete run on any disk is either emitted, filtered (another
// disk than FsyncConfig.Disk) or lost (counted in Lost).
type BlockStats struct {
	CompleteRuns  uint64 // block_rq_complete runs, every disk
	CompleteEmits uint64 // completions put in the ring buffer
	NoStart       uint64 // emitted with no insert or issue seen (times, pid, tid and comm 0)
	Collisions    uint64 // requests that found both their slots held by others: no start kept
	FlushBioEmits uint64 // flush bios put in the ring buffer
	// UnseenCompletions: requests of a busy disk issued again (or
	// inserted) after an issue whose completion the program never ran
	// for, nor a requeue: block_rq_complete runs the kernel did not hand
	// to BPF, with no recursion miss counted (ftrace records them; on
	// this project's test host, completions in softirq on top of the
	// sandbox agent's threads, for which the kernel runs no BPF program:
	// docs/performance.md). Inferred only when the address comes back.
	// Also counted in Missed.
	UnseenCompletions uint64
	// IdleDisk: completions and flush bios dropped in the kernel because
	// no traced call was in flight on their disk (FsyncConfig.EveryBlock
	// off).
	IdleDisk uint64
	// Unused: completions dropped in the kernel because the analysis has
	// no use for them: reads and other non-write requests, and writes
	// whose insert and issue were not seen (FsyncConfig.EveryBlock off).
	Unused     uint64
	DMBioEmits uint64 // bios of bio-based (device-mapper) disks put in the ring buffer
	// DMCollisions: dm bios in flight overwritten by another in the same
	// slot (their completion is then not emitted: also counted in Lost),
	// or whose completion was never seen.
	DMCollisions uint64
	RemapEmits   uint64 // bio remaps put in the ring buffer
}

// BlockStats reads the block programs' counters (bpf/block.h enum blk_stat).
func (t *FsyncTracer) BlockStats() (BlockStats, error) {
	var s BlockStats
	for _, c := range []struct {
		i   blockBlkStat
		dst *uint64
	}{
		{blockBlkStatBLK_STAT_COMPLETE_RUNS, &s.CompleteRuns},
		{blockBlkStatBLK_STAT_COMPLETE_EMITS, &s.CompleteEmits},
		{blockBlkStatBLK_STAT_NO_START, &s.NoStart},
		{blockBlkStatBLK_STAT_COLLISION, &s.Collisions},
		{blockBlkStatBLK_STAT_FLUSH_BIO_EMITS, &s.FlushBioEmits},
		{blockBlkStatBLK_STAT_UNSEEN_COMPLETE, &s.UnseenCompletions},
		{blockBlkStatBLK_STAT_IDLE_DISK, &s.IdleDisk},
		{blockBlkStatBLK_STAT_UNUSED, &s.Unused},
		{blockBlkStatBLK_STAT_DM_BIO_EMITS, &s.DMBioEmits},
		{blockBlkStatBLK_STAT_DM_COLLISION, &s.DMCollisions},
		{blockBlkStatBLK_STAT_REMAP_EMITS, &s.RemapEmits},
	} {
		n, err := t.blockStat(c.i)
		if err != nil {
			return s, err
		}
		*c.dst = n
	}
	return s, nil
}

// blockStat reads one of the block programs' counters, summed over CPUs.
func (t *FsyncTracer) blockStat(i blockBlkStat) (uint64, error) {
	return sumPerCPUKey(t.block.BlockStats, uint32(i), "block_stats")
}
