// The Attributor and its buffer: the recent block, bio, remap, journal and
// host-fsync events, added in ring order (Add, AddEvent) and pruned to what
// a call in flight or to come can need; the formatting caches.

package analysis

import (
	"slices"
	"sort"

	"github.com/etcdscope/etcdscope/event"
)

// DeviceLookup names a filesystem device and lists the whole disks whose
// requests serve it (host.DeviceResolver in production).
type DeviceLookup func(dev event.Dev) (name string, disks []event.Dev)

// Attributor keeps the recent block and journal events and partitions each
// fsync as it arrives. Events must be added in ring-buffer order; an fsync
// is attributed from the events added before it, which includes everything
// it waited for (those were emitted before the syscall returned).
// Not safe for concurrent use.
type Attributor struct {
	lookup   DeviceLookup
	blocks   []event.Block // in arrival order, ≈ by CompleteNs
	blockBuf []event.Block // the array blocks is a window of (slide)
	partial  map[uint64]event.Block
	journals []event.Journal
	bios     []event.FlushBio // flush bios, by QueueNs
	dmbios   []event.DMBio    // bios of dm disks, by CompleteNs
	remaps   []event.BioRemap // by RemapNs
	// lower: dm disk -> the disks beneath it its remaps named (at most
	// maxLower each), kept for the run.
	lower    map[event.Dev][]event.Dev
	hosts    []FsyncRecord // attributed kernel-thread fsyncs, by EndNs
	hostBuf  []FsyncRecord // the array hosts is a window of (slide)
	backing  BackingLookup
	inflight map[uint32]uint64 // tid -> start of an fsync in flight
	latestNs uint64
	prunedNs uint64        // latestNs at the last prune
	sched    bool          // SetSched: split calls by scheduler state
	scheds   []event.Sched // in arrival order, ≈ by Ns
	schedBuf []event.Sched // one call's, reused

	// blocksOrder and hostsOrder: how far blocks (by CompleteNs) and
	// hosts (by EndNs) run out of order, for around's skew.
	blocksOrder, hostsOrder disorder

	// overEnters and overPartial count the enters and partial completions
	// not held past MaxInflight and MaxPartial (Overflow).
	overEnters, overPartial uint64

	// Per-call scratch and formatting caches: Attribute allocated ~30
	// times per fsync before them (BenchmarkAttributorFsync).
	reqs    []Request   // the requests of the call being attributed
	used    []int       // indexes into bios claimed by this call's flushes
	usedRm  []int       // indexes into remaps claimed by this call's dm bios
	all     []event.Dev // this call's disks and the disks beneath them
	sw      sweep       // its points slice is reused
	devs    map[event.Dev]string
	disks   map[event.Dev]diskNames
	reqFmts map[reqFmtKey]reqFmt
}

// diskNames caches, per filesystem device, the lookup's answer formatted
// for FsyncRecord (Disks is shared by the records: do not modify it).
type diskNames struct {
	devs  []event.Dev
	names []string
}

type reqFmtKey struct {
	op    event.Op
	flags event.ReqFlags
}

// reqFmt is a request's op and flags as JSON writes them; Flags is shared
// by every Request with the same op and flags: do not modify it.
type reqFmt struct {
	flags []string
	rwbs  string
}

// keepNs is how long events are kept when no fsync is in flight: it covers
// the skew between an fsync's start and its enter event's arrival.
const keepNs = 2e9

// pruneEveryNs spaces Attribute's prunes: a prune walks every retained
// event, so pruning on each fsync made Attribute O(2 s of events)
// (BenchmarkAttributorFsync, docs/performance.md).
const pruneEveryNs = 100e6

// inflightMaxNs drops an in-flight entry whose exit never came.
const inflightMaxNs = 120e9

// MaxInflight bounds the fsyncs held in flight (their enter seen, their
// exit not yet): one per thread, a few hundred on a busy host. An enter
// past it is counted (Overflow), not held: its call is attributed all
// the same from the events of the last keepNs, which covers any call
// shorter than that. A hostile capture of enters that never exit grew
// without end.
const MaxInflight = 1 << 16

// MaxPartial bounds the block requests held partly completed (a request
// completes in parts when the driver splits it; few are at once). A
// partial completion past it is counted (Overflow), not held: its
// request's final completion then misses those bytes. A hostile capture
// of requests that never complete grew without end.
const MaxPartial = 1 << 14

// NewAttributor returns an Attributor resolving devices with lookup.
func NewAttributor(lookup DeviceLookup) *Attributor {
	return &Attributor{lookup: lookup, partial: map[uint64]event.Block{}, inflight: map[uint32]uint64{},
		devs: map[event.Dev]string{}, disks: map[event.Dev]diskNames{}, reqFmts: map[reqFmtKey]reqFmt{},
		lower: map[event.Dev][]event.Dev{}}
}

// devString is d.String(), formatted once per device.
func (a *Attributor) devString(d event.Dev) string {
	s, ok := a.devs[d]
	if !ok {
		if len(a.devs) > 4096 {
			clear(a.devs) // bound the cache against a stream of bogus devices
		}
		s = d.String()
		a.devs[d] = s
	}
	return s
}

// diskStrings formats the lookup's disks of filesystem dev, reusing the
// last slice made for dev while the lookup answers the same.
func (a *Attributor) diskStrings(dev event.Dev, disks []event.Dev) []string {
	if len(disks) == 0 {
		return nil
	}
	c, ok := a.disks[dev]
	if ok && slices.Equal(c.devs, disks) {
		return c.names
	}
	c = diskNames{devs: slices.Clone(disks), names: make([]string, len(disks))}
	for i, d := range disks {
		c.names[i] = a.devString(d)
	}
	if len(a.disks) > 4096 {
		clear(a.disks)
	}
	a.disks[dev] = c
	return c.names
}

// reqFormat returns op and flags as REQ_ names and rwbs, made once per
// combination (a disk sees a handful).
func (a *Attributor) reqFormat(op event.Op, flags event.ReqFlags) reqFmt {
	k := reqFmtKey{op, flags}
	f, ok := a.reqFmts[k]
	if !ok {
		if len(a.reqFmts) > 4096 {
			clear(a.reqFmts)
		}
		f = reqFmt{flags: flags.Names(), rwbs: event.Rwbs(op, flags)}
		a.reqFmts[k] = f
	}
	return f
}

// Add records a non-fsync event: event.FsyncEnter, event.Block,
// event.FlushBio, event.DMBio, event.BioRemap, event.Journal, event.Sched,
// or event.KernelFsync (attributed at once and kept to nest under the
// stacked-device flush it served). Other values are ignored.
func (a *Attributor) Add(ev any) {
	switch e := ev.(type) {
	case event.KernelFsync:
		a.addKernelFsync(&e.Fsync)
	case event.FsyncEnter:
		a.addEnter(e)
	case event.Block:
		a.addBlock(&e)
	case event.FlushBio:
		a.addFlushBio(&e)
	case event.DMBio:
		a.addDMBio(&e)
	case event.BioRemap:
		a.addRemap(&e)
	case event.Journal:
		a.addJournal(&e)
	case event.Sched:
		a.addSched(&e)
	}
}

// AddEvent is Add of the event ev holds (tracer.FsyncTracer.Read's
// form, which costs no allocation per event); an fsync (KindFsync) is
// ignored, as by Add: pass ev.Fsync to Attribute.
func (a *Attributor) AddEvent(ev *event.Any) {
	switch ev.Kind {
	case event.KindKernelFsync:
		a.addKernelFsync(&ev.Fsync)
	case event.KindFsyncEnter:
		a.addEnter(ev.Enter)
	case event.KindBlock:
		b := ev.Block // addBlock sums partial completions into its copy
		a.addBlock(&b)
	case event.KindFlushBio:
		a.addFlushBio(&ev.FlushBio)
	case event.KindDMBio:
		a.addDMBio(&ev.DMBio)
	case event.KindBioRemap:
		a.addRemap(&ev.Remap)
	case event.KindJournal:
		a.addJournal(&ev.Journal)
	case event.KindSched:
		a.addSched(&ev.Sched)
	}
}

func (a *Attributor) addKernelFsync(f *event.Fsync) {
	rec := a.Attribute(*f)
	a.hostsOrder.add(rec.EndNs)
	a.hosts = slide(a.hosts, &a.hostBuf, rec)
}

func (a *Attributor) addEnter(e event.FsyncEnter) {
	a.see(e.StartNs)
	if _, ok := a.inflight[e.TID]; !ok && len(a.inflight) >= MaxInflight {
		a.overEnters++
		return
	}
	a.inflight[e.TID] = e.StartNs
}

// Overflow returns how many fsync enters and partial block completions
// were not held, past MaxInflight and MaxPartial.
func (a *Attributor) Overflow() (enters, partials uint64) { return a.overEnters, a.overPartial }

// addBlock keeps a final completion, with the bytes of the partial ones
// before it added to e.
func (a *Attributor) addBlock(e *event.Block) {
	a.see(e.CompleteNs)
	if !e.Final {
		p, ok := a.partial[e.Rq]
		if ok {
			e.Bytes += p.Bytes
		} else if len(a.partial) >= MaxPartial {
			a.overPartial++
			return
		}
		a.partial[e.Rq] = *e
		return
	}
	if p, ok := a.partial[e.Rq]; ok {
		e.Bytes += p.Bytes
		delete(a.partial, e.Rq)
	}
	a.appendBlock(*e)
	if len(a.blocks)%4096 == 0 {
		a.prune() // bound memory while no fsync comes
	}
}

func (a *Attributor) addFlushBio(e *event.FlushBio) {
	a.see(e.QueueNs)
	a.bios = append(a.bios, *e)
}

func (a *Attributor) addDMBio(e *event.DMBio) {
	a.see(e.CompleteNs)
	a.dmbios = append(a.dmbios, *e)
}

// maxLower bounds the disks remembered beneath one dm disk, and
// maxStacked the dm disks remembered (against a stream of bogus devices).
const (
	maxLower   = 8
	maxStacked = 1024
)

func (a *Attributor) addRemap(e *event.BioRemap) {
	a.see(e.RemapNs)
	a.remaps = append(a.remaps, *e)
	l := a.lower[e.Dev]
	if !slices.Contains(l, e.Target) && len(l) < maxLower {
		if l == nil && len(a.lower) >= maxStacked {
			clear(a.lower)
		}
		a.lower[e.Dev] = append(l, e.Target)
	}
}

func (a *Attributor) addJournal(e *event.Journal) {
	a.see(e.StartNs)
	a.see(e.EndNs)
	a.journals = append(a.journals, *e)
}

// appendBlock appends to blocks, whose window prune slides forward along
// blockBuf (slide).
func (a *Attributor) appendBlock(b event.Block) {
	a.blocksOrder.add(b.CompleteNs)
	a.blocks = slide(a.blocks, &a.blockBuf, b)
}

// slide appends v to win, a window that prune slides forward along the
// array *buf: when the window reaches the array's end while it fills at
// most half of it, the live events move back to the front instead of
// append growing a new array by a quarter. Each event is then copied
// about once, where append behind a sliding window allocated, cleared and
// copied the whole window every few thousand events (memclr and memmove
// led BenchmarkAttributorFsync's profile for blocks; for the host records
// on ext4 over a loop device, ~300 bytes each, 3% of the reader's CPU and
// most of its garbage: findings 29). Dead events past the window keep
// what they point to alive until overwritten: bounded by the array.
func slide[T any](win []T, buf *[]T, v T) []T {
	if len(win) == cap(win) {
		if len(win) <= cap(*buf)/2 {
			win = (*buf)[:copy((*buf)[:cap(*buf)], win)]
		} else {
			// Twice the window, so that the next time it fills at most half.
			*buf = make([]T, 0, 2*len(win)+64)
			win = append(*buf, win...)
		}
	}
	return append(win, v)
}

func (a *Attributor) see(ns uint64) {
	if ns > a.latestNs {
		a.latestNs = ns
	}
}

// Retained returns how many block and journal events are held; a bound on
// memory that benchmarks watch.
func (a *Attributor) Retained() int {
	return len(a.blocks) + len(a.journals) + len(a.partial) + len(a.bios) + len(a.hosts) + len(a.dmbios) + len(a.remaps)
}

// prune drops events that no fsync in flight or still to come can need.
func (a *Attributor) prune() {
	a.prunedNs = a.latestNs
	horizon := uint64(0)
	if a.latestNs > keepNs {
		horizon = a.latestNs - keepNs
	}
	for tid, start := range a.inflight {
		if a.latestNs > start && a.latestNs-start > inflightMaxNs {
			delete(a.inflight, tid)
			continue
		}
		if start < horizon {
			horizon = start
		}
	}
	a.blocks = dropBefore(a.blocks, horizon, func(b *event.Block) uint64 { return b.CompleteNs })
	j := 0
	for _, jw := range a.journals {
		end := jw.EndNs
		if end == 0 {
			end = jw.StartNs
		}
		if end >= horizon {
			a.journals[j] = jw
			j++
		}
	}
	a.journals = a.journals[:j]
	a.bios = dropBefore(a.bios, horizon, func(b *event.FlushBio) uint64 { return b.QueueNs })
	a.dmbios = dropBefore(a.dmbios, horizon, func(b *event.DMBio) uint64 { return b.CompleteNs })
	a.remaps = dropBefore(a.remaps, horizon, func(r *event.BioRemap) uint64 { return r.RemapNs })
	a.hosts = dropBefore(a.hosts, horizon, func(h *FsyncRecord) uint64 { return h.EndNs })
	a.pruneScheds(horizon)
}

// maxSkew is how far out of key order around allows an event to be: a
// little across CPUs, between the timestamp and the ring reservation.
const maxSkew = 10e6

// disorder tracks, for a buffer in arrival order, how far the events
// run back in key order: the most that any event's key was below the
// largest key added before it. It only grows, so it bounds the disorder
// of any window of the buffer.
type disorder struct{ top, back uint64 }

// add notes the key of the event appended.
func (d *disorder) add(k uint64) {
	if k >= d.top {
		d.top = k
	} else if d.top-k > d.back {
		d.back = d.top - k
	}
}

// skew is the skew around needs for the buffer: its disorder, at most
// maxSkew. Whenever the disorder is within maxSkew, around with it
// returns every event whose key lies in [from, to], as with maxSkew
// itself (events before lo have keys below from, events from hi on keys
// above to); past maxSkew it is maxSkew, as before. So the callers'
// exact checks see the same events while walking a window of the
// stream's own disorder instead of 20 ms (on ext4 over a loop device,
// ~1500 block events scanned per call; findings 29).
func (d *disorder) skew() uint64 { return min(d.back, maxSkew) }

// around returns the part of s, events in arrival order (≈ by key: a
// little out of order across CPUs, between timestamp and ring
// reservation), whose key may lie in [from, to]: from the first within
// skew before from to the last within skew after to. Callers check
// [from, to] exactly; only the events near it are looked at.
func around[T any](s []T, from, to uint64, key func(*T) uint64) []T {
	return aroundSkew(s, from, to, maxSkew, key)
}

// aroundSkew is around with the skew given (a disorder's skew).
func aroundSkew[T any](s []T, from, to, skew uint64, key func(*T) uint64) []T {
	lo := sort.Search(len(s), func(i int) bool { return key(&s[i])+skew >= from })
	hi := lo
	for hi < len(s) && key(&s[hi]) <= to+skew {
		hi++
	}
	return s[lo:hi]
}

// dropBefore returns s without its leading elements whose key is before
// horizon (s is in arrival order, ≈ by key).
func dropBefore[T any](s []T, horizon uint64, key func(*T) uint64) []T {
	i := 0
	for i < len(s) && key(&s[i]) < horizon {
		i++
	}
	return s[i:]
}
