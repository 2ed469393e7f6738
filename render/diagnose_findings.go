package render

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/diagnose"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// This file words diagnose's older findings from their typed facts
// (analysis/diagnose/facts.go): the disk histograms and the slow member,
// the peer RTT humps, the log's slow syncs, applies, leader changes and
// late heartbeats, fio runs, and inputs that look like one member's.

// pluralOf is "1 line", "2 lines"; "request or apply" becomes "requests
// or applies".
func pluralOf(n int, what string) string {
	if n != 1 && what == "request or apply" {
		return fmt.Sprintf("%d requests or applies", n)
	}
	return counted(n, what)
}

func fmtCount(n float64, ok bool) string {
	if !ok {
		return "unknown number of"
	}
	return fmt.Sprintf("%.0f", n)
}

// joinNotes joins notes with "; ", the empty ones left out.
func joinNotes(notes ...string) diagnose.Notes {
	var out diagnose.Notes
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// windowText words the window of a member's numbers: the label, or in
// full the window told from the order the scrapes were given.
func windowText(w string) string {
	if w == diagnose.WindowSinceRestartAsGiven {
		return "since restart (" + asGivenWhy + ")"
	}
	return w
}

// asGivenWhy is why a window reads diagnose.WindowSinceRestartAsGiven.
const asGivenWhy = "no fetch times or process_start_time_seconds: the scrapes taken in the order given, the last one whole"

// whereText names where a member's next command runs, for a "# on …"
// comment: the member's name, or, when the evidence named it only by its
// file or URL, the member that input came from.
func whereText(w diagnose.Where) string {
	if w.OneMember {
		return "the member the scrapes came from"
	}
	if w.FromInput {
		name := w.Member
		if !strings.Contains(name, "://") {
			name = filepath.Base(name)
		}
		return "the member " + name + " came from"
	}
	return "member " + w.Member
}

// modesWhy words why the ladder reads as it does (diagnose.Modes.Reason).
func modesWhy(m diagnose.Modes) string {
	switch m.Reason {
	case diagnose.ModesByProber:
		return "the series is labelled by prober (" + m.Prober + "): each prober has its own histogram"
	case diagnose.ModesFewBuckets:
		return "fewer than two buckets shown"
	case diagnose.ModesLadderHigh:
		return fmt.Sprintf("the ladder shown starts at le=%g with %g observations below it: their buckets are missing", m.LE, m.Below)
	case diagnose.ModesGap:
		return fmt.Sprintf("buckets between le=%g and le=%g are missing", m.GapFrom, m.LE)
	case diagnose.ModesNoObservations:
		return "no observations"
	case diagnose.ModesOneBucket:
		return fmt.Sprintf("one bucket (%s–%s] holds %.0f%% : both probers read alike, or their readings share it", formatSeconds(m.LowLo), formatSeconds(m.LowHi), m.LowPct)
	case diagnose.ModesNeighbours:
		return fmt.Sprintf("the fullest buckets, (%s–%s] and (%s–%s], are neighbours (etcd's double): one hump or two (RTT, ≥2×RTT) look alike", formatSeconds(m.LowLo), formatSeconds(m.LowHi), formatSeconds(m.HighLo), formatSeconds(m.HighHi))
	case diagnose.ModesBroad:
		return "one broad hump: the buckets between the two fullest are not emptier"
	case diagnose.ModesTwoHumps:
		return fmt.Sprintf("two humps, (%s–%s] with %.0f%% and (%s–%s] with %.0f%%, with emptier buckets between", formatSeconds(m.LowLo), formatSeconds(m.LowHi), m.LowPct, formatSeconds(m.HighLo), formatSeconds(m.HighHi), m.HighPct)
	}
	return m.Why
}

// p99Text words a p99 placed against its budget.
func p99Text(p diagnose.P99Facts) string {
	e, budget := p.E, p.Budget
	switch p.Grade {
	case diagnose.P99None:
		return "no p99"
	case diagnose.P99Above:
		return fmt.Sprintf("p99 %s (in the bucket %s–%s, all above the %s budget)", formatSeconds(e.Value), formatSeconds(e.Lo), formatSeconds(e.Hi), budget)
	case diagnose.P99AboveBound:
		return fmt.Sprintf("p99 > %s, above the %s budget", formatSeconds(e.Lo), budget)
	case diagnose.P99Under:
		return fmt.Sprintf("p99 %s (≤ %s), under the %s budget", formatSeconds(e.Value), formatSeconds(e.Hi), budget)
	case diagnose.P99UnderBound:
		return fmt.Sprintf("p99 ≤ %s, under the %s budget", formatSeconds(e.Hi), budget)
	case diagnose.P99StraddleOver, diagnose.P99StraddleUnder:
		return fmt.Sprintf("p99 ≈ %s, interpolated in the bucket %s–%s that straddles the %s budget", formatSeconds(e.Value), formatSeconds(e.Lo), formatSeconds(e.Hi), budget)
	}
	return "p99 cannot be placed against the budget: " + estimateShort(e)
}

// estimateShort is estimateWhy's cause alone, for a summary line: the
// counts behind it are in the finding's uncertainty (estimateWhy).
func estimateShort(e *etcdmetric.Estimate) string {
	switch e.Reason {
	case etcdmetric.EstimateLowerBound:
		return fmt.Sprintf("no +Inf bucket or _count, so only a lower bound (above %g s)", e.Lo)
	case etcdmetric.EstimateNoBound:
		return "no +Inf bucket or _count, so no bound"
	}
	return estimateWhy(e)
}

func wordDisk(f *diagnose.Finding, v diagnose.DiskFacts) {
	what, meaning := "WAL fsync", "every proposal waits for the leader's WAL fdatasync and a quorum of followers' own; a leader blocked in fsync sends no heartbeats"
	if v.What == diagnose.DiskBackend {
		what, meaning = "backend commit", "bbolt commits run in the apply path (every 100 ms or 10k writes): slow ones stall applies and the reads waiting on them, not the Raft commit"
	}
	h := v.Stats
	f.Meaning = meaning
	f.Next = "sudo etcdscope fsync --comm etcd --duration 60s  # on " + whereText(v.Where) + ": which kernel layer the fdatasync waits in"
	f.Evidence = append(f.Evidence, fmt.Sprintf("%s: %s, %s observations", strings.Join(v.Sources, " → "), windowText(v.Window), fmtCount(h.Observations, h.HasCount)))
	if h.HasMean {
		f.Evidence = append(f.Evidence, fmt.Sprintf("mean %s (sum/count)", formatSeconds(h.Mean)))
	}
	if h.P50 != nil {
		f.Evidence = append(f.Evidence, "p50 "+formatEstimate(h.P50))
	}
	var why diagnose.Notes
	if h.Error != "" {
		f.Summary = what + ": " + h.Error
		why = diagnose.Notes{"the buckets given cannot support quantiles: " + h.Error}
	} else {
		f.Summary = what + " " + p99Text(v.P99)
		if h.P99 != nil {
			why = joinNotes(estimateWhy(h.P99))
		}
	}
	switch v.Window {
	case diagnose.WindowSinceStart:
		why = append(why, "one scrape: totals since the process started, old stalls weigh as much as recent ones (give two scrapes, or a URL to poll, for a window)")
	case diagnose.WindowSinceRestart:
		why = append(why, "a counter fell between the scrapes (etcd restarted): the later scrape is taken whole")
	}
	f.Uncertainty = why
}

func wordSlowMember(f *diagnose.Finding, v diagnose.SlowMemberFacts) {
	switch v.Case {
	case diagnose.SlowOne:
		f.Summary = fmt.Sprintf("%s is the slow member: WAL fsync p99 %s vs at most %s on the others", v.Member, formatSeconds(v.P99), formatSeconds(v.Others))
		f.Meaning = "if it leads, every commit waits for its disk; as a follower it only slows commits when the quorum needs it (or it falls behind and needs snapshots)"
		f.Next = "etcdctl endpoint status -w table  # is it the leader? then etcdctl move-leader <ID of a fast member>, and run etcdscope fsync on " + v.Member
	case diagnose.SlowShared:
		f.Summary = fmt.Sprintf("WAL fsync is over budget on %d of %d members: a shared cause (storage class, hypervisor, noisy neighbour)", v.Over, v.Members)
		f.Next = "sudo etcdscope fsync --comm etcd --duration 60s  # on each member"
	case diagnose.SlowOnlyOne:
		f.Summary = fmt.Sprintf("WAL fsync is over budget on %s alone (p99 %s), the others close behind (at most %s)", v.Member, formatSeconds(v.P99), formatSeconds(v.Others))
		f.Meaning = "within twice the others' p99 it does not stand apart: a cause the members share is as likely as its own disk"
		f.Next = "sudo etcdscope fsync --comm etcd --duration 60s  # on " + v.Member + ", then on the others"
	default:
		f.Summary = "no member stands out in WAL fsync p99"
	}
	if len(v.Alike) > 0 {
		f.Uncertainty = diagnose.Notes{strings.Join(v.Alike, ", ") + " may be scrapes of one member (see the inputs finding), not members of one cluster"}
	}
}

func wordAlike(f *diagnose.Finding, v diagnose.AlikeFacts) {
	f.Summary = fmt.Sprintf("%s and %s look like two scrapes of one member (%.0f more WAL fsyncs in %s)", v.A, v.B, v.More, v.B)
	f.Evidence = append(f.Evidence, fmt.Sprintf("the same %s ladder, every count of %s at least %s's", v.WALName, v.B, v.A),
		"neither carries a member identity (etcd_server_id, an instance label, process_start_time_seconds)")
	f.Uncertainty = diagnose.Notes{"read here as two members, each since its start", "two members' histograms can also look so"}
	f.Next = "etcdscope diagnose --one-member " + v.A + " " + v.B + "  # if they are one member's: their difference"
}

func wordPeer(f *diagnose.Finding, v diagnose.PeerFacts) {
	h, m := v.Stats, v.Modes
	why := modesWhy(m)
	f.Next = fmt.Sprintf("sudo etcdscope peers --etcd-metrics %s --duration 2m  # on %s: the kernel's RTT beside this metric", v.URL, whereText(v.Where))
	f.Meaning = "a commit waits for one kept-alive round trip to the quorum's slower follower, plus its fsync; the new-connection prober's handshakes are not on that path"
	f.Evidence = append(f.Evidence, fmt.Sprintf("%s: %s, %s observations (etcd observes once per prober per 30 s)", strings.Join(v.Sources, " → "), windowText(v.Window), fmtCount(h.Observations, h.HasCount)))
	switch {
	case v.Probers == 0:
	case v.SpanMeasured:
		f.Evidence = append(f.Evidence, fmt.Sprintf("%.0f observations from %.0f prober(s) in the %s between the scrapes", h.Observations, v.Probers, v.Span.Round(time.Millisecond)))
	case v.SpanUnder:
		f.Evidence = append(f.Evidence, fmt.Sprintf("%.0f observations from %.0f prober(s) (one each per 30 s) span under %s", h.Observations, v.Probers, v.Span))
	default:
		f.Evidence = append(f.Evidence, fmt.Sprintf("%.0f observations from %.0f prober(s) span about %s", h.Observations, v.Probers, v.Span))
	}
	if h.HasMean {
		f.Evidence = append(f.Evidence, "mean "+formatSeconds(h.Mean))
	}
	switch {
	case h.P50 == nil:
	case m.Verdict == diagnose.ModesTwo:
		// Two probers' observations in one histogram (about as many of
		// each): the middle one sits where one hump ends, not a reading
		// of either prober.
		f.Evidence = append(f.Evidence, fmt.Sprintf("p99 %s; the p50 (%s) mixes the two probers' observations: read each hump instead", formatEstimate(h.P99), formatEstimate(h.P50)))
	default:
		f.Evidence = append(f.Evidence, "p50 "+formatEstimate(h.P50)+", p99 "+formatEstimate(h.P99))
	}
	if h.Error != "" {
		f.Uncertainty = diagnose.Notes{"quantiles: " + h.Error}
	} else if h.P50 != nil && !h.P50.Interpolated && estimateWhy(h.P50) != "" {
		// A bound, not a value (an excerpt's ladder starting high): say
		// why beside it.
		f.Uncertainty = diagnose.Notes{"bounds only: " + estimateWhy(h.P50)}
	}
	switch m.Verdict {
	case diagnose.ModesTwo:
		f.Summary = fmt.Sprintf("two probers, two humps: ≤ %s the kept-alive prober, (%s–%s] the new-connection prober", formatSeconds(m.LowHi), formatSeconds(m.HighLo), formatSeconds(m.HighHi))
		f.Evidence = append(f.Evidence, "the kept-alive prober times one RTT plus the answer; the new-connection prober adds the connection's setup", why)
		if h.HasMean {
			f.Evidence = append(f.Evidence, fmt.Sprintf("the mean (%s) falls between the humps and reads neither", formatSeconds(h.Mean)))
		}
		if v.SlowDial {
			f.Evidence = append(f.Evidence, fmt.Sprintf("the upper hump is ≥ %.0f× the lower: more than TCP+TLS handshakes at this RTT would take; look for slow DNS or TLS on each dial (etcd #11781)", m.HighLo/m.LowHi))
		}
	case diagnose.ModesPerProber:
		f.Summary = "per-prober series: " + why
		if strings.Contains(v.Prober, "SNAPSHOT") {
			f.Summary = "kept-alive prober (ROUND_TRIPPER_SNAPSHOT): its reading is one RTT plus the peer's answer"
		} else if strings.Contains(v.Prober, "RAFT_MESSAGE") {
			f.Summary = "new-connection prober: each reading includes a TCP (and TLS) handshake, not just the RTT"
		}
	default:
		f.Summary = "RTT metric: " + why
		f.Uncertainty = append(f.Uncertainty, "two modes (the two probers) cannot be shown from these buckets")
		if m.Verdict == diagnose.ModesOne && m.LowHi > 0 {
			f.Summary = fmt.Sprintf("one hump (%s–%s]: the RTT is at most %s", formatSeconds(m.LowLo), formatSeconds(m.LowHi), formatSeconds(m.LowHi))
		}
	}
	if v.FarRTT {
		f.Evidence = append(f.Evidence, fmt.Sprintf("RTT ≥ %s: set --heartbeat-interval near the RTT and --election-timeout ≥ 10× it", formatSeconds(m.LowLo)))
	}
}

// logLines words the log lines a finding rests on: "line N: text" (cut
// at 140 bytes), then "… and N more".
func logLines(l diagnose.LogLines) []string {
	var out []string
	for _, e := range l.Lines {
		t := e.Text
		if len(t) > 140 {
			t = t[:140] + "…"
		}
		out = append(out, fmt.Sprintf("line %d: %s", e.Line, t))
	}
	if l.More > 0 {
		out = append(out, fmt.Sprintf("… and %d more", l.More))
	}
	return out
}

// timesNote says what a log's stamps lack.
func timesNote(z diagnose.LogTimes) diagnose.Notes {
	var n diagnose.Notes
	if z.NoZone {
		n = append(n, "times without a zone (capnslog, syslog) are read as UTC: compare across files with care")
	}
	if z.NoYear {
		n = append(n, "syslog stamps have no year: --since/--until skip them")
	}
	return n
}

func wordSlowFsync(f *diagnose.Finding, v diagnose.SlowFsyncFacts) {
	f.Summary = fmt.Sprintf("%s logged over etcd's 1 s warning, the longest %s", pluralOf(v.Count, "WAL fdatasync call"), v.Longest)
	f.Evidence = logLines(v.Lines)
	if v.Leaders {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d of them followed by a leader change within 20 s", v.Followed))
	}
	f.Uncertainty = append(timesNote(v.Times), "etcd logs only syncs over 1 s: the histogram (etcd_disk_wal_fsync_duration_seconds) says how the rest fare")
	f.Meaning = "while the WAL fdatasync runs the Raft loop waits: no commit, no heartbeat from this member; over the election timeout on a leader, followers campaign"
	f.Next = "sudo etcdscope fsync --comm etcd --duration 60s  # which layer (data writeback, journal, device flush, queue) the slow syncs wait in"
}

func wordApply(f *diagnose.Finding, v diagnose.ApplyFacts) {
	f.Summary = fmt.Sprintf("%s logged as taking too long (over etcd's warning threshold: 100 ms since v3.2, 10 ms in v3.0-v3.1), the longest %s", pluralOf(v.Count, "request or apply"), v.Longest)
	f.Evidence = logLines(v.Lines)
	f.Uncertainty = diagnose.Notes{"etcd logs these after the fact", "a slow disk (backend commit), CPU starvation or a large range request all cause them"}
	f.Meaning = "the apply path is behind: reads and writes return late even when the Raft commit itself was fast"
	if v.Old {
		f.Meaning = "under 100 ms: logged only by etcd v3.0-v3.1's 10 ms threshold; not what makes commits slow"
	}
	f.Next = "etcdctl check perf, and compare with etcd_disk_backend_commit_duration_seconds (p99 budget 25 ms)"
}

func wordLeader(f *diagnose.Finding, v diagnose.LeaderFacts) {
	first := ""
	switch {
	case v.Bootstrap:
		first = fmt.Sprintf("the first leader at term %d is the new cluster's first election, not a change", v.First)
	case v.First != 0:
		first = fmt.Sprintf("the first leader at term %d is the member's first since its start line, not a change", v.First)
	}
	f.Evidence = logLines(v.Lines)
	if v.Changes == 0 {
		f.Summary = fmt.Sprintf("no leader change: %s; %s", pluralOf(v.Count, "leader line"), first)
		f.Meaning = "a member elects or learns its first leader at start; commits wait only for that election"
		return
	}
	f.Summary = fmt.Sprintf("leadership changed: %s over %s", pluralOf(v.Count, "leader line"), pluralOf(v.Terms, "term"))
	if v.Changes != v.Count {
		// one change per term, however many lines say it
		f.Summary = fmt.Sprintf("leadership changed: %s (%s over %s)", pluralOf(v.Changes, "leader change"), pluralOf(v.Count, "leader line"), pluralOf(v.Terms, "term"))
	}
	if first != "" && v.Changes < v.Terms {
		f.Evidence = append(f.Evidence, first)
	}
	f.Meaning = "no commits while there is no leader (an election takes at least the election timeout); clients see timeouts"
}

// coverage words whether a member's metrics cover the stalls' time.
func coverage(c diagnose.Coverage) string {
	switch c.Kind {
	case diagnose.CoverNoYear:
		return "the log has no year: whether they cover the stalls is unknown"
	case diagnose.CoverNoTime:
		return "the metrics carry no time: whether they cover the stalls is unknown"
	case diagnose.CoverApart:
		return fmt.Sprintf("NOT the stalls' time: the metrics cover %s to %s, the stalls %s to %s",
			c.From.UTC().Format(time.RFC3339), c.To.UTC().Format(time.RFC3339), c.StallsFrom.UTC().Format(time.RFC3339), c.StallsTo.UTC().Format(time.RFC3339))
	}
	return ""
}

func wordHeartbeat(f *diagnose.Finding, v diagnose.HeartbeatFacts) {
	late := pluralOf(v.LateLines, "late heartbeat line")
	if v.MaxGap > 0 {
		f.Summary = fmt.Sprintf("%s in %d leader stall(s); longest heartbeat gap %s (2×%s interval + %s); %d stall(s) reached the %s election timeout",
			late, len(v.Stalls), v.MaxGap.Round(time.Millisecond), v.Interval, v.MaxExceeded.Round(time.Millisecond), v.OverElection, v.Election)
	} else {
		f.Summary = fmt.Sprintf("%s in %d leader stall(s); up to %s over the expected 2×interval (the line does not give the interval)", late, len(v.Stalls), v.MaxExceeded.Round(time.Millisecond))
	}
	from := "from the log"
	if !v.FromLog {
		from = "etcd's default; no start-up line in the log"
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("election timeout %s (%s)", v.Election, from))
	if v.SlowFsyncs {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d of %d stall(s) have a slow fdatasync (>1 s) logged within their gap", v.WithFsync, len(v.Stalls)))
	} else {
		f.Evidence = append(f.Evidence, "no slow fdatasync (>1 s) logged: syncs shorter than 1 s can still cause gaps this size; see the WAL fsync histogram")
	}
	for _, m := range v.Members {
		f.Evidence = append(f.Evidence, fmt.Sprintf("metrics, member %s: WAL fsync %s (%s)", m.Member, p99Text(m.P99), m.Severity))
		if c := coverage(m.Cover); c != "" {
			f.Evidence = append(f.Evidence, "metrics, member "+m.Member+": "+c)
		}
	}
	for _, r := range v.RTTs {
		f.Evidence = append(f.Evidence, fmt.Sprintf("RTT to %s ≤ %s (peer metric): the network cannot explain a %s gap", r.To, formatSeconds(r.RTT), r.Gap.Round(time.Millisecond)))
	}
	if v.Leaders {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d stall(s) followed by a leader change within 20 s", v.LeaderAfter))
	}
	for i, s := range v.Stalls {
		if i == 3 {
			break
		}
		line := fmt.Sprintf("stall at %s: gap %s", formatStamp(s.At, s.HasTime, s.ZoneKnown, s.YearKnown), s.Gap.Round(time.Millisecond))
		if len(s.To) > 0 {
			line += " to " + strings.Join(s.To, ",")
		}
		f.Evidence = append(f.Evidence, line)
	}
	f.Uncertainty = append(timesNote(v.Times), "a late heartbeat says the leader's Raft loop stalled, not why: a WAL fsync, CPU starvation, or a blocked send")
	f.Meaning = "proposals waited at least the gap; past the election timeout followers campaign and nothing commits until a new leader is elected"
	if v.WithFsync > 0 {
		f.Next = "sudo etcdscope fsync --comm etcd --duration 60s  # on the leader: the slow syncs' kernel layers"
	} else {
		f.Next = "sudo etcdscope fsync --comm etcd --duration 60s  # on the leader, to rule the disk in or out; then pidstat -p $(pgrep -x etcd) 1 for CPU starvation"
	}
}

// noSyncMeaning is a fio finding's meaning when the run shows no sync
// latency: its numbers say nothing either way (a write's clat is not the
// fdatasync that etcd's commit waits for).
const noSyncMeaning = "etcd's commit waits for the WAL's fdatasync; this run shows no sync latency, so it cannot say whether the disk meets the 10 ms budget"

func wordFio(f *diagnose.Finding, v diagnose.FioFacts) {
	run, d := v.Run, formatDuration
	f.Meaning = "fio's write+fdatasync loop is etcd's WAL alone on an idle disk: under 10 ms p99 the disk can meet etcd's budget; etcd's own histogram under load decides"
	f.Next = "sudo etcdscope fsync --comm fio  # while rerunning the same fio: which kernel layer the fdatasync waits in"
	if run.Interrupted {
		f.Evidence = append(f.Evidence, "fio was stopped by a signal (\"fio: terminating on signal\"): the numbers cover less than the job's runtime or size")
	}
	switch v.Case {
	case diagnose.FioUnshown:
		f.Summary = fmt.Sprintf("the job synced (%s) but this output shows no sync latency; the write clat it shows is not the fdatasync", run.SyncOption())
		f.Evidence = append(f.Evidence, "the output was cut before fio's sync section, or fio is older than 3.5")
		if run.WriteP99 > 0 {
			f.Evidence = append(f.Evidence, "write clat p99 "+d(run.WriteP99)+" (without the fdatasync)")
		}
		f.Meaning = noSyncMeaning
		f.Next = "rerun with fio 3.5 or newer and --output-format=json, and paste the whole output"
		return
	case diagnose.FioNoSync:
		f.Summary = "this fio run made no fsync/fdatasync: it does not measure what etcd's WAL waits for"
		if v.ReadOnly != "" {
			f.Summary = "this fio job only reads (rw=" + v.ReadOnly + "): it wrote nothing and synced nothing, so it says nothing of what etcd's WAL waits for"
		}
		if run.WriteP99 > 0 {
			f.Evidence = append(f.Evidence, "write clat p99 "+d(run.WriteP99))
		}
		f.Meaning = noSyncMeaning
		f.Next = "fio --rw=write --ioengine=sync --fdatasync=1 --directory=<dir on etcd's disk> --size=22m --bs=2300 --name=etcdcheck"
		return
	case diagnose.FioNoP99:
		f.Summary = "fio printed no 99th percentile of its syncs"
		f.Meaning = "without the syncs' p99 this run cannot say whether the disk meets etcd's 10 ms WAL budget"
	case diagnose.FioOver:
		f.Summary = fmt.Sprintf("fdatasync p99 %s: over etcd's 10 ms WAL budget", d(v.P99))
		// fio alone on the disk is etcd's best case: a busy node only adds.
		f.Meaning = "fio's write+fdatasync loop is etcd's WAL alone on an idle disk: over 10 ms p99 here, etcd's WAL fsyncs will miss the budget too, and every commit waits for one"
	default:
		f.Summary = fmt.Sprintf("fdatasync p99 %s: under etcd's 10 ms WAL budget", d(v.P99))
	}
	for _, p := range run.Percentiles {
		if p.Pct == 50 || p.Pct == 99.9 || p.Pct == 99.99 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("p%g %s", p.Pct, d(p.Latency)))
		}
	}
	if run.SyncMean > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("sync min %s, mean %s, max %s", d(run.SyncMin), d(run.SyncMean), d(run.SyncMax)))
	}
	if p := v.PastMax; p != nil {
		// To the µs: three digits can print the two alike, or the
		// percentile under the max ("15.8ms above 15.8ms").
		f.Evidence = append(f.Evidence, fmt.Sprintf("p%g %s reads above the max %s: fio prints a percentile as the middle of its histogram bin (bins up to ~3%% wide), the max exactly", p.Pct, p.Latency.Round(time.Microsecond), run.SyncMax.Round(time.Microsecond)))
	}
	if v.P999Over {
		f.Summary += fmt.Sprintf(", but p99.9 %s is over it", d(v.P999))
		f.Evidence = append(f.Evidence, fmt.Sprintf("the tail past p99 reaches %s at p99.9: a few syncs per thousand would miss the budget", d(v.P999)))
	}
	var notes []string
	if v.OddBS != "" {
		notes = append(notes, "bs="+v.OddBS+" (etcd's check uses 2300-byte writes, about a WAL entry batch)")
	}
	if v.OddEngine != "" {
		notes = append(notes, "ioengine="+v.OddEngine+" (etcd writes with plain write(2): use ioengine=sync)")
	}
	if v.OddFdatasync != "" {
		notes = append(notes, "fdatasync="+v.OddFdatasync+" (etcd syncs after every write batch: use 1)")
	}
	if len(notes) > 0 {
		f.Uncertainty = diagnose.Notes{"not etcd's check: " + strings.Join(notes, "; ")}
	}
	if run.Version != "" {
		src := "as " + run.Version + " printed them"
		if run.SyncCount > 0 {
			src += fmt.Sprintf(", from %.0f syncs", run.SyncCount)
		}
		f.Evidence = append(f.Evidence, src)
	}
}

// rejectedExample quotes the first line the metrics parser rejected
// (often a pasted shell command, not a sample), cut at 120 bytes, with
// the parser's reason.
func rejectedExample(c *diagnose.InputCounts) string {
	r := c.Rejected[0]
	line := r.Line
	if len(line) > 120 {
		line = line[:120] + "…"
	}
	return fmt.Sprintf("%q: %s", line, r.Reason)
}

// inputNoteShort is inputNote for the terminal's inputs list: the
// example of a rejected line is left for a line of its own
// (rejectedExample), so that the input's line stays short.
func inputNoteShort(in diagnose.InputInfo) string {
	c := in.Counts
	if c == nil || in.Kind != diagnose.KindMetrics || len(c.Rejected) == 0 {
		return inputNote(in)
	}
	note := fmt.Sprintf("%d samples", c.Samples)
	if c.Dropped > 0 {
		note += "; " + pluralOf(c.Dropped, "non-metric line") + " dropped"
	}
	return note + "; " + pluralOf(len(c.Rejected), "line") + " the parser rejected"
}

// inputNote words what was read of an input (diagnose.InputCounts).
func inputNote(in diagnose.InputInfo) string {
	c := in.Counts
	if c == nil {
		return in.Note
	}
	switch in.Kind {
	case diagnose.KindMetrics:
		note := fmt.Sprintf("%d samples", c.Samples)
		if c.Dropped > 0 {
			note += "; " + pluralOf(c.Dropped, "non-metric line") + " dropped"
		}
		if len(c.Rejected) > 0 {
			note += "; " + pluralOf(len(c.Rejected), "line") + " the parser rejected, e.g. " + rejectedExample(c)
		}
		return note
	case diagnose.KindPromJSON:
		return fmt.Sprintf("%d instance(s)", c.Instances)
	case diagnose.KindLog:
		return fmt.Sprintf("%d lines, %d etcd events; %s", c.Lines, c.Events, formatList(c.Formats))
	case diagnose.KindEtcdctl:
		var parts []string
		for _, p := range []struct {
			n    int
			what string
		}{{c.Perf, "check perf run"}, {c.Status, "endpoint status row"}, {c.Health, "endpoint health row"}} {
			if p.n > 0 {
				parts = append(parts, pluralOf(p.n, p.what))
			}
		}
		return strings.Join(parts, ", ")
	}
	return in.Note
}

// formatList names the log formats recognised, with the lines of each
// when there are several: "syslog format", "formats: json 4 lines,
// syslog 2 lines", "no format recognised".
func formatList(m map[string]int) string {
	var names []string
	for k := range m {
		if k != "none" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	switch len(names) {
	case 0:
		return "no format recognised"
	case 1:
		return names[0] + " format"
	}
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d lines", k, m[k])
	}
	return "formats: " + strings.Join(parts, ", ")
}
