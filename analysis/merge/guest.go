package merge

import (
	"errors"
	"fmt"
	"sort"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/jsonl"
)

// MaxGuestCalls bounds the guest fsync calls a GuestIndex holds, and
// MaxGuestFlushes their flush requests: at GuestCallBytes and
// GuestFlushBytes each, 230 MiB live at both caps (a 2 GB recording). A
// minute of etcd fsyncs at 1,000 a second is 60,000 calls: the cap is 17
// minutes of that, 4 hours at a more usual 70 a second.
const (
	MaxGuestCalls   = 1 << 20
	MaxGuestFlushes = 2 << 20
)

// GuestCallBytes and GuestFlushBytes are what a merge holds live per
// guest fsync call and per guest flush request, bytes: the call's index
// entry (guestCall 32), its place in the flush lists (4) and its wall
// time for the summary (8); the flush's index entry (guestFlush 16), the
// fit's pair (gflush 64 and its host slice 8) and its place in the lists
// (4). Not the call itself, which is read again from the recording when
// its merged record is written (about 2 KB of JSON per call). The heap
// grows to up to twice what is live before the collector runs (GOGC).
const (
	GuestCallBytes  = 44
	GuestFlushBytes = 92
)

// ErrGuestTooLarge is returned (wrapped, with the count) by
// GuestIndex.Add past MaxGuestCalls or MaxGuestFlushes.
var ErrGuestTooLarge = errors.New("a guest recording larger than merge holds")

// guestCall is one guest fsync call on the merged device: its start (the
// order of the merged records), where it is in the recording, and its
// flush requests, flushes[first:first+n].
type guestCall struct {
	startNs  uint64
	at       jsonl.Span
	first, n uint32
}

// guestFlush is one guest flush request: issue and completion, guest ns.
type guestFlush struct{ issue, complete uint64 }

// GuestIndex is the first pass of a merge over a guest recording: of each
// fsync call on the merged device, what the clock fit needs (its flush
// requests) and where to read the call again (its Span), not the call:
// GuestCallBytes per call and GuestFlushBytes per flush request, however
// long its record. GuestIndex.Merge is the second pass.
type GuestIndex struct {
	opt     Options
	calls   []guestCall
	flushes []guestFlush
	devs    map[string]bool
	// moreDevs counts the records on devices past MaxGuestDevices names.
	moreDevs int
}

// MaxGuestDevices bounds the device names a guest recording without
// --guest-dev is indexed by (each up to a record's length): a real guest
// has a few disks; past it, names are counted, not kept.
const MaxGuestDevices = 64

// NewGuestIndex returns an empty index of the calls opt.GuestDev selects.
func NewGuestIndex(opt Options) *GuestIndex {
	return &GuestIndex{opt: opt, devs: map[string]bool{}}
}

// Add indexes guest record r, found at at in the recording; it fails with
// ErrGuestTooLarge past MaxGuestCalls or MaxGuestFlushes.
func (g *GuestIndex) Add(r *analysis.FsyncRecord, at jsonl.Span) error {
	if !g.devs[r.DevName] {
		if len(g.devs) < MaxGuestDevices {
			g.devs[r.DevName] = true
		} else {
			g.moreDevs++
		}
	}
	if g.opt.GuestDev != "" && r.DevName != g.opt.GuestDev && r.Dev != g.opt.GuestDev {
		return nil
	}
	c := guestCall{startNs: r.StartNs, at: at, first: uint32(len(g.flushes))}
	for _, q := range r.Requests {
		if q.Role != analysis.RoleFlush || q.NotIssued || q.IssueNs == 0 || q.CompleteNs < q.IssueNs {
			continue
		}
		if len(g.flushes) >= MaxGuestFlushes {
			return fmt.Errorf("%w: more than %d flush requests on the merged device", ErrGuestTooLarge, MaxGuestFlushes)
		}
		g.flushes = append(g.flushes, guestFlush{q.IssueNs, q.CompleteNs})
		c.n++
	}
	if len(g.calls) >= MaxGuestCalls {
		return fmt.Errorf("%w: more than %d fsync calls on the merged device", ErrGuestTooLarge, MaxGuestCalls)
	}
	g.calls = append(g.calls, c)
	return nil
}

// Devices returns the device names (dev_name) of the records added, sorted
// (Options.GuestDev's and the others), at most MaxGuestDevices of them;
// more reports whether records on other devices were added too.
func (g *GuestIndex) Devices() (names []string, more bool) {
	for d := range g.devs {
		names = append(names, d)
	}
	sort.Strings(names)
	return names, g.moreDevs > 0
}

// Calls is how many calls on the merged device were indexed.
func (g *GuestIndex) Calls() int { return len(g.calls) }

// pairs sorts the calls by start and returns their flush requests as the
// fit's pairs, by issue, and, for each call i, the indices of its pairs,
// byCall[callAt[i]:callAt[i+1]].
func (g *GuestIndex) pairs() (gs []gflush, callAt []int32, byCall []int32) {
	// sort.Slice is not stable: the same comparisons on a slice of the same
	// length in the same order make the same permutation, so the calls come
	// out in the order Merge's records did when it sorted whole records.
	sort.Slice(g.calls, func(i, j int) bool { return g.calls[i].startNs < g.calls[j].startNs })
	gs = make([]gflush, 0, len(g.flushes))
	for i, c := range g.calls {
		for _, f := range g.flushes[c.first : c.first+c.n] {
			gs = append(gs, gflush{fsync: i, issue: f.issue, complete: f.complete})
		}
	}
	g.flushes = nil
	sort.Slice(gs, func(i, j int) bool { return gs[i].issue < gs[j].issue })
	callAt = make([]int32, len(g.calls)+1)
	for i := range gs {
		callAt[gs[i].fsync+1]++
	}
	for i := range g.calls {
		callAt[i+1] += callAt[i]
	}
	byCall = make([]int32, len(gs))
	next := append([]int32(nil), callAt[:len(g.calls)]...)
	for i := range gs {
		f := gs[i].fsync
		byCall[next[f]] = int32(i)
		next[f]++
	}
	return gs, callAt, byCall
}
