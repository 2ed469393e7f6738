package render

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/analysis/stats"
)

// PeerLinkLabel names a link: "etcd[123] 127.0.0.1 → [456] 127.0.0.2
// (active)"; a process that is not etcd by its name and how many of its
// processes the link holds, "curl[19 pids] 127.0.0.1 → 127.0.0.2
// (active)" (peers.Link.FromAnyPID); one that names no process says why,
// "127.0.0.1 → 127.0.0.2 (active; no process: closed before its owner was
// found)" (peers.LinkStats.NoOwner); the folded one (peers.MaxLinks) by
// what it holds.
func PeerLinkLabel(l *peers.LinkStats) string {
	if l.Folded > 0 {
		return fmt.Sprintf("other (%d links folded: a report keeps the %d that moved the most bytes apart)", l.Folded, peers.MaxLinks)
	}
	to := l.Link.To.String()
	if l.Link.ToPID != 0 {
		to = fmt.Sprintf("[%d] %s", l.Link.ToPID, to)
	}
	if why, ok := noOwnerWords[l.NoOwner]; ok {
		// No process to name: why, in the row.
		return fmt.Sprintf("%s → %s (%s; no process: %s)", peerFrom(l.Link, l.Processes, true), to, l.Link.Direction, why)
	}
	return fmt.Sprintf("%s → %s (%s)", peerFrom(l.Link, l.Processes, true), to, l.Link.Direction)
}

// noOwnerWords say why a link names no process (peers.NoOwner).
var noOwnerWords = map[peers.NoOwner]string{
	peers.NoOwnerClosed:   "closed before its owner was found",
	peers.NoOwnerNotFound: "its owner was not found",
}

// PeerLinkFrom names a link's local end: "etcd[12565]", "curl[*]" (every
// curl process: peers.Link.FromAnyPID), or its address.
func PeerLinkFrom(l peers.Link) string { return peerFrom(l, 0, false) }

// peerFrom names a link's From end: the process, when known, counted as
// processes (0: "*") for a FromAnyPID link, and with the address when
// withAddr.
func peerFrom(l peers.Link, processes int, withAddr bool) string {
	comm := l.FromComm // the table's "[42] 10.0.0.1" when not known
	if !withAddr {
		comm = dash(comm)
	}
	proc := ""
	switch {
	case l.FromAnyPID && processes >= peers.MaxProcesses:
		proc = fmt.Sprintf("%s[%d+ pids]", comm, processes)
	case l.FromAnyPID && processes > 0:
		proc = fmt.Sprintf("%s[%s]", comm, counted(processes, "pid"))
	case l.FromAnyPID:
		proc = comm + "[*]"
	case l.FromPID != 0:
		proc = fmt.Sprintf("%s[%d]", comm, l.FromPID)
	}
	switch {
	case proc == "":
		return l.From.String()
	case withAddr:
		return proc + " " + l.From.String()
	}
	return proc
}

// UnassembledLine says how many events were not assembled
// (peers.MaxOpenConns).
func UnassembledLine(n int) string {
	return fmt.Sprintf("%d events not assembled: they came on connections past the %d held open at once (peers.MaxOpenConns); the links above miss them", n, peers.MaxOpenConns)
}

// FoldedEarlyLine says how many closed connections were folded into
// their links before their time (peers.MaxHeldClosed).
func FoldedEarlyLine(n int) string {
	return fmt.Sprintf("%d closed connections folded early: more than %d were held (peers.MaxHeldClosed); a loopback pair among them may count twice", n, peers.MaxHeldClosed)
}

func ns(v int64) string {
	if v == 0 {
		return "-"
	}
	return time.Duration(v).Round(time.Microsecond).String()
}

// summaryCell is a table cell "p50/hi (n)" of s, or none (why the link
// has no sample, in words) when s is empty: "-/- (0)" read as a fault.
func summaryCell(s stats.Summary, hi int64, none string) string {
	if s.Count == 0 {
		return none
	}
	return fmt.Sprintf("%s/%s (%d)", ns(s.P50), ns(hi), s.Count)
}

// noneIf is a, when cond, else b.
func noneIf(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// Peers prints the report of `etcdscope peers`: one row per link, the
// members, and the comparison of etcd's peer RTT metric.
func Peers(w io.Writer, rep *etcdmetric.PeersReport) {
	t := NewTerminal(w) // member names and URLs come from etcd
	defer t.Flush()
	w = t
	fmt.Fprintf(w, "etcdscope peers: %.1fs on port %d, %d events, %d lost, %d missed\n", rep.WindowSeconds, rep.Port, rep.Events, rep.LostEvents, rep.MissedEvents)
	// The verdicts first (issue 26: the number and the cause on the first
	// screen), then the links and the metric's table behind them.
	for _, sp := range rep.Slow {
		fmt.Fprintf(w, "verdict: %s\n", SlowPeerVerdict(sp))
	}
	for _, c := range rep.Metric {
		fmt.Fprintf(w, "verdict: %s%s: %s\n", c.Key.To, comparisonWho(c), ComparisonVerdict(c.Comparison))
	}
	warn := leaderWarning(rep)
	if warn != "" {
		fmt.Fprintf(w, "WARNING: %s\n", warn)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LINK\tOPENED/MIN\tCLOSED/MIN\tHANDSHAKE RTT p50/p99 (n)\tSRTT p50/max (conns)\tMIN RTT p50\tSETUP p50/p99 (n)\tPER-REQUEST p50/p99 (n)\tLIFETIME p50\tRETRANS")
	for _, l := range rep.Links {
		link := PeerLinkLabel(&l)
		if slices.Contains(rep.NotMemberLinks, l.Link) {
			link += " (not a member)"
		}
		if l.Down() {
			link += fmt.Sprintf(" PEER DOWN / UNREACHABLE (%d connects failed)", l.Failed)
		}
		opened := noneIf(l.Opened == 0, "none opened", "none measured")
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n",
			link, l.OpenedPerMinute, l.ClosedPerMinute,
			summaryCell(l.HandshakeRTT, l.HandshakeRTT.P99, opened),
			summaryCell(l.SRTT, l.SRTT.Max, noneIf(l.KeptAlive == 0, "none kept alive", "none measured")), ns(l.MinRTT.P50),
			summaryCell(l.Setup, l.Setup.P99, opened),
			summaryCell(l.PerRequest, l.PerRequest.P99, "none"),
			ns(l.Lifetime.P50), l.Retransmits)
	}
	tw.Flush()
	if o := rep.Owners; o != nil {
		if n := o.QueueDrops + o.LearnedDrops + uint64(o.LateOwnersMissed); n > 0 {
			fmt.Fprintf(w, "socket owners: %d look-ups dropped or too late (queue full %d, not handed over %d, connection folded first %d): their links may show no pid\n",
				n, o.QueueDrops, o.LearnedDrops, o.LateOwnersMissed)
		}
	}
	if len(rep.Links) == 0 {
		fmt.Fprintf(w, "no connections on port %d seen\n", rep.Port)
	}
	if n := len(rep.NotMemberLinks); n > 0 {
		fmt.Fprintf(w, "%s marked (not a member) to no member's peer address: another cluster, or another process, on port %d\n",
			counted(n, "link"), rep.Port)
	}
	if rep.Unassembled > 0 {
		fmt.Fprintln(w, UnassembledLine(rep.Unassembled))
	}
	if rep.FoldedEarly > 0 {
		fmt.Fprintln(w, FoldedEarlyLine(rep.FoldedEarly))
	}
	if len(rep.Members) > 0 {
		fmt.Fprintln(w)
		for _, m := range rep.Members {
			lead := ""
			if m.Leader {
				lead = " (leader)"
			}
			fmt.Fprintf(w, "member %s %s peer URLs on %v%s\n", m.ToLabel(), m.Name, m.PeerIPs, lead)
		}
		if len(rep.Members) == 1 {
			fmt.Fprintf(w, "a one-member cluster: no peer traffic on port %d to trace\n", rep.Port)
		}
	}
	if rep.MetricsURL == "" {
		return
	}
	fmt.Fprintf(w, "\n%s from %s (member pid %d), between the two scrapes:\n", etcdmetric.MetricName, rep.MetricsURL, rep.MemberPID)
	if rep.MetricsError != "" {
		fmt.Fprintf(w, "  error: %s\n", rep.MetricsError)
	}
	if len(rep.Metric) == 0 {
		fmt.Fprintf(w, "  no %s series (a member has one per peer)\n", etcdmetric.MetricName)
		return
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TO\tPROBER\tMEMBER\tPEER\tOBS\tMEAN\tp50\tp99\tRTT\tINFLATION\tMODEL MEAN\tMODEL INFLATION\tVERDICT")
	for _, c := range rep.Metric {
		p50, p99 := sec(c.P50), sec(c.P99)
		if c.QuantileError != "" {
			p50, p99 = "n/a", "n/a"
		}
		peer := "-"
		if c.Peer.IsValid() {
			peer = c.Peer.String()
		}
		verdict := "not explained"
		switch {
		case c.Kind == etcdmetric.CompareNoObservations || c.Kind == etcdmetric.CompareNoModel:
			verdict = "n/a" // nothing was compared (the verdict line says why)
		case c.Input.PeerDown:
			verdict = "peer down / unreachable"
		case c.Explained:
			verdict = "explained"
		case c.Kind == etcdmetric.CompareInconclusiveFloor:
			verdict = "inconclusive (under the noise floor)"
		case c.Inconclusive:
			verdict = "inconclusive (few observations)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Key.To, dash(c.Key.Prober), dash(c.Member), peer,
			c.Observations, sec(c.Mean), p50, p99, sec(c.Input.RTT.Seconds()), times(c.Inflation), sec(c.Prediction.Mean), times(c.ModelInflation), verdict)
	}
	tw.Flush()
	modelled := false
	for _, c := range rep.Metric {
		m := ComparisonModel(c.Comparison)
		if len(m) == 0 && c.QuantileError == "" {
			continue // its verdict, at the top, is all there is
		}
		fmt.Fprintf(w, "  %s:\n", c.Key.To)
		for _, l := range m {
			fmt.Fprintf(w, "    %s\n", l)
			modelled = true
		}
		if c.QuantileError != "" {
			fmt.Fprintf(w, "    p50/p99 not interpolated: %s\n", quantileError(c.Comparison))
		}
	}
	if modelled {
		fmt.Fprintf(w, "  how the model reads etcd's metric: %s\n", PeersModelDoc)
	}
	for _, k := range rep.Resets {
		fmt.Fprintf(w, "  %s: counts fell between the scrapes (etcd restarted): only the end scrape is used\n", k.To)
	}
}

// PeersMetricNotCaptured says that a peers capture holds no scrapes of
// etcd's metric (made without --etcd-metrics, or before captures kept
// them), and how to get the comparison.
func PeersMetricNotCaptured() string {
	return fmt.Sprintf("%s: not in this capture (made without --etcd-metrics, or by an etcdscope before 2026-12-07); capture again with peers --etcd-metrics URL --capture FILE for the comparison", etcdmetric.MetricName)
}

// SlowPeerVerdict words a peer that answered more slowly than etcd's
// heartbeat interval: the peer and the number first, then what it means
// for Raft.
func SlowPeerVerdict(sp etcdmetric.SlowPeer) string {
	who := sp.Peer.String()
	if sp.Member != "" {
		who = sp.Member + " (" + who + ")"
	}
	part := "connection setup"
	if sp.Part == etcdmetric.SlowRequest {
		part = "request"
	}
	whence := "etcd's default"
	if sp.Timeouts.FromFlags {
		whence = "its flags"
	}
	d := func(v time.Duration) string { return v.Round(time.Millisecond).String() }
	if sp.OverElection {
		return fmt.Sprintf("%s: %s p99 %s from %s, over the election timeout (%s, %s): the peer stopped answering (stopped, stalled or cut off); heartbeats missed",
			who, part, d(sp.P99), PeerLinkFrom(sp.From), d(sp.Timeouts.Election), whence)
	}
	return fmt.Sprintf("%s: %s p99 %s from %s, over the heartbeat interval (%s, %s): the peer answered late (a stall or an overloaded host); heartbeats late",
		who, part, d(sp.P99), PeerLinkFrom(sp.From), d(sp.Timeouts.Heartbeat), whence)
}

// comparisonWho names a comparison's member and peer address, when the
// member list matched them: " (c, 127.0.0.13)".
func comparisonWho(c etcdmetric.PeerComparison) string {
	var who []string
	if c.Key.Prober != "" {
		who = append(who, c.Key.Prober)
	}
	if c.Member != "" {
		who = append(who, c.Member)
	}
	if c.Peer.IsValid() {
		who = append(who, c.Peer.String())
	}
	if len(who) == 0 {
		return ""
	}
	return " (" + strings.Join(who, ", ") + ")"
}

func sec(s float64) string {
	if s == 0 {
		return "-"
	}
	return time.Duration(s * 1e9).Round(time.Microsecond).String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func times(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fx", r)
}

// PeersJSON writes the report of `etcdscope peers --output json`: one
// indented JSON object, each comparison's "verdict" in words.
func PeersJSON(w io.Writer, rep *etcdmetric.PeersReport) error {
	r := *rep
	r.Metric = WordComparisons(rep.Metric)
	r.LeaderWarning = leaderWarning(rep)
	enc := json.NewEncoder(JSONText(w))
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WordComparisons returns a copy of cs with each Verdict in words (for the
// JSON and the peers recording's etcd_peer_metric record).
func WordComparisons(cs []etcdmetric.PeerComparison) []etcdmetric.PeerComparison {
	if cs == nil {
		return nil
	}
	out := make([]etcdmetric.PeerComparison, len(cs))
	for i, c := range cs {
		c.Verdict = ComparisonVerdict(c.Comparison)
		if m := ComparisonModel(c.Comparison); m != nil {
			c.Model = strings.Join(m, "; ")
		}
		c.QuantileError = quantileError(c.Comparison)
		out[i] = c
	}
	return out
}

// leaderWarning words the warning that the leader is the member farthest
// from here (rep.FarLeader); a report read back keeps its words.
func leaderWarning(rep *etcdmetric.PeersReport) string {
	l := rep.FarLeader
	if l == nil {
		return rep.LeaderWarning
	}
	return fmt.Sprintf("the leader %s (%s) has the highest RTT from here (%s, next %s): every write waits on it; move it with 'etcdctl move-leader <near member ID>'",
		l.Leader.Name, l.Leader.ToLabel(), l.RTT, l.Next)
}

// quantileError: why the p50/p99 are not interpolated, with the words of
// the estimate that is a bound.
func quantileError(c etcdmetric.Comparison) string {
	if e := c.QuantileEstimate; e != nil {
		if why := estimateWhy(e); why != "" {
			return why
		}
	}
	return c.QuantileError
}

// ComparisonVerdict words etcdmetric.Compare's verdict in one line: the
// metric against the model, then whether the model explains it and why
// not. A comparison read back from a recording keeps the words it was
// written with. The model's terms are ComparisonModel's line; the
// reasoning is docs/peers.md's (PeersModelDoc).
func ComparisonVerdict(c etcdmetric.Comparison) string {
	in := c.Input
	mean, pm := c.Mean, c.Prediction.Mean
	s := formatSeconds
	switch c.Kind {
	case etcdmetric.CompareNone:
		return c.Verdict
	case etcdmetric.ComparePeerDown:
		return fmt.Sprintf("peer down / unreachable: %d connects failed, none established; failed probes reset etcd's EWMA to 0, so the metric (mean %s) says nothing about the network", in.FailedConnects, s(mean))
	case etcdmetric.CompareNoObservations:
		return "no observations between the scrapes: nothing to compare (etcd observes once per prober per 30 s; trace longer)"
	case etcdmetric.CompareNoModel:
		return "no kernel measurement for this peer: cannot model it"
	}
	// The verdict and the number that decides it first, then the real
	// RTT, then the metric and the model it was held against.
	tail := fmt.Sprintf("; RTT %s, metric mean %s (%.1fx), model %s", s(in.RTT.Seconds()), s(mean), c.Inflation, s(pm))
	switch c.Kind {
	case etcdmetric.CompareInconclusiveFloor:
		return fmt.Sprintf("INCONCLUSIVE: %s from the model (%.2fx), under the %s noise floor", s(math.Abs(mean-pm)), c.Ratio, s(etcdmetric.NoiseFloorSeconds)) + tail
	case etcdmetric.CompareInconclusiveSpread:
		return fmt.Sprintf("INCONCLUSIVE: %.2fx the model, within 2 standard errors (±%s, %.0f observations): trace longer", c.Ratio, s(c.StandardErrorSeconds), c.Observations) + tail
	case etcdmetric.CompareAbove:
		return fmt.Sprintf("NOT EXPLAINED: %s above the model (%.2fx): DNS (etcd #11781), TLS or a slow peer", s(mean-pm), c.Ratio) + tail
	case etcdmetric.CompareBelow:
		return fmt.Sprintf("NOT EXPLAINED: %.2fx the model, below it (failing probes reset srtt to 0, or too few observations)", c.Ratio) + tail
	}
	if !dialAdds(c) {
		// ComparisonModel's line says "dialling adds nothing": the
		// verdict must not name the dials.
		return fmt.Sprintf("EXPLAINED (%.2fx the model) by kept-alive probes (the peer's answer) and etcd's EWMA/buckets; dials add nothing", c.Ratio) + tail
	}
	return fmt.Sprintf("EXPLAINED (%.2fx the model) by new-connection probes and etcd's EWMA/buckets, not the network", c.Ratio) + tail
}

// dialAdds: the model has probers that dial, and their dials add to the
// mean (etcdmetric.Prediction.NewConnShare).
func dialAdds(c etcdmetric.Comparison) bool {
	return !c.NewConnAddsNothing && c.Prediction.NewConnProbers > 0 && c.Prediction.NewConnShare > 0
}

// ComparisonModel words the model's terms behind ComparisonVerdict: how
// many probers dial, at what cost, what the kept-alive one reads, and what
// the dialling adds; "" when no model was made. Each further line (a
// warming EWMA, etcdscope's failed probe) is its own element.
func ComparisonModel(c etcdmetric.Comparison) []string {
	switch c.Kind {
	case etcdmetric.CompareNone, etcdmetric.ComparePeerDown, etcdmetric.CompareNoObservations, etcdmetric.CompareNoModel:
		return nil
	}
	in := c.Input
	s := formatSeconds
	how := "estimated from kernel srtt"
	if in.ReusedMeasured {
		how = "etcdscope's kept-alive probe"
	}
	line := fmt.Sprintf("model: %.0f of %d probers dial per probe (%.1f new connections/min, %s each), the others reuse one (%s, %s); ",
		c.Prediction.NewConnProbers, in.Probers, in.NewConnPerMinute, s(in.NewConnProbe.Seconds()), s(math.Max(in.ReusedProbe.Seconds(), in.RTT.Seconds())), how)
	if !dialAdds(c) {
		line += "dialling adds nothing"
	} else {
		line += fmt.Sprintf("dialling adds %s to the mean", s(c.Prediction.NewConnShare))
	}
	lines := []string{line}
	if in.WarmingUp() {
		lines = append(lines, fmt.Sprintf("EWMA (α=0.125 from 0) still warming up in this window (%s to %s of uptime)", in.UptimeStart.Round(time.Second), in.UptimeEnd.Round(time.Second)))
	}
	if !in.ReusedMeasured && in.ProbeError != "" {
		lines = append(lines, "etcdscope's kept-alive probe failed: "+in.ProbeError)
	}
	return lines
}

// PeersModelDoc is where the model behind the verdicts is explained.
const PeersModelDoc = "docs/peers.md#etcds-metric-and-the-model"
