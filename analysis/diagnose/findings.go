package diagnose

import (
	"math"
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
		return Modes{Verdict: ModesPerProber, Reason: ModesByProber, Prober: s.Key.Prober}
	}
	var fin []etcdmetric.Bucket
	for _, b := range s.Buckets {
		if !math.IsInf(b.UpperBound, 1) {
			fin = append(fin, b)
		}
	}
	if len(fin) < 2 {
		return Modes{Verdict: ModesUnknown, Reason: ModesFewBuckets}
	}
	first := s.FirstBound
	if first == 0 {
		first = etcdmetric.FirstBound
	}
	if fin[0].Count > 0 && math.Abs(fin[0].UpperBound-first) > 1e-3*first {
		return Modes{Verdict: ModesUnknown, Reason: ModesLadderHigh, LE: fin[0].UpperBound, Below: fin[0].Count}
	}
	d := make([]float64, len(fin))
	for i := range fin {
		d[i] = fin[i].Count
		if i > 0 {
			d[i] -= fin[i-1].Count
			if math.Abs(fin[i].UpperBound-2*fin[i-1].UpperBound) > 2e-3*fin[i].UpperBound {
				return Modes{Verdict: ModesUnknown, Reason: ModesGap, GapFrom: fin[i-1].UpperBound, LE: fin[i].UpperBound}
			}
		}
	}
	n := fin[len(fin)-1].Count
	if n <= 0 {
		return Modes{Verdict: ModesUnknown, Reason: ModesNoObservations}
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
		return Modes{Verdict: ModesOne, Reason: ModesOneBucket, LowLo: lo(i), LowHi: fin[i].UpperBound, LowPct: 100 * d[i] / n}
	}
	i, j := big[0], big[1]
	if i > j {
		i, j = j, i
	}
	m := Modes{LowLo: lo(i), LowHi: fin[i].UpperBound, HighLo: lo(j), HighHi: fin[j].UpperBound, LowShare: d[i] / (d[i] + d[j])}
	if j == i+1 {
		m.Verdict, m.Reason = ModesAdjacent, ModesNeighbours
		return m
	}
	valley := math.Inf(1)
	for k := i + 1; k < j; k++ {
		valley = math.Min(valley, d[k])
	}
	if valley >= 0.5*math.Min(d[i], d[j]) {
		m.Verdict, m.Reason = ModesOne, ModesBroad
		return m
	}
	m.Verdict, m.Reason = ModesTwo, ModesTwoHumps
	m.LowPct, m.HighPct = 100*d[i]/n, 100*d[j]/n
	return m
}

// Where says where a member's next command runs: on Member, or, when
// FromInput (the evidence named the member only by its file or URL), on
// the member that input came from.
type Where struct {
	Member    string
	FromInput bool
	// OneMember: the scrapes were read as one member's (--one-member),
	// whose name the evidence does not give.
	OneMember bool
}

func (w MemberWindow) where() Where {
	return Where{Member: w.Member, FromInput: slices.Contains(w.Sources, w.Member), OneMember: w.Member == OneMember}
}

// OneMember is the member a --one-member run reads every scrape as.
const OneMember = "one member (--one-member)"

// metricsURLOf is the /metrics URL a member's suggested commands name:
// the URL its scrapes came from when they came from one (each member its
// own), else url.
func metricsURLOf(w MemberWindow, url string) string {
	for _, s := range w.Sources {
		if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
			return s
		}
	}
	return url
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
			v := PeerFacts{Sources: w.Sources, Window: w.Window, Where: w.where(), URL: metricsURLOf(w, url), Prober: s.Key.Prober, Stats: row.Stats, Modes: row.Modes}
			f := Finding{Topic: TopicPeerRTT, Subject: subj, Severity: OK}
			h := row.Stats
			if h.HasCount && h.Observations > 0 {
				v.Probers = float64(etcdmetric.ProbersPerPeer)
				if s.Key.Prober != "" {
					v.Probers = 1
				}
				k := h.Observations / v.Probers
				switch {
				case w.Duration > 0:
					// the scrapes' own times (a polled URL, a
					// Prometheus export): the wall time between them
					v.Span, v.SpanMeasured = w.Duration, true
				case k < 2:
					// one observation per prober: the window holds one
					// 30 s tick, so it is under two intervals long
					v.Span, v.SpanUnder = time.Duration(k+1)*etcdmetric.ObserveInterval, true
				default:
					v.Span = time.Duration(k * float64(etcdmetric.ObserveInterval)).Round(time.Minute)
				}
			}
			m := row.Modes
			if m.Verdict == ModesUnknown {
				// Nothing to judge (no observations, or buckets that
				// cannot show the RTT): not OK, unknown.
				f.Severity = Unknown
			}
			if m.Verdict == ModesTwo && m.HighLo >= 4*m.LowHi {
				f.Severity, v.SlowDial = Warn, true
			}
			if m.LowLo >= (DefaultHeartbeat / 2).Seconds() {
				f.Severity, v.FarRTT = Warn, true
			}
			f.Peer = &v
			r.Findings = append(r.Findings, f)
		}
	}
}

// coversStalls says whether a member's metrics are evidence for the
// stalls' time: yes when their spans meet (a minute either side), else why
// they may not be (a 2023 export says nothing of a 2017 log).
func coversStalls(row MemberRow, stalls []Stall) Coverage {
	var lo, hi time.Time
	for _, s := range stalls {
		if !s.HasTime || !s.YearKnown {
			return Coverage{Kind: CoverNoYear}
		}
		if lo.IsZero() || s.At.Add(-s.Gap).Before(lo) {
			lo = s.At.Add(-s.Gap)
		}
		if s.At.After(hi) {
			hi = s.At
		}
	}
	switch {
	case lo.IsZero():
		return Coverage{}
	case row.To.IsZero():
		return Coverage{Kind: CoverNoTime}
	}
	from := row.From
	if from.IsZero() {
		from = row.To
	}
	if row.To.Before(lo.Add(-time.Minute)) || from.After(hi.Add(time.Minute)) {
		return Coverage{Kind: CoverApart, From: from, To: row.To, StallsFrom: lo, StallsTo: hi}
	}
	return Coverage{}
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
		times := logTimes(lr.Events)
		var lf LeaderFacts
		if len(leader) > 0 {
			lf = leaderFacts(lr.Events, leader)
		}
		// Only a change of leader follows a stall: the member's first
		// leader (a bootstrap election, or its first after a start) is
		// no change, though its lines come within 20 s of a start's slow
		// syncs.
		changes := leaderChangeLines(leader, lf)
		if len(fsync) > 0 {
			var max time.Duration
			for _, e := range fsync {
				max = maxDur(max, e.Took)
			}
			followed := 0
			for _, e := range fsync {
				for _, l := range changes {
					if e.HasTime && l.HasTime && !l.Time.Before(e.Time) && l.Time.Before(e.Time.Add(20*time.Second)) {
						followed++
						break
					}
				}
			}
			r.Findings = append(r.Findings, Finding{Topic: TopicSlowFdatasync, Subject: lr.Source, Severity: Bad,
				SlowFsync: &SlowFsyncFacts{Count: len(fsync), Longest: max.Round(time.Millisecond), Lines: firstLines(fsync, 3),
					Leaders: len(leader) > 0, Followed: followed, Times: times}})
		}
		if len(hb) > 0 {
			r.Findings = append(r.Findings, r.heartbeatFinding(lr.Source, hb, fsync, leader, changes, interval, election, times))
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
			old := max < 100*time.Millisecond
			if old {
				sev, round = OK, 100*time.Microsecond
			}
			r.Findings = append(r.Findings, Finding{Topic: TopicApply, Subject: lr.Source, Severity: sev,
				Apply: &ApplyFacts{Count: len(apply), Longest: max.Round(round), Old: old, Lines: firstLines(apply, 3)}})
		}
		if c := cutOffFinding(lr.Source, lr.Events); c != nil {
			r.Findings = append(r.Findings, *c)
		}
		if len(leader) > 0 {
			sev := Warn
			if lf.Changes == 0 {
				sev = OK
			}
			r.Findings = append(r.Findings, Finding{Topic: TopicLeader, Subject: lr.Source, Severity: sev, Leader: &lf})
		}
	}
}

// leaderFacts counts a log's leader changes, one per term, and finds the
// member's first leader, which is not a change: the first leader line
// after a start line, or at the bootstrap term with none before it.
func leaderFacts(evs, leader []LogEvent) LeaderFacts {
	terms := map[int]bool{}
	for _, e := range leader {
		terms[e.Term] = true
	}
	v := LeaderFacts{Count: len(leader), Terms: len(terms), Lines: firstLines(leader, 4)}
	started, seen := false, false
	for _, e := range evs {
		switch {
		case e.Kind == EvStart:
			started, seen = true, false
		case e.Kind == EvLeader && !seen:
			seen = true
			if !e.Lost && (started || e.Term == bootstrapTerm) && v.First == 0 {
				v.First, v.Bootstrap = e.Term, e.Term == bootstrapTerm
			}
		}
	}
	// A term is one change; the first leader's term is none, unless
	// the member lost that leader (a leader line saying no leader).
	v.Changes = v.Terms
	lostFirst := slices.ContainsFunc(leader, func(e LogEvent) bool { return e.Lost && e.Term == v.First })
	if v.First != 0 && !lostFirst {
		v.Changes--
	}
	return v
}

// leaderChangeLines: the leader lines that name a change (lf.Changes'
// terms), without those of the member's first leader unless it lost it.
func leaderChangeLines(leader []LogEvent, lf LeaderFacts) []LogEvent {
	if lf.First == 0 || slices.ContainsFunc(leader, func(e LogEvent) bool { return e.Lost && e.Term == lf.First }) {
		return leader
	}
	var out []LogEvent
	for _, e := range leader {
		if e.Term != lf.First {
			out = append(out, e)
		}
	}
	return out
}

func (r *Report) heartbeatFinding(src string, hb, fsync, leader, changes []LogEvent, interval, election time.Duration, times LogTimes) Finding {
	v := HeartbeatFacts{LateLines: len(hb), FromLog: election != 0, Times: times, SlowFsyncs: len(fsync) > 0, Leaders: len(leader) > 0}
	if election == 0 {
		election = DefaultElection
	}
	v.Election = election
	var stalls []Stall
	for _, e := range hb {
		if e.Interval == 0 && interval > 0 {
			e.Interval = interval
		}
		g := e.Gap()
		if n := len(stalls); n > 0 && e.HasTime && stalls[n-1].HasTime && absDur(e.Time.Sub(stalls[n-1].At)) <= 50*time.Millisecond {
			st := &stalls[n-1]
			st.Gap, st.Exceeded = maxDur(st.Gap, g), maxDur(st.Exceeded, e.Exceeded)
			if e.To != "" {
				st.To = append(st.To, e.To)
			}
			continue
		}
		stalls = append(stalls, Stall{At: e.Time, HasTime: e.HasTime, Gap: g, Exceeded: e.Exceeded, ZoneKnown: e.ZoneKnown, YearKnown: e.YearKnown})
		if e.To != "" {
			stalls[len(stalls)-1].To = []string{e.To}
		}
	}
	v.Stalls = stalls
	for _, s := range stalls {
		v.MaxGap, v.MaxExceeded = maxDur(v.MaxGap, s.Gap), maxDur(v.MaxExceeded, s.Exceeded)
		if s.Gap >= election {
			v.OverElection++
		}
	}
	v.Interval = hbInterval(hb, interval)
	f := Finding{Topic: TopicHeartbeat, Subject: src, Severity: Warn}
	if v.OverElection > 0 {
		f.Severity = Bad
	}
	// Match stalls to slow fdatasync lines in the same window: a sync
	// that ended within the gap before the warning (or just after).
	for _, s := range stalls {
		if !s.HasTime {
			continue
		}
		for _, e := range fsync {
			if e.HasTime && !e.Time.Before(s.At.Add(-s.Gap-time.Second)) && !e.Time.After(s.At.Add(time.Second)) {
				v.WithFsync++
				break
			}
		}
	}
	for _, row := range r.Members {
		if row.WAL.P99 != nil {
			sev, p := verdictP99(row.WAL.P99, WALFsyncBudget)
			v.Members = append(v.Members, StallMember{Member: row.Member, Severity: sev, P99: p, Cover: coversStalls(row, stalls)})
		}
	}
	for _, s := range stalls {
		for _, to := range s.To {
			for _, p := range r.Peers {
				if to != "" && p.To == to && (p.Modes.Verdict == ModesTwo || p.Modes.Verdict == ModesOne) && p.Modes.LowHi > 0 {
					v.RTTs = append(v.RTTs, StallRTT{To: to, RTT: p.Modes.LowHi, Gap: s.Gap})
				}
			}
		}
	}
	for _, s := range stalls {
		for _, e := range changes {
			if s.HasTime && e.HasTime && e.Time.After(s.At.Add(-time.Second)) && e.Time.Before(s.At.Add(20*time.Second)) {
				v.LeaderAfter++
				break
			}
		}
	}
	f.Heartbeat = &v
	return f
}

func hbInterval(hb []LogEvent, cfg time.Duration) time.Duration {
	for _, e := range hb {
		if e.Interval > 0 {
			return e.Interval
		}
	}
	return cfg
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

func (r *Report) fioFindings() {
	for _, run := range r.Fio {
		v := FioFacts{Run: run}
		f := Finding{Topic: TopicFio, Subject: strings.TrimSpace(run.Source + " " + run.Job), Fio: &v}
		switch {
		case !run.HasSync && run.Synced():
			// The job synced, but the output shows no sync latency:
			// an excerpt cut before fio's sync section, or a fio older
			// than 3.5 (which prints none). Unknown, not "no sync".
			v.Case, f.Severity = FioUnshown, Unknown
		case !run.HasSync:
			v.Case, f.Severity = FioNoSync, Warn
			if rw := firstNonEmpty(run.Options["rw"], run.Options["readwrite"]); rw == "read" || rw == "randread" {
				v.ReadOnly = rw
			}
		default:
			p99, ok := run.P(99)
			v.P99 = p99
			switch {
			case !ok:
				v.Case, f.Severity = FioNoP99, Unknown
			case p99 >= WALFsyncBudget:
				v.Case, f.Severity = FioOver, Bad
			default:
				v.Case, f.Severity = FioUnder, OK
			}
			if top := run.Percentiles; run.SyncMax > 0 && len(top) > 0 && top[len(top)-1].Latency > run.SyncMax {
				// fio stat.c's plat_idx_to_val: a percentile is the middle
				// of its histogram bin, so it can pass the exact max.
				v.PastMax = &top[len(top)-1]
			}
			if p999, ok := run.P(99.9); ok && p999 >= WALFsyncBudget && f.Severity == OK {
				f.Severity, v.P999, v.P999Over = Warn, p999, true
			}
			if bs := run.Options["bs"]; bs != "" && bs != "2300" && bs != "2300B" {
				v.OddBS = bs
			}
			if e := run.Options["ioengine"]; e != "" && e != "sync" {
				v.OddEngine = e
			}
			if o := run.Options["fdatasync"]; o != "" && o != "1" {
				v.OddFdatasync = o
			}
		}
		r.Findings = append(r.Findings, f)
	}
}
