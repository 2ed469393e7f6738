// Request roles: which block requests and dm bios an fsync waited on, and
// as what (data, journal or flush; the package doc's rule), with the
// flushes counted and the flush bio each flush request was asked by.

package analysis

import (
	"slices"
	"strings"

	"github.com/etcdscope/etcdscope/event"
)

// Request roles.
const (
	RoleData    = "data"
	RoleJournal = "journal"
	RoleFlush   = "flush"
)

// countFlush counts a flush-role request or dm bio in rec: a flush (an
// empty flush or a REQ_PREFLUSH one) or, for a write with REQ_FUA only
// that reached the disk (issued), a FUA write. A FUA write completes a
// second time, not issued, when its flush sequence ends: not another.
func countFlush(rec *FsyncRecord, op event.Op, flags event.ReqFlags, issued bool) {
	switch {
	case op == event.OpFlush || flags&event.ReqPreflush != 0:
		rec.Flushes++
	case issued:
		rec.FUAWrites++
	}
}

// dmRoleOf classifies a dm bio for an fsync by thread tid as roleOf does
// a request.
func dmRoleOf(b *event.DMBio, tid uint32) string {
	return role(b.IsFlush(), b.Op, b.Flags, b.Comm, b.TID, tid)
}

// flushAsked returns the queue time of the latest flush bio on disk queued
// in [from, issue] that no flush request of this call has claimed yet
// (a.used), and claims it, so two flush requests never claim one bio.
// Latest by queue time, not by arrival: two CPUs' flush bios may reach
// the ring in the other order (bpf/kpart.h picks the same one).
func (a *Attributor) flushAsked(disk event.Dev, from, issue uint64) (uint64, bool) {
	best := -1
	for i := len(a.bios) - 1; i >= 0; i-- {
		q := a.bios[i].QueueNs
		if q > issue || a.bios[i].Dev != disk || slices.Contains(a.used, i) {
			continue
		}
		if q < from {
			break
		}
		if best < 0 || q > a.bios[best].QueueNs {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	a.used = append(a.used, best)
	return a.bios[best].QueueNs, true
}

func sectorOf(b *event.Block) uint64 {
	if b.Op == event.OpFlush {
		return 0
	}
	return b.Sector
}

// roleOf classifies a request for an fsync by thread tid ("" = not
// counted), following the package doc.
func roleOf(b *event.Block, tid uint32) string {
	if !b.IsFlush() && b.InsertNs == 0 && b.IssueNs == 0 {
		// Start not seen (before tracing, or the second completion the
		// flush state machine gives a data request): no time to place.
		return ""
	}
	return role(b.IsFlush(), b.Op, b.Flags, b.Comm, b.TID, tid)
}

// role is the role of a request or dm bio (flush: it persists the disk's
// cache; submitter: the thread that inserted, issued or queued it) for an
// fsync by thread tid: any flush; a write with REQ_META or from a jbd2
// thread is journal; another write is data when the caller submitted it.
func role(flush bool, op event.Op, flags event.ReqFlags, comm string, submitter, tid uint32) string {
	switch {
	case flush:
		return RoleFlush
	case op != event.OpWrite:
		return ""
	case flags&event.ReqMeta != 0, strings.HasPrefix(comm, "jbd2/"):
		return RoleJournal
	case submitter == tid:
		return RoleData
	}
	return ""
}
