package commit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/etcdscope/etcdscope/analysis/stats"
)

// Report aggregates Writes: p50/p99 of the total and of each part, the
// quorum's deciding vote and how often, and the followers' ack times.
// The zero value is not ready: use NewReport.
type Report struct {
	Writes     int
	Incomplete int // writes with something Missing (counted in the parts they have)
	Batched    int // writes whose WAL Save held more than one entry
	Roles      map[Role]int
	Total      stats.Series
	Parts      map[string]*stats.Series
	WALSync    stats.Series // the fdatasync inside the WAL append
	// WALCause: what the writes' WAL fdatasyncs waited on, from the
	// fsync tracer's split of each call (JoinSyncs, AddCauses); zero
	// when that tracer did not run.
	WALCause CauseTotals
	Deciders map[uint64]int           // member id (LocalVote: the leader's WAL) -> writes it decided
	AckAfter map[uint64]*stats.Series // follower -> Send-to-ack (RTT + its WAL append)
	// ClientPutNs: the put latency a client measured (--load), when given.
	ClientPutNs stats.Series
}

// NewReport returns an empty report.
func NewReport() *Report {
	return &Report{Roles: map[Role]int{}, Parts: map[string]*stats.Series{}, Deciders: map[uint64]int{}, AckAfter: map[uint64]*stats.Series{}}
}

// Add counts one write.
func (r *Report) Add(w *Write) {
	r.Writes++
	r.Roles[w.Role]++
	if len(w.Missing) > 0 {
		r.Incomplete++
	}
	if w.BatchEntries > 1 {
		r.Batched++
	}
	r.Total.Add(w.TotalNs())
	for _, p := range PartOrder {
		v, ok := w.PartsNs[p]
		if !ok {
			continue
		}
		s := r.Parts[p]
		if s == nil {
			s = &stats.Series{}
			r.Parts[p] = s
		}
		s.Add(v)
	}
	if w.WALSyncNs >= 0 && w.PartsNs != nil {
		if _, ok := w.PartsNs[PartWALAppend]; ok {
			r.WALSync.Add(w.WALSyncNs)
		}
	}
	if w.DeciderKnown {
		r.Deciders[w.Decider]++
	}
	for _, a := range w.Acks {
		if len(r.AckAfter) >= maxFollow && r.AckAfter[a.Member] == nil {
			continue
		}
		s := r.AckAfter[a.Member]
		if s == nil {
			s = &stats.Series{}
			r.AckAfter[a.Member] = s
		}
		s.Add(a.AfterSendNs)
	}
}

// AddCauses counts the writes' WAL fdatasync causes (JoinSyncs' result).
func (r *Report) AddCauses(cs []*SyncCause) {
	for _, c := range cs {
		r.WALCause.Add(c)
	}
}

// Names maps member ids to names for output; a missing id prints in hex
// (etcd's own form, as in its peer metrics' To label).
type Names map[uint64]string

// Of returns the member's name, "the leader's WAL" for LocalVote.
func (n Names) Of(id uint64) string {
	if id == LocalVote {
		return "local WAL"
	}
	if s, ok := n[id]; ok && s != "" {
		return s + " (" + strconv.FormatUint(id, 16) + ")"
	}
	return strconv.FormatUint(id, 16)
}

// ClusterState is what the verdicts need to know of the cluster beyond
// the writes: the members and which answer.
type ClusterState struct {
	Voters int      // voting members in the member list
	Down   []uint64 // members in the list that sent no ack while traced (leader only)
	Names  Names
}

// Verdicts says what the writes waited on, in sentences an operator acts
// on: the dominant part, the deciding vote and why, and what to change.
func (r *Report) Verdicts(cs ClusterState) []string {
	if r.Writes == 0 {
		return []string{"no write was traced: is anything writing to this member? (--load N/s drives a test load)"}
	}
	ms := func(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 2, 64) + " ms" }
	var out []string
	total := r.Total.Summary()
	// The dominant part by mean: its share of the summed means.
	var dom string
	var domMean, sum float64
	for _, p := range PartOrder {
		if s := r.Parts[p]; s != nil {
			m := s.Summary().Mean()
			sum += m
			if m > domMean {
				dom, domMean = p, m
			}
		}
	}
	share := 0.0
	if sum > 0 {
		share = 100 * domMean / sum
	}
	walP50 := int64(0)
	if s := r.Parts[PartWALAppend]; s != nil {
		walP50 = s.Summary().P50
	}
	// On a follower, forward (to the leader and back with the entry) and
	// quorum_wait (the leader's quorum round and its commit notice) are
	// both the round trip to the leader, about one RTT each: which of the
	// two is larger is noise, and a follower sees no deciding vote. Their
	// sum is what the write waits on.
	follower := r.Roles[RoleFollower] > r.Writes/2
	var fwdMean float64
	if follower {
		for _, p := range []string{PartForward, PartQuorumWait} {
			if s := r.Parts[p]; s != nil {
				fwdMean += s.Summary().Mean()
			}
		}
		if fwdMean > domMean {
			dom, domMean = PartForward, fwdMean
			share = 100 * domMean / sum
		}
	}
	switch dom {
	case PartWALAppend:
		out = append(out, r.walVerdict(ms(walP50), ms(total.P50), ms(r.WALSync.Summary().P50), share))
	case PartQuorumWait:
		id, n := r.topDecider(false)
		line := fmt.Sprintf("writes wait on the quorum (%.0f%% of the time): the deciding vote is %s in %d of %d writes", share, cs.Names.Of(id), n, r.Writes)
		if s := r.AckAfter[id]; s != nil {
			line += fmt.Sprintf(" (%s from send to its ack: RTT + its WAL fdatasync, p50)", ms(s.Summary().P50))
		}
		if len(cs.Down) > 0 {
			var names []string
			for _, d := range cs.Down {
				names = append(names, cs.Names.Of(d))
			}
			line += fmt.Sprintf("; it is a deciding vote because %s sent no ack (down or partitioned)", strings.Join(names, ", "))
		}
		out = append(out, line)
	case PartForward:
		p50 := func(p string) string {
			if s := r.Parts[p]; s != nil {
				return ms(s.Summary().P50)
			}
			return "-"
		}
		if follower {
			out = append(out, fmt.Sprintf("writes wait on forwarding to the leader (%.0f%% of the time: forward p50 %s to the leader and back with the entry, then quorum_wait p50 %s for the leader's quorum and its commit notice): this member is a follower; point writers at the leader, or `etcdctl move-leader` to this member if it is closest to the writers",
				share, p50(PartForward), p50(PartQuorumWait)))
			break
		}
		out = append(out, fmt.Sprintf("writes wait on forwarding to the leader (%.0f%% of the time, p50 %s): this member is a follower; point writers at the leader, or `etcdctl move-leader` to this member if it is closest to the writers",
			share, p50(PartForward)))
	case PartApply, PartCommitToApply:
		out = append(out, fmt.Sprintf("writes wait on apply (%s, %.0f%% of the time): the backend (bbolt) commit or a long apply queue; check etcd_disk_backend_commit_duration_seconds and large range/txn requests", dom, share))
	case PartPropose, PartReturn:
		out = append(out, fmt.Sprintf("writes wait in etcd's own scheduling (%s, %.0f%% of the time): the CPU is busy; check the member's CPU and GOMAXPROCS", dom, share))
	}
	// A CPU-starved member stretches every part; when the WAL append is
	// not the largest, its fdatasync calls still show the starving.
	if top, ok := r.WALCause.Top(); ok && top == CauseCPUWait && dom != PartWALAppend {
		out = append(out, fmt.Sprintf("etcd waits for a CPU: its WAL fdatasync calls (%d split by the fsync tracer) spent %.0f%% of their time runnable with no I/O in flight (run-queue wait or the cgroup's CPU throttling): check the member's CPU quota and what else runs on its CPUs",
			r.WALCause.Joined, 100*r.WALCause.Share(CauseCPUWait)))
	}
	// The deciding vote in general (leader with followers).
	if id, n := r.topDecider(true); n > 0 && dom != PartQuorumWait {
		out = append(out, fmt.Sprintf("quorum's deciding vote: %s in %d of %d writes", cs.Names.Of(id), n, r.Writes))
	}
	if r.Batched > 0 {
		out = append(out, fmt.Sprintf("%d of %d writes shared a WAL append with other writes (one Raft Ready): their WAL parts are the batch's", r.Batched, r.Writes))
	}
	if r.Incomplete > 0 {
		out = append(out, fmt.Sprintf("%d of %d writes could not be followed through every step (see \"missing\" in --output json)", r.Incomplete, r.Writes))
	}
	return out
}

// walVerdict says what the WAL append waited on: by the fsync tracer's
// split of its fdatasync calls where it ran (the disk's layers, or a CPU:
// a thread runnable inside the syscall with no I/O in flight), else the
// disk, pointing at `etcdscope fsync`.
func (r *Report) walVerdict(walP50, totalP50, syncP50 string, share float64) string {
	head := fmt.Sprintf("WAL append p50 %s of %s per write (fdatasync p50 %s, %.0f%% of the time)", walP50, totalP50, syncP50, share)
	top, ok := r.WALCause.Top()
	if !ok {
		return "writes wait on the local disk: " + head + ": run `etcdscope fsync --comm etcd` for its device flush, journal and queue layers"
	}
	c := &r.WALCause
	pct := func(k Cause) string { return fmt.Sprintf("%.0f%%", 100*c.Share(k)) }
	split := fmt.Sprintf("(*WAL).sync of %d writes split per call (the fsync tracer's layers, the thread's scheduler states): disk %.0f%% (device flush %s, journal %s, block queue %s, data writeback %s, write(2) waits %s), waiting for a CPU %s, running in the kernel %s, blocked otherwise %s, outside syscalls (Go) %s",
		c.Joined, 100*c.DiskShare(), pct(CauseDeviceFlush), pct(CauseJournal), pct(CauseBlockQueue), pct(CauseDataWriteback), pct(CauseWriteWait), pct(CauseCPUWait), pct(CauseRunning), pct(CauseBlocked), pct(CauseOutside))
	switch {
	case top.Disk():
		return fmt.Sprintf("writes wait on the local disk, most on its %s: %s; %s", strings.ReplaceAll(string(top), "_", " "), head, split)
	case top == CauseCPUWait:
		return fmt.Sprintf("writes wait for a CPU, not the disk: %s; %s: runnable with no I/O in flight, in fdatasync or around it (Linux 6.18+ throttles on the return to user space), is run-queue wait or the cgroup's CPU throttling: check the member's CPU quota (cpu.max or cpu.cfs_quota_us; nr_throttled in cpu.stat) and what else runs on its CPUs", head, split)
	case top == CauseRunning:
		return fmt.Sprintf("writes wait on the kernel's own work in the syscalls, on a CPU with no I/O in flight: %s; %s", head, split)
	case top == CauseBlocked:
		return fmt.Sprintf("writes wait in the syscalls asleep on something other than the disk's I/O (a lock, a page fault, memory reclaim): %s; %s", head, split)
	case top == CauseOutside:
		return fmt.Sprintf("writes wait in (*WAL).sync outside its syscalls, running Go code: %s; %s", head, split)
	}
	return fmt.Sprintf("writes wait in the syscalls with no I/O in flight (the scheduler was not followed): %s; %s", head, split)
}

// topDecider returns the vote that decided most writes; with anyVote the
// local WAL counts too, otherwise only followers.
func (r *Report) topDecider(anyVote bool) (uint64, int) {
	ids := make([]uint64, 0, len(r.Deciders))
	for id := range r.Deciders {
		if anyVote || id != LocalVote {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var best uint64
	n := 0
	for _, id := range ids {
		if r.Deciders[id] > n {
			best, n = id, r.Deciders[id]
		}
	}
	if len(r.Deciders) == 1 && best == LocalVote && !anyVote {
		return 0, 0
	}
	return best, n
}
