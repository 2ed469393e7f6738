package diagnose

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// BimodalShare: each hump must hold at least this share of the series'
// observations (two probers contribute one observation each per 30 s, so
// a steady pair gives 50/50).
const BimodalShare = 0.1

// FindModes reads the humps of a peer RTT series from its per-bucket
// counts. Two modes are claimed only where the ladder shows them: two
// populated buckets with at least one emptier bucket between them.
// etcd's buckets double, so a kept-alive probe (≈1 RTT) and a
// new-connection probe (≥2 RTT) can fall into neighbouring buckets;
// then it says so ("adjacent") instead of guessing.
func FindModes(s etcdmetric.Series) Modes {
	if s.Key.Prober != "" {
		return Modes{Verdict: "per-prober", Why: "the series is labelled by prober (" + s.Key.Prober + "): each prober has its own histogram"}
	}
	var fin []etcdmetric.Bucket
	for _, b := range s.Buckets {
		if !math.IsInf(b.UpperBound, 1) {
			fin = append(fin, b)
		}
	}
	if len(fin) < 2 {
		return Modes{Verdict: "unknown", Why: "fewer than two buckets shown"}
	}
	first := s.FirstBound
	if first == 0 {
		first = etcdmetric.FirstBound
	}
	if fin[0].Count > 0 && math.Abs(fin[0].UpperBound-first) > 1e-3*first {
		return Modes{Verdict: "unknown", Why: fmt.Sprintf("the ladder shown starts at le=%g with %g observations below it: their buckets are missing", fin[0].UpperBound, fin[0].Count)}
	}
	d := make([]float64, len(fin))
	for i := range fin {
		d[i] = fin[i].Count
		if i > 0 {
			d[i] -= fin[i-1].Count
			if math.Abs(fin[i].UpperBound-2*fin[i-1].UpperBound) > 2e-3*fin[i].UpperBound {
				return Modes{Verdict: "unknown", Why: fmt.Sprintf("buckets between le=%g and le=%g are missing", fin[i-1].UpperBound, fin[i].UpperBound)}
			}
		}
	}
	n := fin[len(fin)-1].Count
	if n <= 0 {
		return Modes{Verdict: "unknown", Why: "no observations"}
	}
	var big []int
	for i, v := range d {
		if v >= BimodalShare*n {
			big = append(big, i)
		}
	}
	sort.Slice(big, func(a, b int) bool { return d[big[a]] > d[big[b]] })
	lo := func(i int) float64 {
		if i == 0 {
			return 0
		}
		return fin[i-1].UpperBound
	}
	if len(big) < 2 {
		i := 0
		if len(big) == 1 {
			i = big[0]
		}
		return Modes{Verdict: "one", LowLo: lo(i), LowHi: fin[i].UpperBound, Why: fmt.Sprintf("one bucket (%s–%s] holds %.0f%% : both probers read alike, or their readings share it", fmtSec(lo(i)), fmtSec(fin[i].UpperBound), 100*d[i]/n)}
	}
	i, j := big[0], big[1]
	if i > j {
		i, j = j, i
	}
	m := Modes{LowLo: lo(i), LowHi: fin[i].UpperBound, HighLo: lo(j), HighHi: fin[j].UpperBound, LowShare: d[i] / (d[i] + d[j])}
	if j == i+1 {
		m.Verdict = "adjacent"
		m.Why = fmt.Sprintf("the two fullest buckets, (%s–%s] and (%s–%s], are neighbours: etcd's buckets double, so one hump or two (RTT and ≥2×RTT) look the same here", fmtSec(m.LowLo), fmtSec(m.LowHi), fmtSec(m.HighLo), fmtSec(m.HighHi))
		return m
	}
	valley := math.Inf(1)
	for k := i + 1; k < j; k++ {
		valley = math.Min(valley, d[k])
	}
	if valley >= 0.5*math.Min(d[i], d[j]) {
		m.Verdict = "one"
		m.Why = "one broad hump: the buckets between the two fullest are not emptier"
		return m
	}
	m.Verdict = "two"
	m.Why = fmt.Sprintf("two humps, (%s–%s] with %.0f%% and (%s–%s] with %.0f%%, with emptier buckets between", fmtSec(m.LowLo), fmtSec(m.LowHi), 100*d[i]/n, fmtSec(m.HighLo), fmtSec(m.HighHi), 100*d[j]/n)
	return m
}

// node names where a member's next command runs, for a "# on …"
// comment: the member's name, or, when the evidence named it only by its
// file or URL, the member that input came from.
func (w MemberWindow) node() string {
	if slices.Contains(w.Sources, w.Member) {
		name := w.Member
		if !strings.Contains(name, "://") {
			name = filepath.Base(name)
		}
		return "the member " + name + " came from"
	}
	return "member " + w.Member
}

func (r *Report) peerFindings(ws []MemberWindow, url string) {
	for _, w := range ws {
		for _, s := range w.Peers {
			row := PeerRow{Member: w.Member, To: s.Key.To, Prober: s.Key.Prober, Stats: Stats(&s), Modes: FindModes(s)}
			r.Peers = append(r.Peers, row)
			subj := w.Member + " → " + s.Key.To
			if s.Key.Prober != "" {
				subj += " (" + s.Key.Prober + ")"
			}
			f := Finding{Topic: "peer_rtt", Subject: subj, Severity: OK,
				Next:    fmt.Sprintf("sudo etcdscope peers --etcd-metrics %s --duration 2m  # on %s: the kernel's handshake RTT and srtt to each peer beside this metric", url, w.node()),
				Meaning: "a commit waits for one round trip to the quorum's slower follower on a kept-alive stream, plus its fsync; the metric's new-connection prober (TCP and TLS handshake per probe) is not on that path"}
			h := row.Stats
			f.Evidence = append(f.Evidence, fmt.Sprintf("%s: %s, %s observations (etcd observes once per prober per 30 s)", strings.Join(w.Sources, " → "), w.Window, fmtCount(h.Observations, h.HasCount)))
			if h.HasCount && h.Observations > 0 {
				probers := float64(etcdmetric.ProbersPerPeer)
				if s.Key.Prober != "" {
					probers = 1
				}
				span := time.Duration(h.Observations / probers * float64(etcdmetric.ObserveInterval))
				f.Evidence = append(f.Evidence, fmt.Sprintf("%.0f observations from %.0f prober(s) span about %s", h.Observations, probers, span.Round(time.Minute)))
			}
			if h.HasMean {
				f.Evidence = append(f.Evidence, "mean "+fmtSec(h.Mean))
			}
			if h.P50 != nil {
				f.Evidence = append(f.Evidence, "p50 "+FormatEstimate(h.P50)+", p99 "+FormatEstimate(h.P99))
			}
			if h.Error != "" {
				f.Uncertainty = "quantiles: " + h.Error
			} else if h.P50 != nil && !h.P50.Interpolated && h.P50.Why != "" {
				// A bound, not a value (an excerpt's ladder starting
				// high): say why beside it.
				f.Uncertainty = "quantiles are bounds only: " + h.P50.Why
			}
			m := row.Modes
			switch m.Verdict {
			case "two":
				f.Summary = fmt.Sprintf("two probers, two humps: RTT ≤ %s (the kept-alive prober's hump, one round trip plus the peer's answer); the other hump (%s–%s] is the new-connection prober paying connection setup", fmtSec(m.LowHi), fmtSec(m.HighLo), fmtSec(m.HighHi))
				f.Evidence = append(f.Evidence, m.Why)
				if h.HasMean {
					f.Evidence = append(f.Evidence, fmt.Sprintf("the mean (%s) falls between the humps and reads neither", fmtSec(h.Mean)))
				}
				if m.HighLo >= 4*m.LowHi {
					f.Severity = Warn
					f.Evidence = append(f.Evidence, fmt.Sprintf("the upper hump is ≥ %.0f× the lower: more than TCP+TLS handshakes at this RTT would take; look for slow DNS or TLS on each dial (etcd #11781)", m.HighLo/m.LowHi))
				}
			case "per-prober":
				f.Summary = "per-prober series: " + m.Why
				if strings.Contains(s.Key.Prober, "SNAPSHOT") {
					f.Summary = "kept-alive prober (ROUND_TRIPPER_SNAPSHOT): its reading is one RTT plus the peer's answer"
				} else if strings.Contains(s.Key.Prober, "RAFT_MESSAGE") {
					f.Summary = "new-connection prober (ROUND_TRIPPER_RAFT_MESSAGE): its reading includes a TCP (and TLS) handshake per probe, not just the RTT"
				}
			default:
				f.Summary = "RTT metric: " + m.Why
				f.Uncertainty = strings.TrimPrefix(f.Uncertainty+"; two modes (the two probers) cannot be shown from these buckets", "; ")
				if m.Verdict == "one" && m.LowHi > 0 {
					f.Summary = fmt.Sprintf("one hump (%s–%s]: the RTT is at most %s", fmtSec(m.LowLo), fmtSec(m.LowHi), fmtSec(m.LowHi))
				}
			}
			if m.LowLo >= (DefaultHeartbeat / 2).Seconds() {
				f.Severity = Warn
				f.Evidence = append(f.Evidence, fmt.Sprintf("RTT ≥ %s: set --heartbeat-interval near the RTT and --election-timeout ≥ 10× it", fmtSec(m.LowLo)))
			}
			r.Findings = append(r.Findings, f)
		}
	}
}

// stall is one moment the leader's heartbeats were late (etcd logs one
// line per follower for it).
// coversStalls says whether a member's metrics are evidence for the
// stalls' time: "" when their spans meet (a minute either side), else why
// they may not be (a 2023 export says nothing of a 2017 log).
func coversStalls(row MemberRow, stalls []stall) string {
	var lo, hi time.Time
	for _, s := range stalls {
		if !s.hasTime || !s.yearKnown {
			return "; the log's lines carry no year: whether these numbers cover the stalls is unknown"
		}
		if lo.IsZero() || s.at.Add(-s.gap).Before(lo) {
			lo = s.at.Add(-s.gap)
		}
		if s.at.After(hi) {
			hi = s.at
		}
	}
	switch {
	case lo.IsZero():
		return ""
	case row.To.IsZero():
		return "; the metrics carry no time: whether they cover the stalls is unknown"
	}
	from := row.From
	if from.IsZero() {
		from = row.To
	}
	if row.To.Before(lo.Add(-time.Minute)) || from.After(hi.Add(time.Minute)) {
		return fmt.Sprintf("; NOT the stalls' time: the metrics cover %s to %s, the stalls %s to %s",
			from.UTC().Format(time.RFC3339), row.To.UTC().Format(time.RFC3339), lo.UTC().Format(time.RFC3339), hi.UTC().Format(time.RFC3339))
	}
	return ""
}

type stall struct {
	at        time.Time
	hasTime   bool
	gap       time.Duration
	exceeded  time.Duration
	to        []string
	zoneKnown bool
	yearKnown bool
}

func (r *Report) logFindings(logs []LogRead) {
	for _, lr := range logs {
		var hb, fsync, apply, leader []LogEvent
		interval, election := time.Duration(0), time.Duration(0)
		for _, e := range lr.Events {
			switch e.Kind {
			case EvHeartbeatLate:
				hb = append(hb, e)
			case EvSlowFdatasync:
				fsync = append(fsync, e)
			case EvApplySlow, EvRequestSlow:
				apply = append(apply, e)
			case EvLeader:
				leader = append(leader, e)
			case EvConfig:
				if e.Interval > 0 {
					interval = e.Interval
				}
				if e.Election > 0 {
					election = e.Election
				}
			}
		}
		zoneNote := zoneNote(lr.Events)
		if len(fsync) > 0 {
			var max time.Duration
			for _, e := range fsync {
				max = maxDur(max, e.Took)
			}
			followed := 0
			for _, e := range fsync {
				for _, l := range leader {
					if e.HasTime && l.HasTime && !l.Time.Before(e.Time) && l.Time.Before(e.Time.Add(20*time.Second)) {
						followed++
						break
					}
				}
			}
			ev := firstLines(fsync, 3)
			if len(leader) > 0 {
				ev = append(ev, fmt.Sprintf("%d of them followed by a leader change within 20 s", followed))
			}
			f := Finding{Topic: "slow_fdatasync", Subject: lr.Source, Severity: Bad,
				Summary:     fmt.Sprintf("%s logged over etcd's 1 s warning, the longest %s", plural(len(fsync), "WAL fdatasync call"), max.Round(time.Millisecond)),
				Evidence:    ev,
				Uncertainty: strings.TrimPrefix(zoneNote+"; etcd logs only syncs over 1 s: the histogram (etcd_disk_wal_fsync_duration_seconds) says how the rest fare", "; "),
				Meaning:     "while the WAL fdatasync runs the Raft loop waits: no commit, no heartbeat from this member for that long; over the election timeout on a leader, followers campaign",
				Next:        "sudo etcdscope fsync --comm etcd --duration 60s  # which layer (data writeback, journal, device flush, queue) the slow syncs wait in"}
			r.Findings = append(r.Findings, f)
		}
		if len(hb) > 0 {
			r.Findings = append(r.Findings, r.heartbeatFinding(lr.Source, hb, fsync, leader, interval, election, zoneNote))
		}
		if len(apply) > 0 {
			var max time.Duration
			for _, e := range apply {
				max = maxDur(max, e.Took)
			}
			// etcd's warning threshold (warnApplyDuration) was 10 ms in
			// v3.0-v3.1 and 100 ms since v3.2 (--warning-apply-duration
			// since v3.5): a 3.0 log holds 12 ms applies, which are fine.
			sev, round := Warn, time.Millisecond
			meaning := "the apply path is behind: reads and writes return late even when the Raft commit itself was fast"
			if max < 100*time.Millisecond {
				sev, round = OK, 100*time.Microsecond
				meaning = "under 100 ms: logged only by etcd v3.0-v3.1's 10 ms threshold; not what makes commits slow"
			}
			r.Findings = append(r.Findings, Finding{Topic: "apply", Subject: lr.Source, Severity: sev,
				Summary:     fmt.Sprintf("%s logged as taking too long (over etcd's warning threshold: 100 ms since v3.2, 10 ms in v3.0-v3.1), the longest %s", plural(len(apply), "request or apply"), max.Round(round)),
				Evidence:    firstLines(apply, 3),
				Uncertainty: "etcd logs these after the fact; a slow disk (backend commit), CPU starvation or a large range request all cause them",
				Meaning:     meaning,
				Next:        "etcdctl check perf, and compare with etcd_disk_backend_commit_duration_seconds (p99 budget 25 ms)"})
		}
		if c := cutOffFinding(lr.Source, lr.Events); c != nil {
			r.Findings = append(r.Findings, *c)
		}
		if len(leader) > 0 {
			terms := map[int]bool{}
			for _, e := range leader {
				terms[e.Term] = true
			}
			r.Findings = append(r.Findings, Finding{Topic: "leader", Subject: lr.Source, Severity: Warn,
				Summary:  fmt.Sprintf("leadership changed: %s over %s", plural(len(leader), "leader line"), plural(len(terms), "term")),
				Evidence: firstLines(leader, 4),
				Meaning:  "no commits while there is no leader (an election takes at least the election timeout); clients see timeouts"})
		}
	}
}

func (r *Report) heartbeatFinding(src string, hb, fsync, leader []LogEvent, interval, election time.Duration, zoneNote string) Finding {
	electionFrom := "from the log"
	if election == 0 {
		election, electionFrom = DefaultElection, "etcd's default; no start-up line in the log"
	}
	var stalls []stall
	for _, e := range hb {
		if e.Interval == 0 && interval > 0 {
			e.Interval = interval
		}
		g := e.Gap()
		if n := len(stalls); n > 0 && e.HasTime && stalls[n-1].hasTime && absDur(e.Time.Sub(stalls[n-1].at)) <= 50*time.Millisecond {
			st := &stalls[n-1]
			st.gap, st.exceeded = maxDur(st.gap, g), maxDur(st.exceeded, e.Exceeded)
			if e.To != "" {
				st.to = append(st.to, e.To)
			}
			continue
		}
		stalls = append(stalls, stall{at: e.Time, hasTime: e.HasTime, gap: g, exceeded: e.Exceeded, zoneKnown: e.ZoneKnown, yearKnown: e.YearKnown})
		if e.To != "" {
			stalls[len(stalls)-1].to = []string{e.To}
		}
	}
	var maxGap, maxExc time.Duration
	over := 0
	for _, s := range stalls {
		maxGap, maxExc = maxDur(maxGap, s.gap), maxDur(maxExc, s.exceeded)
		if s.gap >= election {
			over++
		}
	}
	f := Finding{Topic: "heartbeat", Subject: src, Severity: Warn}
	if maxGap > 0 {
		f.Summary = fmt.Sprintf("%s in %d leader stall(s); longest gap between heartbeats %s (2×%s heartbeat interval + %s exceeded); %d stall(s) reached the %s election timeout",
			plural(len(hb), "late heartbeat line"), len(stalls), maxGap.Round(time.Millisecond), hbInterval(hb, interval), maxExc.Round(time.Millisecond), over, election)
	} else {
		f.Summary = fmt.Sprintf("%s in %d leader stall(s); up to %s over the expected 2×interval (the line does not give the interval)", plural(len(hb), "late heartbeat line"), len(stalls), maxExc.Round(time.Millisecond))
	}
	if over > 0 {
		f.Severity = Bad
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("election timeout %s (%s)", election, electionFrom))
	// Match stalls to slow fdatasync lines in the same window: a sync
	// that ended within the gap before the warning (or just after).
	matched := 0
	for _, s := range stalls {
		if !s.hasTime {
			continue
		}
		for _, e := range fsync {
			if e.HasTime && !e.Time.Before(s.at.Add(-s.gap-time.Second)) && !e.Time.After(s.at.Add(time.Second)) {
				matched++
				break
			}
		}
	}
	switch {
	case len(fsync) > 0:
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d of %d stall(s) have a slow fdatasync (>1 s) logged within their gap", matched, len(stalls)))
	default:
		f.Evidence = append(f.Evidence, "no slow fdatasync (>1 s) logged: syncs shorter than 1 s can still cause gaps this size; see the WAL fsync histogram")
	}
	for _, row := range r.Members {
		if row.WAL.P99 != nil {
			sev, s := verdictP99(row.WAL.P99, WALFsyncBudget)
			f.Evidence = append(f.Evidence, fmt.Sprintf("metrics, member %s: WAL fsync %s (%s)%s", row.Member, s, sev, coversStalls(row, stalls)))
		}
	}
	for _, s := range stalls {
		for _, to := range s.to {
			for _, p := range r.Peers {
				if to != "" && p.To == to && (p.Modes.Verdict == "two" || p.Modes.Verdict == "one") && p.Modes.LowHi > 0 {
					f.Evidence = append(f.Evidence, fmt.Sprintf("RTT to %s ≤ %s (peer metric): the network cannot explain a %s gap", to, fmtSec(p.Modes.LowHi), s.gap.Round(time.Millisecond)))
				}
			}
		}
	}
	after := 0
	for _, s := range stalls {
		for _, e := range leader {
			if s.hasTime && e.HasTime && e.Time.After(s.at.Add(-time.Second)) && e.Time.Before(s.at.Add(20*time.Second)) {
				after++
				break
			}
		}
	}
	if len(leader) > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d stall(s) followed by a leader change within 20 s", after))
	}
	for i, s := range stalls {
		if i == 3 {
			break
		}
		line := fmt.Sprintf("stall at %s: gap %s", FormatStamp(s.at, s.hasTime, s.zoneKnown, s.yearKnown), s.gap.Round(time.Millisecond))
		if len(s.to) > 0 {
			line += " to " + strings.Join(s.to, ",")
		}
		f.Evidence = append(f.Evidence, line)
	}
	f.Uncertainty = strings.TrimPrefix(zoneNote+"; a late heartbeat says the leader's Raft loop stalled, not why: a WAL fsync, CPU starvation, or a blocked send", "; ")
	f.Meaning = "for the gap the leader sent nothing to that follower: proposals then waited at least as long; a gap past the election timeout makes followers campaign, and nothing commits until a new leader is elected"
	if matched > 0 {
		f.Next = "sudo etcdscope fsync --comm etcd --duration 60s  # on the leader: the slow syncs' kernel layers"
	} else {
		f.Next = "sudo etcdscope fsync --comm etcd --duration 60s  # on the leader, to rule the disk in or out; then pidstat -p $(pgrep -x etcd) 1 for CPU starvation"
	}
	return f
}

func hbInterval(hb []LogEvent, cfg time.Duration) string {
	for _, e := range hb {
		if e.Interval > 0 {
			return e.Interval.String()
		}
	}
	return cfg.String()
}

func zoneNote(evs []LogEvent) string {
	noZone, noYear := false, false
	for _, e := range evs {
		if e.HasTime && !e.ZoneKnown {
			noZone = true
		}
		if e.HasTime && !e.YearKnown {
			noYear = true
		}
	}
	var n []string
	if noZone {
		n = append(n, "times without a zone (capnslog, syslog) are read as UTC: compare across files with care")
	}
	if noYear {
		n = append(n, "syslog stamps have no year: --since/--until skip them")
	}
	return strings.Join(n, "; ")
}

func firstLines(evs []LogEvent, n int) []string {
	var out []string
	for i, e := range evs {
		if i == n {
			out = append(out, fmt.Sprintf("… and %d more", len(evs)-n))
			break
		}
		out = append(out, fmt.Sprintf("line %d: %s", e.Line, truncateText(e.Text, 140)))
	}
	return out
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func maxDur(a, b time.Duration) time.Duration {
	if b > a {
		return b
	}
	return a
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// noSyncMeaning is a fio finding's meaning when the run shows no sync
// latency: its numbers say nothing either way (a write's clat is not the
// fdatasync that etcd's commit waits for).
const noSyncMeaning = "etcd's commit waits for the WAL's fdatasync; this run shows no sync latency, so it cannot say whether the disk meets the 10 ms budget"

func (r *Report) fioFindings() {
	for _, run := range r.Fio {
		f := Finding{Topic: "fio", Subject: strings.TrimSpace(run.Source + " " + run.Job),
			Meaning: "fio's write+fdatasync loop is what etcd's WAL does alone on an idle disk: under 10 ms p99 the disk can meet etcd's budget; etcd's own histogram under load is the final word",
			Next:    "sudo etcdscope fsync --comm fio  # while rerunning the same fio: which kernel layer the fdatasync waits in"}
		if run.Interrupted {
			f.Evidence = append(f.Evidence, "fio was stopped by a signal (\"fio: terminating on signal\"): the numbers cover less than the job's runtime or size")
		}
		if !run.HasSync && run.Synced() {
			// The job synced, but the output shows no sync latency:
			// an excerpt cut before fio's sync section, or a fio older
			// than 3.5 (which prints none). Unknown, not "no sync".
			f.Severity = Unknown
			f.Summary = fmt.Sprintf("the job synced (%s) but this output shows no sync latency: it was cut before fio's sync section, or fio is older than 3.5; the write clat it shows is not the fdatasync", run.SyncOption())
			if run.WriteP99 > 0 {
				f.Evidence = append(f.Evidence, "write clat p99 "+FormatDuration(run.WriteP99)+" (without the fdatasync)")
			}
			f.Meaning = noSyncMeaning
			f.Next = "rerun with fio 3.5 or newer and --output-format=json, and paste the whole output"
			r.Findings = append(r.Findings, f)
			continue
		}
		if !run.HasSync {
			f.Severity = Warn
			f.Summary = "this fio run made no fsync/fdatasync: it does not measure what etcd's WAL waits for"
			if rw := firstNonEmpty(run.Options["rw"], run.Options["readwrite"]); rw == "read" || rw == "randread" {
				f.Summary = "this fio job only reads (rw=" + rw + "): it wrote nothing and synced nothing, so it says nothing of what etcd's WAL waits for"
			}
			if run.WriteP99 > 0 {
				f.Evidence = append(f.Evidence, "write clat p99 "+FormatDuration(run.WriteP99))
			}
			f.Meaning = noSyncMeaning
			f.Next = "fio --rw=write --ioengine=sync --fdatasync=1 --directory=<dir on etcd's disk> --size=22m --bs=2300 --name=etcdcheck"
			r.Findings = append(r.Findings, f)
			continue
		}
		p99, ok := run.P(99)
		switch {
		case !ok:
			f.Severity, f.Summary = Unknown, "fio printed no 99th percentile of its syncs"
			f.Meaning = "without the syncs' p99 this run cannot say whether the disk meets etcd's 10 ms WAL budget"
		case p99 >= WALFsyncBudget:
			f.Severity, f.Summary = Bad, fmt.Sprintf("fdatasync p99 %s: over etcd's 10 ms WAL budget", FormatDuration(p99))
			// fio alone on the disk is etcd's best case: a busy node only adds.
			f.Meaning = "fio's write+fdatasync loop is what etcd's WAL does alone on an idle disk: over 10 ms p99 here, etcd's own WAL fsyncs on this disk will miss the budget too, and every write's commit waits for one (slow fdatasync warnings, missed heartbeats, elections under load)"
		default:
			f.Severity, f.Summary = OK, fmt.Sprintf("fdatasync p99 %s: under etcd's 10 ms WAL budget", FormatDuration(p99))
		}
		for _, p := range run.Percentiles {
			if p.Pct == 50 || p.Pct == 99.9 || p.Pct == 99.99 {
				f.Evidence = append(f.Evidence, fmt.Sprintf("p%g %s", p.Pct, FormatDuration(p.Latency)))
			}
		}
		if run.SyncMean > 0 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("sync min %s, mean %s, max %s", FormatDuration(run.SyncMin), FormatDuration(run.SyncMean), FormatDuration(run.SyncMax)))
		}
		if top := run.Percentiles; run.SyncMax > 0 && len(top) > 0 && top[len(top)-1].Latency > run.SyncMax {
			// fio stat.c's plat_idx_to_val: a percentile is the middle
			// of its histogram bin, so it can pass the exact max.
			// To the µs: three digits can print the two alike, or the
			// percentile under the max ("15.8ms above 15.8ms").
			p := top[len(top)-1]
			f.Evidence = append(f.Evidence, fmt.Sprintf("p%g %s reads above the max %s: fio prints a percentile as the middle of its histogram bin (bins up to ~3%% wide), the max exactly", p.Pct, p.Latency.Round(time.Microsecond), run.SyncMax.Round(time.Microsecond)))
		}
		if p999, ok := run.P(99.9); ok && p999 >= WALFsyncBudget && f.Severity == OK {
			f.Severity = Warn
			f.Summary += fmt.Sprintf(", but p99.9 %s is over it", FormatDuration(p999))
			f.Evidence = append(f.Evidence, fmt.Sprintf("the tail past p99 reaches %s at p99.9: a few syncs per thousand would miss the budget", FormatDuration(p999)))
		}
		var notes []string
		if bs := run.Options["bs"]; bs != "" && bs != "2300" && bs != "2300B" {
			notes = append(notes, "bs="+bs+" (etcd's check uses 2300-byte writes, about a WAL entry batch)")
		}
		if e := run.Options["ioengine"]; e != "" && e != "sync" {
			notes = append(notes, "ioengine="+e+" (etcd writes with plain write(2): use ioengine=sync)")
		}
		if v := run.Options["fdatasync"]; v != "" && v != "1" {
			notes = append(notes, "fdatasync="+v+" (etcd syncs after every write batch: use 1)")
		}
		if len(notes) > 0 {
			f.Uncertainty = "not etcd's check: " + strings.Join(notes, "; ")
		}
		if run.Version != "" {
			src := "as " + run.Version + " printed them"
			if run.SyncCount > 0 {
				src += fmt.Sprintf(", from %.0f syncs", run.SyncCount)
			}
			f.Evidence = append(f.Evidence, src)
		}
		r.Findings = append(r.Findings, f)
	}
}
