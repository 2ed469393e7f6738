package render

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/etcdscope/etcdscope/analysis/diagnose"
)

// This file is diagnose's words for its typed findings (check perf,
// endpoint status and health, disk stalls, a member cut off): the analysis
// returns their numbers (PerfVerdict, StatusVerdict, HealthVerdict,
// StallVerdict, CutOffVerdict) and Diagnose and DiagnoseJSON word them
// here, last.

// wordFinding returns f with its Summary, Evidence, Uncertainty, Meaning and
// Next written from its typed result; a finding without one is returned
// as is.
func wordFinding(f diagnose.Finding) diagnose.Finding {
	switch {
	case f.Perf != nil:
		wordPerf(&f, *f.Perf)
	case f.Status != nil:
		wordStatus(&f, *f.Status)
	case f.Health != nil:
		wordHealth(&f, *f.Health)
	case f.Stalls != nil:
		v := *f.Stalls
		v.Node, v.Window = whereText(v.Where), windowText(v.Window)
		f.Stalls = &v
		wordStalls(&f, v)
	case f.CutOff != nil:
		wordCutOff(&f, *f.CutOff)
	case f.Counter != nil:
		wordCounter(&f, *f.Counter)
	case f.Disk != nil:
		wordDisk(&f, *f.Disk)
	case f.Slow != nil:
		wordSlowMember(&f, *f.Slow)
	case f.Alike != nil:
		wordAlike(&f, *f.Alike)
	case f.Peer != nil:
		wordPeer(&f, *f.Peer)
	case f.SlowFsync != nil:
		wordSlowFsync(&f, *f.SlowFsync)
	case f.Apply != nil:
		wordApply(&f, *f.Apply)
	case f.Leader != nil:
		wordLeader(&f, *f.Leader)
	case f.Heartbeat != nil:
		wordHeartbeat(&f, *f.Heartbeat)
	case f.Fio != nil:
		wordFio(&f, *f.Fio)
	}
	return f
}

// perfLoadNote says how the run's model is known.
func perfLoadNote(v diagnose.PerfVerdict) string {
	r := v.Run
	load := "load " + r.Load
	if v.HasProfile && r.Load != "" {
		load += fmt.Sprintf(" (%d writes/s by %d clients, %.0f s)", v.Profile.Limit, v.Profile.Clients, v.Profile.Duration.Seconds())
	}
	switch r.LoadFrom {
	case diagnose.LoadFlag:
		return load + ": --load on the command line"
	case diagnose.LoadDefault:
		return load + ": the command line has no --load (check perf's default)"
	case diagnose.LoadThroughput:
		if r.ThroughputPass {
			return fmt.Sprintf("%s: a pass at %d writes/s lies only in %s's (%.0f, %d] writes/s", load, r.Throughput, r.Load, diagnose.PerfThroughputShare*float64(v.Profile.Limit), v.Profile.Limit)
		}
		return fmt.Sprintf("%s: the only model whose target %d writes/s fails falls short of", load, r.Throughput)
	}
	if len(r.Candidates) > 0 {
		return fmt.Sprintf("load not shown (no command line in the paste): %d writes/s fails at %s", r.Throughput, strings.Join(r.Candidates, " or "))
	}
	return "load not shown (no command line in the paste, no throughput line)"
}

func wordPerf(f *diagnose.Finding, v diagnose.PerfVerdict) {
	r := v.Run
	at := "at an unknown load"
	if v.HasProfile && r.Load != "" {
		at = "at load " + r.Load // perfLoadNote gives its rate, clients and time
	} else if len(r.Candidates) > 0 {
		at = "at load " + strings.Join(r.Candidates, " or ")
	}
	lines := fmt.Sprintf("throughput %d writes/s, slowest put %s, stddev %s", r.Throughput, formatDuration(r.Slowest), formatDuration(r.Stddev))
	switch v.Cause {
	case diagnose.PerfPassed:
		f.Summary = "check perf PASS " + at + ": " + lines
	case diagnose.PerfErrors:
		n := 0
		for _, e := range r.Errors {
			n += e.Count
		}
		f.Summary = fmt.Sprintf("check perf FAIL %s: %d puts failed (%s); %s", at, n, r.Errors[0].Error, lines)
	case diagnose.PerfLatency:
		var why []string
		if r.HasSlowest && !r.SlowestPass {
			why = append(why, fmt.Sprintf("slowest put %s (check perf allows %s)", formatDuration(r.Slowest), diagnose.PerfSlowestLimit))
		}
		if r.HasStddev && !r.StddevPass {
			why = append(why, fmt.Sprintf("stddev %s (check perf allows %s)", formatDuration(r.Stddev), diagnose.PerfStddevLimit))
		}
		f.Summary = "check perf FAIL " + at + " on latency: " + strings.Join(why, ", ")
	case diagnose.PerfClientBound:
		f.Summary = fmt.Sprintf("check perf FAIL %s on throughput only (%d writes/s), yet the slowest put took %s: the check's own client did not offer the load",
			at, r.Throughput, formatDuration(r.Slowest))
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d clients that fast would do at least %.0f writes/s: the cluster's latency did not hold them back", v.Profile.Clients, float64(v.Profile.Clients)/r.Slowest.Seconds()))
	case diagnose.PerfThroughput:
		f.Summary = fmt.Sprintf("check perf FAIL %s on throughput: %d writes/s; with all %d clients busy the mean put took about %s",
			at, r.Throughput, v.Profile.Clients, formatDuration(v.ImpliedMean))
		f.Evidence = append(f.Evidence, fmt.Sprintf("the mean put: %d clients / %d writes/s", v.Profile.Clients, r.Throughput))
	case diagnose.PerfIncomplete:
		f.Summary = "check perf: no throughput, slowest or stddev line in the paste"
	}
	f.Evidence = append(f.Evidence, perfLoadNote(v))
	for _, e := range r.Errors {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d × %s", e.Count, e.Error))
	}
	if v.ImpliedMean > 0 && v.Cause != diagnose.PerfThroughput {
		f.Evidence = append(f.Evidence, fmt.Sprintf("with all %d clients busy the mean put took about %s (%d / %d writes/s)", v.Profile.Clients, formatDuration(v.ImpliedMean), v.Profile.Clients, r.Throughput))
	}
	if v.OverHeartbeat {
		f.Evidence = append(f.Evidence, fmt.Sprintf("the slowest put (%s) took longer than etcd's %s heartbeat interval: a step that long on the leader (a WAL fdatasync) holds its heartbeats too", formatDuration(r.Slowest), diagnose.DefaultHeartbeat))
	}
	if r.Result == "" {
		f.Evidence = append(f.Evidence, "the paste ends before check perf's closing PASS or FAIL line")
	}
	var unc diagnose.Notes
	switch {
	case v.Cause == diagnose.PerfPassed && v.HasProfile && !v.Heavy:
		unc = append(unc, fmt.Sprintf("a pass at %s (%d writes/s) loads the disk lightly", r.Load, v.Profile.Limit),
			fmt.Sprintf("check perf's only latency limits, %s for the slowest put and %s for the stddev, pass a WAL fsync p99 far over 10 ms or a tail of 100-500 ms syncs", diagnose.PerfSlowestLimit, diagnose.PerfStddevLimit))
	case v.Cause == diagnose.PerfPassed:
		unc = append(unc, fmt.Sprintf("check perf's only latency limits are %s for the slowest put and %s for the stddev: a WAL fsync p99 over etcd's 10 ms budget can pass it", diagnose.PerfSlowestLimit, diagnose.PerfStddevLimit))
	case v.Heavy:
		unc = append(unc, fmt.Sprintf("load %s times each put on one of %d gRPC clients in one etcdctl process", v.Profile.Name, v.Profile.Clients),
			"on a small machine, or beside etcd competing for CPU, that client can be what falls short, not the disk or the network")
	}
	if v.Cause == diagnose.PerfThroughput || v.Cause == diagnose.PerfClientBound {
		unc = append(unc, "below the target the generator waits for a free client: either every client was busy (the mean put is the one given) or the generator itself fell behind")
	}
	f.Uncertainty = unc
	f.Meaning = "each put is a 1 KiB write through Raft (WAL fdatasyncs, a quorum round trip, apply): check perf times the whole, not which step (disk, network, CPU) was slow"
	switch v.Cause {
	case diagnose.PerfClientBound:
		f.Next = "rerun check perf from a machine with spare CPU that is not an etcd member, or at a lighter --load"
	case diagnose.PerfPassed:
		f.Next = "etcdscope diagnose http://127.0.0.1:2381/metrics --window 60s  # on a member while check perf runs: the WAL fsync p99 against the 10 ms budget"
	default:
		f.Next = "sudo etcdscope fsync --comm etcd --duration 60s  # on the leader while check perf runs: is the fdatasync the slow step; etcdscope diagnose of each member's /metrics for the peer RTT"
	}
}

func wordStatus(f *diagnose.Finding, v diagnose.StatusVerdict) {
	up := len(v.Rows) - len(v.Unreachable)
	switch {
	case up == 0:
		f.Summary = fmt.Sprintf("endpoint status: none of the %d endpoints answered", len(v.Rows))
	case len(v.Leaderless) > 0:
		f.Summary = fmt.Sprintf("endpoint status: %s knows no leader (raft term %s): no commits until an election ends", strings.Join(v.Leaderless, ", "), termRange(v))
	case len(v.Leaders) == 0 && v.LeaderElsewhere != "":
		f.Summary = fmt.Sprintf("endpoint status: %d endpoint(s) answered, none of them the leader (they follow %s, raft term %s)", up, v.LeaderElsewhere, termRange(v))
	case len(v.Leaders) == 0:
		f.Summary = fmt.Sprintf("endpoint status: none of the %d endpoints that answered says it leads (raft term %s)", up, termRange(v))
		f.Evidence = append(f.Evidence, "the leader is one not asked or not answering, or there is none")
	case len(v.Leaders) > 1:
		f.Summary = fmt.Sprintf("endpoint status: %d endpoints say they lead (%s; raft term %s): one of them has not heard of the newer term", len(v.Leaders), strings.Join(v.Leaders, ", "), termRange(v))
	default:
		f.Summary = fmt.Sprintf("endpoint status: %d of %d endpoints answered; leader %s, raft term %s, raft index up to %d", up, len(v.Rows), v.Leaders[0], termRange(v), v.MaxIndex)
	}
	for _, a := range v.Alarms {
		f.Summary += fmt.Sprintf("; %s reports %s", a.Endpoint, alarmsOf(a.Errors))
	}
	var worst diagnose.Lag
	for _, l := range v.Behind {
		if l.Behind > worst.Behind {
			worst = l
		}
	}
	if worst.Behind > 0 {
		f.Summary += fmt.Sprintf("; %s is %d entries behind", worst.Endpoint, worst.Behind)
	} else if up > 1 {
		f.Summary += "; every member at the same index"
	}
	for _, s := range v.Rows {
		if s.Failed != "" {
			f.Evidence = append(f.Evidence, fmt.Sprintf("%s: no status (%s)", s.Endpoint, s.Failed))
			continue
		}
		line := fmt.Sprintf("%s: id %s, %s, term %d, index %d", s.Endpoint, s.ID, leaderWord(s), s.RaftTerm, s.RaftIndex)
		if s.HasApplied {
			line += fmt.Sprintf(", applied %d", s.AppliedIndex)
		}
		line += ", db " + fmtBytes(s.DBSize)
		if s.Version != "" {
			line += ", v" + s.Version
		}
		if s.Errors != "" {
			line += ", errors: " + s.Errors
		}
		f.Evidence = append(f.Evidence, line)
	}
	for _, g := range v.ApplyGap {
		if g.Behind > diagnose.MaxApplyGap {
			f.Evidence = append(f.Evidence, fmt.Sprintf("%s applies %d entries behind its commits: over %d etcd refuses proposals (\"too many requests\")", g.Endpoint, g.Behind, diagnose.MaxApplyGap))
		}
	}
	for _, l := range v.Behind {
		if l.Behind > diagnose.SnapshotCatchUpEntries {
			f.Evidence = append(f.Evidence, fmt.Sprintf("%s is %d entries behind: past the %d the leader keeps for slow followers it is sent a whole snapshot", l.Endpoint, l.Behind, diagnose.SnapshotCatchUpEntries))
		}
	}
	if v.LargestDB >= diagnose.DefaultQuota*8/10 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("the largest database is %s, %.0f%% of the default 2 GiB quota (--quota-backend-bytes): at the quota etcd raises NOSPACE and takes no writes", fmtBytes(v.LargestDB), 100*float64(v.LargestDB)/diagnose.DefaultQuota))
	}
	f.Uncertainty = diagnose.Notes{"one snapshot, taken one endpoint after another: a gap of a few entries under load is the time between the questions", "run it twice to see a gap grow or close"}
	f.Meaning = "no leader (or two) means no commits until an election ends; a member far behind catches up by snapshot (the leader's disk and network); status says nothing of fsync or RTT"
	f.Next = "etcdctl endpoint status --cluster -w table  # again in a minute; and etcdscope diagnose of the leader's /metrics for its WAL fsync"
}

func termRange(v diagnose.StatusVerdict) string {
	if v.MinTerm == v.MaxTerm {
		return fmt.Sprint(v.MaxTerm)
	}
	return fmt.Sprintf("%d to %d", v.MinTerm, v.MaxTerm)
}

func leaderWord(s diagnose.EndpointStatus) string {
	switch {
	case s.IsLeader:
		return "leader"
	case s.IsLearner:
		return "learner"
	}
	return "follower"
}

// fmtBytes writes a size in SI units, as etcdctl does ("20 kB").
func fmtBytes(b int64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(b)/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(b)/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.0f kB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d B", b)
}

func wordHealth(f *diagnose.Finding, v diagnose.HealthVerdict) {
	if v.Unhealthy > 0 {
		f.Summary = fmt.Sprintf("endpoint health: %d of %d endpoints unhealthy", v.Unhealthy, len(v.Rows))
		for _, h := range v.Rows {
			if !h.Healthy {
				f.Summary += fmt.Sprintf(" (%s: %s)", h.Endpoint, h.Error)
				break
			}
		}
	} else {
		f.Summary = fmt.Sprintf("endpoint health: all %d endpoints healthy, the slowest read took %s", len(v.Rows), formatDuration(v.MaxTook))
	}
	for _, h := range v.Rows {
		if h.Healthy {
			f.Evidence = append(f.Evidence, fmt.Sprintf("%s: healthy, took %s", h.Endpoint, formatDuration(h.Took)))
		} else {
			f.Evidence = append(f.Evidence, fmt.Sprintf("%s: unhealthy: %s", h.Endpoint, h.Error))
		}
	}
	if v.MaxTook >= diagnose.DefaultHeartbeat {
		f.Evidence = append(f.Evidence, fmt.Sprintf("a health read took %s, longer than etcd's %s heartbeat interval", formatDuration(v.MaxTook), diagnose.DefaultHeartbeat))
	}
	f.Uncertainty = diagnose.Notes{"what \"took\" times differs between etcdctl versions (with or without setting up the connection): compare the endpoints of one output with each other"}
	f.Meaning = "a health check is a linearizable read (a quorum round trip, no WAL write): \"took\" says little about fsync; unhealthy means no leader, no quorum, or the member cut off"
	f.Next = "etcdctl endpoint status --cluster -w table  # who leads, at which term and index"
	if v.Unhealthy > 0 {
		f.Next = "etcdctl endpoint status --cluster -w table  # who leads, at which term and index; then the unhealthy member's log for lost leader or peer errors"
	}
}

func wordStalls(f *diagnose.Finding, v diagnose.StallVerdict) {
	what := map[string]string{diagnose.TopicWALFsync: "WAL fsync", diagnose.TopicBackendCommit: "backend commit"}[v.Histogram]
	count := func(c diagnose.StallCount) string {
		if c.AtLeast {
			return fmt.Sprintf("at least %.0f", c.Count)
		}
		return fmt.Sprintf("%.0f", c.Count)
	}
	parts := []string{fmt.Sprintf("%s took over %s", count(v.OverHeartbeat), formatSeconds(v.OverHeartbeat.Bound))}
	bounds := []string{fmt.Sprintf("%s: the %s heartbeat", formatSeconds(v.OverHeartbeat.Bound), v.Heartbeat)}
	if c := v.OverHalfElection; c != nil {
		parts = append(parts, fmt.Sprintf("%s over %s", count(*c), formatSeconds(c.Bound)))
		bounds = append(bounds, fmt.Sprintf("%s: half the %s election timeout", formatSeconds(c.Bound), v.Election))
	}
	if c := v.OverElection; c != nil {
		parts = append(parts, fmt.Sprintf("%s over %s", count(*c), formatSeconds(c.Bound)))
		bounds = append(bounds, fmt.Sprintf("%s: the election timeout", formatSeconds(c.Bound)))
	}
	of := ""
	if v.Observations > 0 {
		of = fmt.Sprintf(" of %.0f", v.Observations)
	}
	f.Summary = fmt.Sprintf("%s stalls%s: %s", what, of, strings.Join(parts, ", "))
	if v.P99Severity == diagnose.OK {
		f.Summary += "; the p99 is under budget and does not show them"
	}
	f.Evidence = []string{fmt.Sprintf("%s, from the buckets above each threshold", windowText(v.Window)), "thresholds: " + strings.Join(bounds, ", ")}
	f.Uncertainty = diagnose.Notes{timeoutsSource(&v), "observations between a threshold and the next bucket bound are not counted"}
	if v.Window == diagnose.WindowSinceStart {
		f.Uncertainty = append(f.Uncertainty, "one scrape: since the process started, the stalls may be old")
	}
	if v.Histogram == diagnose.TopicWALFsync {
		f.Meaning = "a WAL fdatasync this long holds a leader's Raft loop (no heartbeats): past the election timeout followers campaign and nothing commits; on a follower it delays its acks"
	} else {
		f.Meaning = "a backend commit this long holds the apply loop: applies and the reads waiting on them stall; it costs latency, not leadership (no heartbeats are sent from it)"
	}
	f.Next = fmt.Sprintf("sudo etcdscope fsync --comm etcd --duration 60s  # on %s: which kernel layer the slow syncs wait in", v.Node)
}

func wordCutOff(f *diagnose.Finding, v diagnose.CutOffVerdict) {
	at := func(t time.Time) string {
		return formatStamp(t, v.HasTime && !t.IsZero(), v.ZoneKnown, v.YearKnown)
	}
	var peers []string
	for _, p := range v.Peers {
		peers = append(peers, p.Peer)
	}
	round := "election round"
	if v.PreVote {
		round = "pre-vote election round"
	}
	since := ""
	if v.HasTime {
		since = " from " + at(v.From)
	}
	unreachable := "unreachable: " + strings.Join(peers, ", ")
	if len(peers) > 1 {
		// each is named in its evidence line, with its errors
		unreachable = fmt.Sprintf("%d peers unreachable (below)", len(peers))
	}
	switch {
	case v.Campaigns > 0 && !v.LeaderAfter && len(v.Peers) == 0:
		f.Summary = fmt.Sprintf("%s at term %s%s and no leader follows; no peer errors logged to say which peers do not answer", counted(v.Campaigns, round), termSpan(v), since)
	case v.Campaigns > 0 && !v.LeaderAfter:
		f.Summary = fmt.Sprintf("cut off from its peers: %s at term %s%s and no leader follows; %s", counted(v.Campaigns, round), termSpan(v), since, unreachable)
	case v.Campaigns > 0:
		f.Summary = fmt.Sprintf("%s at term %s%s, then a leader", counted(v.Campaigns, round), termSpan(v), since)
		if len(peers) > 0 {
			f.Summary += "; " + unreachable
		}
	default:
		f.Summary = "peers not answering" + since + ": " + strings.Join(peers, ", ")
	}
	for _, p := range v.Peers {
		line := fmt.Sprintf("%s: %s", p.Peer, counted(p.Lines, "line"))
		if v.HasTime && !p.From.IsZero() {
			line += fmt.Sprintf(", %s to %s", at(p.From), at(p.To))
		}
		f.Evidence = append(f.Evidence, line+peerErrors(line, p.Errors))
	}
	if v.Campaigns > 0 && v.PreVote {
		f.Evidence = append(f.Evidence, "pre-vote: the member asks before it raises the term, so an isolated member's term stays put; a term that rose anyway means real elections")
	}
	f.Uncertainty = diagnose.Notes{"one member's log: whether the peers are down or only the path to them is cut, their logs or a probe from here tell", "rounds before or after the excerpt are not counted"}
	if v.HasTime && !v.ZoneKnown {
		f.Uncertainty = append(f.Uncertainty, "times without a zone are read as UTC")
	}
	f.Meaning = "no leader: nothing commits through this member; it campaigns on schedule, so its Raft loop runs and its peers do not answer"
	if v.SlowFsyncs == 0 {
		f.Meaning += "; not the disk (no slow fdatasync logged)"
	} else {
		f.Meaning += fmt.Sprintf("; the same log holds %s over 1 s: see that finding", counted(v.SlowFsyncs, "slow fdatasync"))
	}
	f.Next = "nc -vz <peer IP> 2380  # from this member, for each unreachable peer; then etcdctl endpoint status --cluster -w table from another member: do the others have a leader?"
	if v.OneMember {
		// no peer to reach: a lone voter's round that does not win at
		// once waits on its own WAL, not on a network
		f.Uncertainty = diagnose.Notes{"a one-member cluster (one voter): no peer to be cut off from"}
		f.Meaning = "no leader: nothing commits; a lone voter wins its own vote once its WAL is written, so the wait is its disk or a stuck process, not a network"
		f.Next = "sudo etcdscope fsync --comm etcd --duration 60s  # on this member: whether its WAL fdatasync returns"
	}
}

// peerErrors words a peer's logged errors after its line, as many as
// keep the evidence line within cutOffLineRunes, and how many more.
func peerErrors(line string, errs []string) string {
	out := ""
	for i, e := range errs {
		sep := ": "
		if i > 0 {
			sep = "; "
		}
		more := ""
		if i+1 < len(errs) {
			more = " (+" + counted(len(errs)-i-1, "more error") + ")"
		}
		if i > 0 && utf8.RuneCountInString(line+out+sep+e+more) > cutOffLineRunes {
			return out + " (+" + counted(len(errs)-i, "more error") + ")"
		}
		out += sep + e
	}
	return out
}

// cutOffLineRunes: an evidence line's text, so that with its indent and
// "evidence: " it stays within 200 characters.
const cutOffLineRunes = 186

func termSpan(v diagnose.CutOffVerdict) string {
	if v.FirstTerm == v.LastTerm {
		return fmt.Sprint(v.LastTerm)
	}
	return fmt.Sprintf("%d to %d", v.FirstTerm, v.LastTerm)
}

// counted is "1 line", "2 lines".
func counted(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// wordCounter words a fleet counter finding (leader, heartbeat, apply):
// its largest increase over the window, then each member's.
func wordCounter(f *diagnose.Finding, v diagnose.CounterVerdict) {
	n := v.Max()
	over := "over " + v.Window.Round(time.Second).String()
	switch v.Counter {
	case diagnose.CounterLeaderChanges:
		f.Summary = fmt.Sprintf("%.0f leader changes seen %s (the most any member counted)", n, over)
		if n > 0 {
			f.Meaning = "no commits while there is no leader (an election takes at least the election timeout); clients see timeouts"
			f.Next = "look for slow WAL fsync or peer RTT on the old leader in the same window; its etcd log says why it lost leadership"
		}
	case diagnose.CounterHeartbeatFailures:
		f.Summary = fmt.Sprintf("%.0f heartbeat sends failed %s on the worst member", n, over)
		if n > 0 {
			f.Meaning = "a leader that cannot send heartbeats on time (a slow disk holds its Raft loop, or the network to a peer is slow) lets followers campaign"
			f.Next = "sudo etcdscope peers  # on the leader: RTT per peer; and the WAL fsync findings of this cluster"
		}
	case diagnose.CounterSlowApply:
		f.Summary = fmt.Sprintf("%.0f applies took too long (etcd_server_slow_apply_total) %s on the worst member", n, over)
		if n > 0 {
			f.Meaning = "the apply path is behind: reads and writes return late even when the Raft commit itself was fast"
			f.Next = "compare with this cluster's backend commit finding (p99 budget 25 ms); etcdctl check perf"
		}
	}
	for _, m := range v.Members {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s: %s +%.0f", m.Member, v.Counter, m.Increase))
	}
	f.Uncertainty = diagnose.Notes{"counter increases between the query's grid points", "a restart between two points loses the counts before it"}
}

// alarmsOf is the alarms in an endpoint's ERRORS column ("memberID:…
// alarm:NOSPACE" -> "alarm:NOSPACE"), for the summary; the whole column
// is the endpoint's evidence line. Errors other than alarms come whole.
func alarmsOf(errs string) string {
	var alarms []string
	for _, f := range strings.FieldsFunc(errs, func(r rune) bool { return r == ' ' || r == ',' }) {
		if strings.HasPrefix(f, "alarm:") {
			alarms = append(alarms, f)
		}
	}
	if len(alarms) == 0 {
		return errs
	}
	return strings.Join(alarms, ", ")
}

// timeoutsSource says where a stall finding's thresholds came from: etcd's
// defaults, or the start-up line of a log given beside the metrics.
func timeoutsSource(v *diagnose.StallVerdict) string {
	switch {
	case v.HeartbeatFromLog && v.ElectionFromLog:
		return fmt.Sprintf("--heartbeat-interval %s and --election-timeout %s from the log's start-up line", v.Heartbeat, v.Election)
	case v.HeartbeatFromLog:
		return fmt.Sprintf("--heartbeat-interval %s from the log's start-up line; etcd's default --election-timeout %s assumed", v.Heartbeat, v.Election)
	case v.ElectionFromLog:
		return fmt.Sprintf("--election-timeout %s from the log's start-up line; etcd's default --heartbeat-interval %s assumed", v.Election, v.Heartbeat)
	}
	return fmt.Sprintf("etcd's defaults assumed (--heartbeat-interval %s, --election-timeout %s)", v.Heartbeat, v.Election)
}
