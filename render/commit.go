package render

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/analysis/stats"
)

// CommitRun is what a run of `etcdscope commit` found, as its table and
// its JSON summary record show it (the CLI fills it from the pipeline's
// CommitResult).
type CommitRun struct {
	PID      int    // the traced etcd
	Source   string // commit.SourceUprobes, or commit.SourceModel when etcd could not be probed
	ProbeErr error  // why etcd could not be probed (Source is model)
	// EtcdVersion is the traced member's etcd version ("3.4.23"; ""
	// when unknown: no --etcd-endpoints).
	EtcdVersion string
	Report      *commit.Report
	Cluster     commit.ClusterState
	Role        commit.Role // "" when unknown
	LocalID     uint64      // commit.LocalVote when unknown
	// Unavailable: the parts of a write the probes cannot show, and why.
	Unavailable  []analysis.Unavailable
	Lost, Missed uint64
	Dropped      int
	// SampleEvery: 1 write in N was followed; WritesSeen and
	// WritesSampled: the writes the kernel saw, and those it followed.
	SampleEvery               uint32
	WritesSeen, WritesSampled uint64
	WALSyncs                  stats.Summary // every (*WAL).sync traced
	Model                     *commit.ModelResult
	ModelErr                  error
	// ModelScrapes: per member, the scrape the model's numbers of it end
	// on (the end scrape, else the latest from during the run).
	ModelScrapes []commit.ModelScrape
	Target       commit.Target
	Load         *CommitLoad // nil without --load
	// ClientOutsideNs: per load put paired with its traced write, the
	// client's time minus the server's.
	ClientOutsideNs stats.Summary
	// SyncCalls, SyncLost, SyncMissed: etcd's fsync calls the fsync
	// tracer split, its lost events and missed probe runs.
	SyncCalls            int
	SyncLost, SyncMissed uint64
}

// CommitLoad is the outcome of the built-in put load (--load).
type CommitLoad struct {
	Prefix       string
	Puts, Errors int
	// ClientNs: each put as the client timed it; GetNs, IdleGetNs: the
	// serializable get right after each put, and from idle.
	ClientNs, GetNs, IdleGetNs stats.Summary
}

// CommitTable writes the table of `etcdscope commit` through a Terminal,
// what a user reads first on top: the run's counts, then the verdicts,
// then the parts' table, the load, the model and the rest they rest on.
// Member names come from etcd's member list, and etcd's messages from
// etcd.
func CommitTable(w io.Writer, run *CommitRun) error {
	term := NewTerminal(w)
	commitTable(term, run)
	return term.Flush()
}

func commitTable(w io.Writer, run *CommitRun) {
	rep, names := run.Report, run.Cluster.Names
	role := string(run.Role)
	if role == "" {
		role = "role unknown (give --etcd-endpoints)"
	}
	// Without --etcd-endpoints the member and the cluster are unknown: say
	// so rather than print the local-vote label and "of 0"; one voter is
	// "a one-member cluster", not "leader of 1".
	member, of := "unknown", ""
	if run.LocalID != commit.LocalVote {
		member = names.Of(run.LocalID)
	}
	switch {
	case run.Cluster.Voters == 1:
		of = " of a one-member cluster"
	case run.Cluster.Voters > 1:
		of = fmt.Sprintf(" of %d", run.Cluster.Voters)
	}
	fmt.Fprintf(w, "etcdscope commit: pid %d, member %s, %s%s; source: %s\n", run.PID, member, role, of, run.Source)
	model := run.Source == commit.SourceModel
	if model {
		// No probe ran: no write counts, table or verdicts, which would
		// read as zeros measured; only what the model knows.
		version := "etcd"
		if run.EtcdVersion != "" {
			version = "etcd " + run.EtcdVersion
		}
		fmt.Fprintf(w, "no write is split: %s, pid %d: %v\n", version, run.PID, run.ProbeErr)
		fmt.Fprintln(w, "  showing etcd's metrics only (this etcdscope follows the writes of v3.4, v3.5 and v3.6 on amd64)")
	} else {
		fmt.Fprintf(w, "%s traced, %s, %s, %s not followed (failed or dropped)\n", counted(int(rep.Writes), "write"), counted(int(run.Lost), "lost event"),
			counted(int(run.Missed), "missed probe run"), counted(int(run.Dropped), "write"))
		if run.SampleEvery > 1 {
			fmt.Fprintf(w, "sampled: 1 write in %d (%d of the %d writes seen)\n", run.SampleEvery, run.WritesSampled, run.WritesSeen)
		}
	}
	// What a user reads first: the counts, whether etcd exited or stopped
	// under the run, then the verdicts (the cause and its number); the
	// table and the rest they rest on come after.
	commitTarget(w, run.Target)
	if !model {
		for _, v := range run.Report.Verdicts(run.Cluster) {
			t := commitVerdict(v, run.Cluster.Names)
			fmt.Fprintf(w, "verdict: %s\n", t.line)
			for _, m := range t.more {
				fmt.Fprintf(w, "  %s\n", m)
			}
		}
		for _, u := range run.Unavailable {
			Unavailable(w, u)
		}
	}
	if rep.Writes > 0 {
		commitParts(w, run)
	}
	if l := run.Load; l != nil {
		fmt.Fprintf(w, "load: %s (%s) under %s; client-side put latency %s\n", counted(l.Puts, "put"), counted(l.Errors, "error"), l.Prefix, p50p99(l.ClientNs))
		o := run.ClientOutsideNs
		if !model {
			if o.Count > 0 {
				fmt.Fprintf(w, "  server-side write p50 %.3f ms; per put, the client's time minus the server's (client, gRPC, transport): p50 %.3f ms over %s\n",
					float64(rep.Total.Summary().P50)/1e6, float64(o.P50)/1e6, counted(int(o.Count), "paired put"))
			} else {
				fmt.Fprintln(w, "  no put was paired with its traced write: the client's time minus the server's was not measured")
			}
		}
		fmt.Fprintf(w, "  a serializable get's round trip p50 %s warm, %s from idle\n", measuredMs(l.GetNs), measuredMs(l.IdleGetNs))
	}
	if m := run.Model; m != nil && !model && rep.Writes > 0 {
		// The writes were split: the model's own vote and parts (means of
		// etcd's metrics, the prober's RTT as network) would read as a
		// second answer to what the table measured; only its total, to
		// compare. The JSON summary keeps the whole model.
		fmt.Fprintf(w, "model (etcd's metrics alone, the fallback without probes): expected %.3f ms a write, %.3f ms measured (mean); the table above splits it: %s\n",
			float64(m.ExpectedNs)/1e6, rep.Total.Summary().Mean()/1e6, commitModelDoc)
		if modelSinceStart(m) {
			fmt.Fprintln(w, "  its RTT is etcd's mean since it started: the run held no prober sample (etcd takes one per 30 s)")
		}
	} else if m != nil {
		fmt.Fprintf(w, "model (kernel-free, from etcd's metrics over the run): expected %.3f ms per write", float64(m.ExpectedNs)/1e6)
		if m.DeciderKnown {
			fmt.Fprintf(w, ", deciding vote %s", names.Of(m.Decider))
		}
		fmt.Fprintln(w)
		for _, p := range commit.PartOrder {
			if ms, ok := m.Parts[p]; ok {
				fmt.Fprintf(w, "  %-12s %8.3f ms  from %s\n", p, float64(ms.Ns)/1e6, MeasureSource(ms))
			}
		}
	} else if run.ModelErr != nil {
		fmt.Fprintf(w, "model: not computed: %v\n", run.ModelErr)
	}
	modelScrapes(w, run.ModelScrapes, names)
}

// commitParts writes the parts' table of a run with writes, the deciding
// votes, each follower's ack time, the fsync tracer's split of the WAL
// fdatasyncs and the batched writes.
func commitParts(w io.Writer, run *CommitRun) {
	rep, names := run.Report, run.Cluster.Names
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "part\tcount\tp50 ms\tp99 ms\tmean ms\tshare\t")
	var sum float64
	for _, p := range commit.PartOrder {
		if s := rep.Parts[p]; s != nil {
			sum += s.Summary().Mean()
		}
	}
	row := func(name string, s stats.Summary, share string) {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%s\t\n", name, s.Count, float64(s.P50)/1e6, float64(s.P99)/1e6, s.Mean()/1e6, share)
	}
	row("total", rep.Total.Summary(), "100.0%")
	for _, p := range commit.PartOrder {
		s := rep.Parts[p]
		if s == nil {
			continue
		}
		sm := s.Summary()
		row(p, sm, fmt.Sprintf("%.1f%%", 100*sm.Mean()/max(sum, 1)))
		if p == commit.PartWALAppend {
			row("  of which write+fdatasync", rep.WALSync.Summary(), "")
			if f := rep.WALFdatasync.Summary(); f.Count > 0 {
				row("    of which fdatasync", f, "")
			}
		}
	}
	tw.Flush()
	if len(rep.Deciders) > 0 {
		var parts []string
		for id, n := range rep.Deciders {
			parts = append(parts, fmt.Sprintf("%s %d (%.0f%%)", names.Of(id), n, 100*float64(n)/float64(rep.Writes)))
		}
		slices.Sort(parts)
		fmt.Fprintf(w, "quorum's deciding vote: %s\n", strings.Join(parts, ", "))
	}
	// One line a follower, by the name printed (then by id).
	for _, id := range byName(names, rep.AckAfter) {
		sm := rep.AckAfter[id].Summary()
		fmt.Fprintf(w, "ack of %s after send (RTT + its WAL append): p50 %.3f ms, p99 %.3f ms (%d acks)\n", names.Of(id), float64(sm.P50)/1e6, float64(sm.P99)/1e6, sm.Count)
	}
	if c := rep.WALCause; c.Joined+c.Unjoined > 0 {
		fmt.Fprintf(w, "fsync tracer: %d of etcd's fsync calls split, %s, %s\n", run.SyncCalls, counted(int(run.SyncLost), "lost event"), counted(int(run.SyncMissed), "missed probe run"))
		fmt.Fprintf(w, "  %d of %d writes' WAL syncs joined to their fdatasync call:", c.Joined, c.Joined+c.Unjoined)
		for _, k := range commit.CauseOrder {
			if _, ok := c.Ns[k]; ok {
				fmt.Fprintf(w, " %s %.1f%%", k, 100*c.Share(k))
			}
		}
		fmt.Fprintln(w)
	}
	if rep.Batched > 0 {
		fmt.Fprintf(w, "note: %d writes shared a WAL append (one Raft Ready): the WAL parts are per batch for those\n", rep.Batched)
	}
}

// byName returns the members of m sorted by the name names prints for
// them, then by id.
func byName[V any](names commit.Names, m map[uint64]V) []uint64 {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uint64) int { return cmp.Or(strings.Compare(names.Of(a), names.Of(b)), cmp.Compare(a, b)) })
	return ids
}

// commitTarget says when the traced process exited or was stopped during
// the run (nothing when neither).
func commitTarget(w io.Writer, t commit.Target) {
	if t.Exited {
		fmt.Fprintf(w, "etcd pid %d exited %.1f s into the run: the run stopped there\n", t.PID, float64(t.ExitedAfterNs)/1e9)
	}
	if len(t.Stops) == 0 {
		return
	}
	var parts []string
	for _, s := range t.Stops {
		p := fmt.Sprintf("%.1f s from %.1f s", float64(s.Ns)/1e9, float64(s.AfterNs)/1e9)
		if s.Ongoing {
			p += " (still stopped at the end)"
		}
		parts = append(parts, p)
	}
	fmt.Fprintf(w, "etcd pid %d was stopped (SIGSTOP or a debugger) for %.1f s of the run: %s; writes made then waited until it resumed\n", t.PID, float64(t.StoppedNs())/1e9, strings.Join(parts, ", "))
}

// CommitSummary returns the run's JSON summary record (commit/v2), its
// verdicts worded as the table words them, each with its numbers
// (verdict_evidence).
func CommitSummary(run *CommitRun) commit.SummaryRecord {
	s := run.Report.Summary()
	s.Source, s.LostEvents, s.Missed, s.Dropped = run.Source, run.Lost, run.Missed, run.Dropped
	s.EtcdVersion = run.EtcdVersion
	s.WritesSeen, s.WritesSampled, s.SampleEvery = run.WritesSeen, run.WritesSampled, run.SampleEvery
	s.Model, s.Unavailable = commitModel(run.Model), run.Unavailable
	if run.Model == nil && run.ModelErr != nil {
		s.ModelNotComputed = run.ModelErr.Error()
	}
	s.ModelScrapes = run.ModelScrapes
	s.FsyncCalls, s.FsyncLost, s.FsyncMissed = run.SyncCalls, run.SyncLost, run.SyncMissed
	s.Verdicts = []string{}
	if run.Source != commit.SourceModel { // else no write was split: the model and `unavailable` say what is known
		for _, v := range run.Report.Verdicts(run.Cluster) {
			s.Verdicts = append(s.Verdicts, commitVerdict(v, run.Cluster.Names).line)
			s.VerdictEvidence = append(s.VerdictEvidence, v.Evidence())
		}
	}
	t := run.Target
	s.Target = &t
	if l := run.Load; l != nil {
		// A summary of no sample is unknown, not 0: left out.
		s.ClientGetNs, s.ClientIdleGetNs, s.ClientOutsideNs = sampled(l.GetNs), sampled(l.IdleGetNs), sampled(run.ClientOutsideNs)
	}
	ws := run.WALSyncs
	s.WALSyncsNs = &ws
	return s
}

// CommitVerdicts words the report's verdicts (commit.Report.Verdicts),
// one line each, in their order: what the writes waited on, then what
// qualifies it. The table prints each with its indented details (the
// split behind it, what to check); the numbers of those details are the
// summary's own fields.
func CommitVerdicts(rep *commit.Report, cs commit.ClusterState) []string {
	var out []string
	for _, v := range rep.Verdicts(cs) {
		out = append(out, commitVerdict(v, cs.Names).line)
	}
	return out
}

// CommitVerdictBlocks is CommitVerdicts with each verdict's details (indented lines)
// after its line, as the table prints them.
func CommitVerdictBlocks(rep *commit.Report, cs commit.ClusterState) []string {
	var out []string
	for _, v := range rep.Verdicts(cs) {
		t := commitVerdict(v, cs.Names)
		out = append(out, strings.Join(append([]string{t.line}, t.more...), "\n  "))
	}
	return out
}

// verdictText is one verdict worded: its line (the cause and its number)
// and the detail lines the table indents under it.
type verdictText struct {
	line string
	more []string
}

// one is a verdict of a single line, with optional details.
func one(line string, more ...string) verdictText { return verdictText{line, more} }

// commitMs is a duration in ms with two decimals, as the verdicts print it.
func commitMs(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 2, 64) + " ms" }

// commitVerdict words v, a caveat first among its details when it rests
// on few writes (commit.FewWrites).
func commitVerdict(v commit.Verdict, names commit.Names) verdictText {
	t := commitVerdictKind(v, names)
	if l := v.Lead; v.Part != "" && l.HasRunner && !l.Separated {
		t = partsAlike(v, t)
	}
	if v.Few {
		t.more = append([]string{fmt.Sprintf("only %s traced (fewer than %d): one odd write can decide a p50: run longer", counted(v.Writes, "write"), commit.FewWrites)}, t.more...)
	}
	return t
}

// commitVerdictKind words a verdict of each kind.
func commitVerdictKind(v commit.Verdict, names commit.Names) verdictText {
	const movePoint = "this member is a follower: point writers at the leader, or `etcdctl move-leader` to this member if it is closest to the writers"
	switch v.Kind {
	case commit.VerdictNoWrites:
		return one("no write was traced: is anything writing to this member? (--load N/s drives a test load)")
	case commit.VerdictWAL:
		return walVerdict(v)
	case commit.VerdictQuorum:
		line := fmt.Sprintf("writes wait on the quorum (%.0f%% of the time): the deciding vote is %s in %d of %d writes", v.SharePct, names.Of(v.Member), v.Count, v.Writes)
		if v.AckP50Ns >= 0 {
			line += fmt.Sprintf(", %s from send to its ack (p50)", commitMs(v.AckP50Ns))
		}
		t := one(line, "the ack's time is the round trip to it and its WAL fdatasync")
		if len(v.Down) > 0 {
			// Why a far member decides is the verdict's point: on its
			// line (a scenario check reads it from the JSON too).
			var down []string
			for _, d := range v.Down {
				down = append(down, names.Of(d))
			}
			t.line += fmt.Sprintf("; %s sent no ack", strings.Join(down, ", "))
			t.more = append(t.more, "a member that sent no ack is down or partitioned: the vote named decides in its place")
		}
		return t
	case commit.VerdictForward:
		p50 := func(ns int64) string {
			if ns < 0 {
				return "-"
			}
			return commitMs(ns)
		}
		f := v.Forward
		if f.Follower {
			// The shares as the table's column prints them, and what they add.
			shares := fmt.Sprintf("forward %.1f%% + quorum_wait %.1f%%", f.ForwardPct, f.QuorumWaitPct)
			if f.QuorumWaitP50Ns < 0 {
				shares = fmt.Sprintf("forward %.1f%%", f.ForwardPct)
			}
			return one(fmt.Sprintf("writes wait on forwarding to the leader (%s of the time): forward p50 %s, then quorum_wait p50 %s", shares, p50(f.ForwardP50Ns), p50(f.QuorumWaitP50Ns)),
				"forward: to the leader and back with the entry; quorum_wait: the leader's quorum and its commit notice", movePoint)
		}
		return one(fmt.Sprintf("writes wait on forwarding to the leader (%.0f%% of the time, p50 %s)", v.SharePct, p50(f.ForwardP50Ns)), movePoint)
	case commit.VerdictApply:
		return one(fmt.Sprintf("writes wait on apply (%s, %.0f%% of the time): the backend (bbolt) commit or a long apply queue", v.Part, v.SharePct),
			"check etcd_disk_backend_commit_duration_seconds and large range/txn requests")
	case commit.VerdictScheduling:
		return one(fmt.Sprintf("writes wait in etcd's own scheduling (%s, %.0f%% of the time): the CPU is busy", v.Part, v.SharePct), "check the member's CPU and GOMAXPROCS")
	case commit.VerdictGRPC:
		return one(fmt.Sprintf("writes wait in gRPC around the write (%s, %.0f%% of the time): request decode, the auth and quota interceptors, response encode", v.Part, v.SharePct),
			"check the requests' size, auth (each request's token is checked) and the member's CPU")
	case commit.VerdictCPUWait:
		return one(fmt.Sprintf("etcd waits for a CPU: its WAL fdatasync calls (%d split by the fsync tracer) spent %.0f%% of their time runnable with no I/O in flight",
			v.WALCause.Joined, 100*v.WALCause.Share(commit.CauseCPUWait)), cpuCheck)
	case commit.VerdictDecider:
		if l := v.Decider; l.HasRunner && !l.Separated {
			// As `etcdscope cluster` words the same writes.
			return one(noSingleDecider(l, names.Of(uint64(l.Member)), names.Of(uint64(l.Runner)), counted(v.Writes, "write")))
		}
		return one(fmt.Sprintf("quorum's deciding vote: %s in %d of %d writes", names.Of(v.Member), v.Count, v.Writes))
	case commit.VerdictBatched:
		return one(fmt.Sprintf("%d of %d writes shared a WAL append with other writes (one Raft Ready): their WAL parts are the batch's", v.Count, v.Writes))
	case commit.VerdictIncomplete:
		return one(fmt.Sprintf("%d of %d writes could not be followed through every step (see \"missing\" in --output json)", v.Count, v.Writes))
	}
	return one(fmt.Sprintf("verdict kind %d", v.Kind)) // a kind added to analysis/commit and not yet worded here
}

// cpuCheck is what to check when the WAL fdatasync waited for a CPU
// (docs/commit.md says why runnable time with no I/O in flight is that).
const cpuCheck = "run-queue wait or the cgroup's CPU throttling: check the member's CPU quota (cpu.max; nr_throttled in cpu.stat) and what else runs on its CPUs"

// walVerdict says what the WAL append waited on: by the fsync tracer's
// split of its fdatasync calls where it ran (the disk's layers, or a CPU:
// a thread runnable inside the syscall with no I/O in flight), else the
// disk, pointing at `etcdscope fsync`.
func walVerdict(v commit.Verdict) verdictText {
	wal := v.WAL
	head := fmt.Sprintf("WAL append p50 %s of %s per write (WAL sync p50 %s, %.0f%% of the time)", commitMs(wal.P50Ns), commitMs(wal.TotalP50Ns), commitMs(wal.SyncP50Ns), v.SharePct)
	if !wal.CauseKnown {
		return one("writes wait on the local disk: "+head, "run `etcdscope fsync --comm etcd` for its device flush, journal and queue layers")
	}
	c := &v.WALCause
	pct := func(k commit.Cause) string { return fmt.Sprintf("%.0f%%", 100*c.Share(k)) }
	split := []string{
		fmt.Sprintf("(*WAL).sync of %s, split per call: disk %.0f%% (device flush %s, journal %s, block queue %s, data writeback %s, write(2) waits %s)",
			counted(c.Joined, "write"), 100*c.DiskShare(), pct(commit.CauseDeviceFlush), pct(commit.CauseJournal), pct(commit.CauseBlockQueue), pct(commit.CauseDataWriteback), pct(commit.CauseWriteWait)),
		fmt.Sprintf("and off the disk: waiting for a CPU %s, running in the kernel %s, blocked otherwise %s, outside syscalls (Go) %s",
			pct(commit.CauseCPUWait), pct(commit.CauseRunning), pct(commit.CauseBlocked), pct(commit.CauseOutside)),
	}
	// Each line leads with the cause and its share of (*WAL).sync's time,
	// the share the split above prints (the disk's: its layers together),
	// then the WAL append's numbers.
	l := wal.Lead
	if l.HasRunner && !l.Separated {
		// Two sides the run's spread does not set apart: both named.
		more := append(split, notApart(l.Gap, sideLabel(l.Cause), causeMethod))
		if l.Cause == commit.CauseCPUWait || l.Runner == commit.CauseCPUWait {
			more = append(more, cpuCheck)
		}
		return verdictText{causesAlike(l, "the local disk", "(*WAL).sync's time") + ": " + head, more}
	}
	var line string
	switch top := wal.Cause; {
	case top.Disk():
		line = "writes wait on the local disk " + causeShare(l, "(*WAL).sync") + ": " + head
	case top == commit.CauseCPUWait:
		// Linux 6.18+ throttles on the return to user space: the wait can
		// land around the syscall, not in it (docs/commit.md).
		return verdictText{fmt.Sprintf("writes wait for a CPU, not the disk: %s of (*WAL).sync runnable with no I/O in flight; %s", pct(top), head), append(split, cpuCheck)}
	case top == commit.CauseRunning:
		line = "writes wait on the kernel's own work in the syscalls, on a CPU with no I/O in flight " + causeShare(l, "(*WAL).sync") + ": " + head
	case top == commit.CauseBlocked:
		line = "writes wait asleep in the syscalls, not on the disk's I/O " + causeShare(l, "(*WAL).sync") + ": " + head
		split = append(split, "asleep on something else: a lock, a page fault, memory reclaim")
	case top == commit.CauseOutside:
		line = fmt.Sprintf("writes wait in (*WAL).sync outside its syscalls, running Go code (%s of it): %s", pct(top), head)
	default:
		line = "writes wait in the syscalls with no I/O in flight (the scheduler was not followed): " + head
	}
	return verdictText{line, split}
}

// causeShare is how a WAL verdict, commit's or cluster's, leads with its
// top side's share of the sync's time (of: which sync): the disk's
// layers together and its largest layer's own share, as the split lines
// print them, "(62% of (*WAL).sync, most in its device flush: 50%)";
// another cause's, "(40% of (*WAL).sync)".
func causeShare(l commit.CauseLead, of string) string {
	if l.Cause.Disk() {
		return fmt.Sprintf("(%.0f%% of %s, most in its %s: %.0f%%)", l.Pct, of, sideName(l.Cause), l.LayerPct)
	}
	return fmt.Sprintf("(%.0f%% of %s)", l.Pct, of)
}

// causesAlike is how a WAL verdict, commit's or cluster's, names two
// sides the run's spread does not set apart, each with its share of the
// sync's time (of), the disk's side named disk: "writes wait on the
// local disk (40%) and for a CPU (38%) alike, of (*WAL).sync's time".
func causesAlike(l commit.CauseLead, disk, of string) string {
	side := func(c commit.Cause) string {
		if c.Disk() {
			return "on " + disk
		}
		return sideWait(c)
	}
	return fmt.Sprintf("writes wait %s (%.0f%%) and %s (%.0f%%) alike, of %s", side(l.Cause), l.Pct, side(l.Runner), l.RunnerPct, of)
}

// notApart says why a verdict names two sides (a cause of the WAL sync,
// or a part): the gap's interval and in how many writes first, the first
// side's label, was the longer; doc is where the docs say how.
func notApart(g commit.Gap, first, doc string) string {
	return fmt.Sprintf("not set apart by this run's spread: the gap's 95%% interval %.0f to %.0f points, %s the longer in %d of %d writes (%s)",
		g.GapCI.Lo, g.GapCI.Hi, first, g.Longer, g.Compared, doc)
}

// partsAlike words a verdict whose part the run's spread does not set
// apart from the next (v.Lead): both parts, each named as the table names
// it with its share as the table's column prints it, why both, then the first part's own
// verdict (t) under it.
func partsAlike(v commit.Verdict, t verdictText) verdictText {
	l := v.Lead
	line := fmt.Sprintf("writes wait %s (%s %.1f%%) and %s (%s %.1f%%) alike, of the time", partWait(v.Part), partLabel(v.Part, l.Follower), v.SharePct,
		partWait(l.Runner), partLabel(l.Runner, l.Follower), l.RunnerPct)
	more := []string{notApart(l.Gap, partLabel(v.Part, l.Follower), partMethod), "the first alone: " + t.line}
	return verdictText{line, append(more, t.more...)}
}

// partMethod is where the docs say when two parts are named alike.
const partMethod = "docs/commit.md#the-part-writes-wait-on-two-named-alike"

// partLabel is a part as the table names it; on a follower forward is
// forward and quorum_wait together (commit.PartLead.Follower).
func partLabel(p string, follower bool) string {
	if follower && p == commit.PartForward {
		return "forward + quorum_wait"
	}
	return p
}

// partWait is what a write waits on, by a part of a commit.PartLead.
func partWait(p string) string {
	switch p {
	case commit.PartWALAppend:
		return "on the WAL append"
	case commit.PartForward:
		return "on forwarding to the leader"
	case commit.PartQuorumWait:
		return "on the quorum"
	case commit.PartApply, commit.PartCommitToApply:
		return "on apply"
	case commit.PartPropose, commit.PartReturn:
		return "in etcd's own scheduling"
	}
	return "in gRPC around the write"
}

// causeMethod is where the docs say when two causes of the WAL sync are
// named alike.
const causeMethod = "docs/commit.md#what-the-wal-fdatasync-waited-on-the-disk-or-a-cpu"

// sideName is a cause as the split line words it ("device flush").
func sideName(c commit.Cause) string { return strings.ReplaceAll(string(c), "_", " ") }

// sideLabel is a side of a CauseLead as the split line words it: "the
// disk" for any of its layers, else the cause.
func sideLabel(c commit.Cause) string {
	if c.Disk() {
		return "the disk"
	}
	return sideName(c)
}

// sideWait is what a write waits on, by a side of a CauseLead: the disk
// (any of its layers) or another cause.
func sideWait(c commit.Cause) string {
	switch {
	case c.Disk():
		return "on the local disk"
	case c == commit.CauseCPUWait:
		return "for a CPU"
	case c == commit.CauseRunning:
		return "on the kernel's own work in the syscalls"
	case c == commit.CauseBlocked:
		return "asleep in the syscalls"
	case c == commit.CauseOutside:
		return "on Go code outside the syscalls"
	}
	return "in the syscalls with no I/O in flight"
}

// CommitMissing words what a write missed, as the commit record's
// missing[] carries it (docs/schema.md).
func CommitMissing(m commit.Missing) string {
	if s, ok := missingWords[m]; ok {
		return s
	}
	return string(m)
}

var missingWords = map[commit.Missing]string{
	commit.MissingWAL:    "wal: no finished WAL Save holds the write's index",
	commit.MissingApply:  "apply: no applyAll seen for the write's batch",
	commit.MissingQuorum: "quorum: fewer follower acks seen than the quorum needs",
}

// CommitRecord is commit.RecordOf with its words: the record `etcdscope
// commit --output json` writes for w.
func CommitRecord(w *commit.Write, names commit.Names) commit.Record {
	r := commit.RecordOf(w, names)
	for _, m := range w.Missing {
		r.Missing = append(r.Missing, CommitMissing(m))
	}
	return r
}

// MeasureSource words where a number of the model came from: its
// source's name, or for the quorum wait the deciding follower's two.
func MeasureSource(m commit.Measure) string {
	if q := m.Quorum; q != nil {
		return "RTT (" + MeasureSource(q.RTT) + ") + fsync (" + MeasureSource(q.Fsync) + ") of the deciding follower, minus the leader's WAL append"
	}
	if f := m.From; f != nil {
		return metricSource(*f)
	}
	return m.Source
}

// metricSource words where in etcd's /metrics a number was read: "leader's
// etcd_disk_wal_fsync_duration_seconds mean over the run, /metrics of m1".
func metricSource(f commit.MetricSource) string {
	s := f.Series
	if f.OfLeader {
		s = "leader's " + s
	}
	switch f.Window {
	case commit.WindowRun:
		s += " mean over the run"
	case commit.WindowSinceStart:
		s += " mean since etcd started (none observed during the run)"
	}
	s += ", /metrics of " + f.Member
	if f.Prober {
		s += " (etcd's prober: up to 2x the network RTT)"
	}
	return s
}

// commitModel is m with every part's source worded (MeasureSource), as
// the summary record carries it.
func commitModel(m *commit.ModelResult) *commit.ModelResult {
	if m == nil {
		return nil
	}
	c := *m
	c.Parts = make(map[string]commit.Measure, len(m.Parts))
	for p, ms := range m.Parts {
		ms.Source, ms.Quorum = MeasureSource(ms), nil
		c.Parts[p] = ms
	}
	return &c
}

// modelSinceStart says whether a part of m rests on a mean since etcd
// started rather than over the run (a peer RTT with no sample in it).
func modelSinceStart(m *commit.ModelResult) bool {
	sinceStart := func(x commit.Measure) bool { return x.From != nil && x.From.Window == commit.WindowSinceStart }
	for _, x := range m.Parts {
		if sinceStart(x) || x.Quorum != nil && (sinceStart(x.Quorum.RTT) || sinceStart(x.Quorum.Fsync)) {
			return true
		}
	}
	return false
}

// commitModelDoc is where the model's formula and sources are explained.
const commitModelDoc = "docs/commit.md#the-kernel-free-model"

// modelScrapes says, for each member the end scrape of /metrics missed,
// what the model's numbers of that member end on (nothing when every
// member answered at the end: the model line's "over the run" holds).
func modelScrapes(w io.Writer, used []commit.ModelScrape, names commit.Names) {
	for _, u := range used {
		id, _ := strconv.ParseUint(u.Member, 16, 64)
		why := ""
		if u.EndErr != "" {
			why = " (" + u.EndErr + ")"
		}
		switch u.Scrape {
		case commit.ScrapeDuring:
			over := fmt.Sprintf("over %.1f s", float64(u.WindowNs)/1e9)
			if u.NoStart {
				over = "no start scrape: since etcd started"
			}
			fmt.Fprintf(w, "  /metrics of %s: the end scrape missed it%s; its numbers end on its scrape from during the run, %.1f s before the end (%s)\n",
				names.Of(id), why, float64(u.ShortNs)/1e9, over)
		case commit.ScrapeNone:
			fmt.Fprintf(w, "  /metrics of %s: neither the end scrape%s nor any during the run answered; the model has none of its numbers\n", names.Of(id), why)
		}
	}
}

// CommitNoticeLine is `etcdscope commit`'s stderr line for notice n:
// CommitNotice after the command's name.
func CommitNoticeLine(n commit.Notice) string {
	return "etcdscope commit: " + CommitNotice(n)
}

// CommitNotice words a progress notice of a commit run (commit.Notice),
// one line for stderr; the caller prefixes the command's name.
func CommitNotice(n commit.Notice) string {
	switch n.Kind {
	case commit.NoticeModelFallback:
		return fmt.Sprintf("etcd's functions cannot be probed (%v): using the kernel-only model from etcd's metrics", n.Err)
	case commit.NoticeUnavailable:
		what, why := UnavailableWords(n.Unavailable)
		if why == "" {
			return "unavailable: " + what
		}
		return "unavailable: " + what + " (" + why + ")"
	case commit.NoticeNoSyncSplit:
		return fmt.Sprintf("fsync tracer: %v: the WAL fdatasync is not split into the disk's layers and CPU waits", n.Err)
	case commit.NoticeLoadStarted:
		l := n.Load
		return fmt.Sprintf("load: %g puts/s of %d-byte values under %s, lease %x (TTL %s; revoked at exit, else the keys expire)",
			l.PerSec, l.ValueBytes, l.Prefix, l.Lease, l.TTL)
	case commit.NoticeLoadFailed:
		return fmt.Sprintf("load not started: %v", n.Err)
	case commit.NoticeLeaderChanged:
		return fmt.Sprintf("leader changed to %s: this member is now %s", n.Leader, n.Role)
	case commit.NoticeLeaseKept:
		return "the traced etcd is stopped or gone: the load's lease is not revoked (its keys expire with its TTL)"
	case commit.NoticeRevokeFailed:
		return fmt.Sprintf("revoking the load's lease: %v (its keys expire with its TTL)", n.Err)
	case commit.NoticeClusterWait:
		return fmt.Sprintf("%v; asked again every %v while etcd runs (writes not split until it answers)", n.Err, n.Every)
	}
	return fmt.Sprintf("notice %d", n.Kind)
}

// sampled is &s, or nil when s has no sample.
func sampled(s stats.Summary) *stats.Summary {
	if s.Count == 0 {
		return nil
	}
	return &s
}

// measuredMs is s's p50 in ms ("0.501 ms"), or "not measured" when s has
// no sample.
func measuredMs(s stats.Summary) string {
	if s.Count == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.3f ms", float64(s.P50)/1e6)
}

// p50p99 is "p50 X ms, p99 Y ms" of s, or "not measured" when s has no
// sample (no put completed).
func p50p99(s stats.Summary) string {
	if s.Count == 0 {
		return "not measured"
	}
	return fmt.Sprintf("p50 %.3f ms, p99 %.3f ms", float64(s.P50)/1e6, float64(s.P99)/1e6)
}
