package diagnose

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// etcd's budgets (etcd FAQ and tuning guide).
const (
	// WALFsyncBudget: WAL fsync p99 should be under 10 ms.
	WALFsyncBudget = 10 * time.Millisecond
	// BackendCommitBudget: backend commit p99 should be under 25 ms.
	BackendCommitBudget = 25 * time.Millisecond
	// DefaultHeartbeat, DefaultElection: etcd's defaults, used when no
	// log line says what the cluster runs with.
	DefaultHeartbeat = 100 * time.Millisecond
	DefaultElection  = time.Second
)

// Severity grades a finding.
type Severity string

// Severities, worst last.
const (
	OK      Severity = "ok"
	Unknown Severity = "unknown"
	Warn    Severity = "warn"
	Bad     Severity = "bad"
)

// Finding is one answer, with what it rests on. The analysis sets its
// topic, subject, severity and one typed result below; render words
// Summary, Evidence, Uncertainty, Meaning and Next from that result
// (render/diagnose_findings.go, diagnose_words.go), so they are empty
// here and filled in the JSON.
type Finding struct {
	// Topic: one of the Topic constants.
	Topic    string   `json:"topic"`
	Subject  string   `json:"subject"` // member, member→peer, fio job, input
	Severity Severity `json:"severity"`
	Summary  string   `json:"summary"`
	Evidence []string `json:"evidence,omitempty"`
	// Uncertainty: what the data cannot tell, and why: one note each.
	Uncertainty Notes `json:"uncertainty,omitempty"`
	// Meaning: what it means for commit latency.
	Meaning string `json:"meaning,omitempty"`
	// Next: the command to run on the node to confirm or go further.
	Next string `json:"next,omitempty"`
	// The typed results of check_perf, endpoint_status,
	// endpoint_health, disk_stalls, cut_off, and the fleet's counters (in
	// the JSON too).
	Perf   *PerfVerdict   `json:"perf,omitempty"`
	Status *StatusVerdict `json:"status,omitempty"`
	Health *HealthVerdict `json:"health,omitempty"`
	Stalls *StallVerdict  `json:"stalls,omitempty"`
	CutOff *CutOffVerdict `json:"cut_off,omitempty"`
	// Counter: an etcd_server counter's increase per member (the fleet's
	// leader, heartbeat and apply findings, from Prometheus).
	Counter *CounterVerdict `json:"counter,omitempty"`
	// The typed facts of the other topics (facts.go); not in the JSON,
	// whose summary and the rest say them.
	Disk      *DiskFacts       `json:"-"`
	Slow      *SlowMemberFacts `json:"-"`
	Peer      *PeerFacts       `json:"-"`
	SlowFsync *SlowFsyncFacts  `json:"-"`
	Apply     *ApplyFacts      `json:"-"`
	Leader    *LeaderFacts     `json:"-"`
	Heartbeat *HeartbeatFacts  `json:"-"`
	Fio       *FioFacts        `json:"-"`
	Alike     *AlikeFacts      `json:"-"`
}

// The topics of the findings (Finding.Topic).
const (
	TopicWALFsync       = "wal_fsync"
	TopicBackendCommit  = "backend_commit"
	TopicSlowMember     = "slow_member"
	TopicPeerRTT        = "peer_rtt"
	TopicHeartbeat      = "heartbeat"
	TopicSlowFdatasync  = "slow_fdatasync"
	TopicApply          = "apply"
	TopicLeader         = "leader"
	TopicFio            = "fio"
	TopicInputs         = "inputs"
	TopicCheckPerf      = "check_perf"
	TopicEndpointStatus = "endpoint_status"
	TopicEndpointHealth = "endpoint_health"
	TopicDiskStalls     = "disk_stalls"
	TopicCutOff         = "cut_off"
)

// HistStats is one histogram's numbers over a window.
type HistStats struct {
	Observations float64              `json:"observations"`
	HasCount     bool                 `json:"has_count"`
	Mean         float64              `json:"mean_seconds,omitempty"`
	HasMean      bool                 `json:"has_mean"`
	P50          *etcdmetric.Estimate `json:"p50,omitempty"`
	P99          *etcdmetric.Estimate `json:"p99,omitempty"`
	Error        string               `json:"error,omitempty"`
}

// Stats computes a series' observations, mean and p50/p99 estimates.
func Stats(s *etcdmetric.Series) HistStats {
	var h HistStats
	if s == nil {
		return h
	}
	h.Observations, h.HasCount = s.Count, s.HasCount
	h.Mean, h.HasMean = s.Mean()
	for _, q := range []float64{0.5, 0.99} {
		e, err := s.Estimate(q)
		if err != nil {
			h.Error = err.Error()
			continue
		}
		if q == 0.5 {
			h.P50 = &e
		} else {
			h.P99 = &e
		}
	}
	return h
}

// MemberRow is one member's disk numbers for the report's table.
type MemberRow struct {
	Member  string    `json:"member"`
	Sources []string  `json:"sources"`
	Window  string    `json:"window"`
	Leader  int       `json:"is_leader"`
	WALName string    `json:"wal_metric,omitempty"`
	WAL     HistStats `json:"wal_fsync"`
	Backend HistStats `json:"backend_commit"`
	// From, To: MemberWindow's wall-clock span, zero when unknown.
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
}

// PeerRow is one peer RTT series' numbers.
type PeerRow struct {
	Member string    `json:"member"`
	To     string    `json:"to"`
	Prober string    `json:"prober,omitempty"`
	Stats  HistStats `json:"stats"`
	Modes  Modes     `json:"modes"`
}

// Modes is what the bucket ladder says about the two probers' humps.
type Modes struct {
	Verdict ModesVerdict `json:"verdict"`
	// Low, High: the buckets (lo, hi] of the two humps, seconds.
	LowLo  float64 `json:"low_lo_seconds,omitempty"`
	LowHi  float64 `json:"low_hi_seconds,omitempty"`
	HighLo float64 `json:"high_lo_seconds,omitempty"`
	HighHi float64 `json:"high_hi_seconds,omitempty"`
	// LowShare: the low hump's share of the observations in the two.
	LowShare float64 `json:"low_share,omitempty"`
	// Why: Reason in words, empty here: render fills it
	// (render/diagnose_findings.go).
	Why string `json:"why,omitempty"`
	// Reason: why the ladder reads so; with it, not in the JSON: Prober
	// (ModesByProber); LE, Below (ModesLadderHigh: the first bound shown
	// and the observations under it); GapFrom, LE (ModesGap: the bounds
	// with buckets missing between); LowPct, HighPct: the humps' shares
	// of all observations, percent.
	Reason          ModesReason `json:"-"`
	Prober          string      `json:"-"`
	LE, Below       float64     `json:"-"`
	GapFrom         float64     `json:"-"`
	LowPct, HighPct float64     `json:"-"`
}

// ModesVerdict: how many humps the ladder shows.
type ModesVerdict string

// The verdicts of Modes.
const (
	// ModesTwo: two humps the buckets separate.
	ModesTwo ModesVerdict = "two"
	// ModesAdjacent: the two most populated buckets are neighbours: RTT
	// and 2×RTT can share them, two modes can be neither shown nor ruled
	// out.
	ModesAdjacent ModesVerdict = "adjacent"
	// ModesOne: one bucket (or one broad hump) holds nearly everything.
	ModesOne ModesVerdict = "one"
	// ModesUnknown: the ladder shown cannot tell.
	ModesUnknown ModesVerdict = "unknown"
	// ModesPerProber: the series is one prober's.
	ModesPerProber ModesVerdict = "per-prober"
)

// ModesReason: why FindModes read the ladder as it did.
type ModesReason uint8

// The reasons of Modes.
const (
	ModesByProber       ModesReason = iota + 1 // labelled by prober
	ModesFewBuckets                            // fewer than two buckets shown
	ModesLadderHigh                            // the ladder starts high, observations below it
	ModesGap                                   // buckets missing between two shown
	ModesNoObservations                        // none
	ModesOneBucket                             // one bucket holds nearly all
	ModesNeighbours                            // the two fullest buckets are neighbours
	ModesBroad                                 // one broad hump
	ModesTwoHumps                              // two humps, emptier buckets between
)

// Report is the diagnosis of all inputs.
type Report struct {
	Inputs   []InputInfo `json:"inputs"`
	Members  []MemberRow `json:"members,omitempty"`
	Peers    []PeerRow   `json:"peers,omitempty"`
	Fio      []FioRun    `json:"fio,omitempty"`
	Findings []Finding   `json:"findings"`
	// Unread: the inputs that could not be read, and why; the others
	// were diagnosed.
	Unread []Unread `json:"unread,omitempty"`
	// OneMember: the /metrics inputs were read as one member's scrapes
	// (--one-member), not as a cluster's members.
	OneMember bool `json:"one_member,omitempty"`
}

// Unread is one input left out of the diagnosis.
type Unread struct {
	Name string `json:"name"`
	// Err: why (its message names the fix).
	Err string `json:"error"`
	// Quoted: the input's own words Err rests on, verbatim (fio's
	// complaints, FioNoJobError), for the sinks to quote.
	Quoted []string `json:"quoted,omitempty"`
	// Few: a fleet cluster with too few samples on the grid (Err is
	// empty here; render words it).
	Few *FewSamples `json:"few_samples,omitempty"`
	// Own: the input is etcdscope's own output of this kind
	// (OwnOutputError.What); render words what reads it.
	Own string `json:"own_output,omitempty"`
}

// InputInfo says how one input was read.
type InputInfo struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// Note: Counts in words, empty here: render fills it.
	Note string `json:"note,omitempty"`
	// Counts: what was read of it, by Kind; nil when nothing is said.
	Counts *InputCounts `json:"-"`
}

// InputCounts: what was read of one input, by its kind.
type InputCounts struct {
	// /metrics: the samples, the non-metric lines dropped and the lines
	// the parser rejected.
	Samples, Dropped int
	Rejected         []etcdmetric.Rejected
	// Prometheus API: the instances.
	Instances int
	// Log: the lines, etcd's events and the lines of each format
	// (LogRead.Formats).
	Lines, Events int
	Formats       map[string]int
	// etcdctl: check perf runs, endpoint status and health rows.
	Perf, Status, Health int
}

// Options narrow the evidence to a window.
type Options struct {
	// Since, Until: keep log lines and Prometheus samples in [Since,
	// Until] (zero: open). Log lines without a zone are read as UTC.
	Since, Until time.Time
	// OneMember: every /metrics input is a scrape of one member, diagnosed
	// as their difference. For excerpts that carry no etcd_server_id,
	// instance label or process_start_time_seconds, which are otherwise
	// read as one member per input (see Members).
	OneMember bool
}

// Diagnose reads every input and returns the findings. An input that
// could not be fetched (Input.Err), whose content is none of the kinds,
// or that its reader rejects is listed in Report.Unread with why, and the
// others are diagnosed; the error is returned only when no input could
// be read (ErrNothingRead, wrapping the first input's error).
func Diagnose(inputs []Input, opt Options) (Report, error) {
	var rep Report
	var ev evidence
	var firstErr error
	for _, in := range inputs {
		info, err := ev.read(in, opt)
		var noJob *FioNoJobError
		if err != nil && in.Err == nil && !errors.Is(err, ErrUnknownContent) && !errors.Is(err, ErrNoEvidence) && !errors.Is(err, etcdmetric.ErrTooManySamples) && !errors.As(err, &noJob) {
			// A reader refused part of a known kind: most often a paste
			// cut short.
			err = fmt.Errorf("%w (give the whole output it was cut from)", err)
		}
		if err != nil {
			u := Unread{Name: in.Name, Err: err.Error()}
			if errors.As(err, &noJob) {
				u.Quoted = noJob.Complaints
			}
			var own *OwnOutputError
			if errors.As(err, &own) {
				u.Own = own.What
			}
			rep.Unread = append(rep.Unread, u)
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", in.Name, err)
			}
			continue
		}
		rep.Fio = append(rep.Fio, ev.fio...)
		ev.fio = nil
		rep.Inputs = append(rep.Inputs, info)
	}
	if len(rep.Inputs) == 0 {
		if firstErr == nil {
			return rep, ErrNothingRead
		}
		if len(rep.Unread) > 1 {
			return rep, fmt.Errorf("%w (%d more inputs not read either)", firstErr, len(rep.Unread)-1)
		}
		return rep, firstErr
	}
	scrapes, windows, logs := ev.scrapes, ev.windows, ev.logs
	var alike []string
	if opt.OneMember && len(scrapes) > 0 {
		rep.OneMember = true
		w := window(scrapes)
		w.Member = OneMember
		windows = append(windows, w)
	} else {
		windows = append(windows, Members(scrapes)...)
		alike = rep.scrapesAlike(scrapes)
	}
	rep.diskFindings(windows, logTimeouts(logs))
	if len(alike) > 0 {
		for i := range rep.Findings {
			if f := rep.Findings[i]; f.Slow != nil {
				f.Slow.Alike = alike
			}
		}
	}
	rep.peerFindings(windows, defaultMetricsURL)
	rep.logFindings(logs)
	rep.fioFindings()
	rep.etcdctlFindings(ev.etcdctl)
	return rep, nil
}

// defaultMetricsURL: the /metrics URL the suggested commands name for a
// member whose scrapes came from a file (kubeadm's metrics listener); a
// member scraped from a URL is named with its own (metricsURLOf).
const defaultMetricsURL = "http://127.0.0.1:2381/metrics"

// ErrNothingRead: no input was given at all.
var ErrNothingRead = errors.New("no input could be read")

// evidence gathers what the inputs hold, by kind.
type evidence struct {
	scrapes []Scrape
	windows []MemberWindow
	logs    []LogRead
	fio     []FioRun
	etcdctl []EtcdctlRead
}

// read reads one input into ev, or says why it cannot.
func (ev *evidence) read(in Input, opt Options) (InputInfo, error) {
	if in.Err != nil {
		return InputInfo{}, in.Err
	}
	kind, err := Detect(in.Data)
	if err != nil {
		return InputInfo{}, err
	}
	info := InputInfo{Name: in.Name, Kind: kind}
	switch kind {
	case KindMetrics:
		sc, err := ReadMetrics(in)
		if err != nil {
			return info, err
		}
		ev.scrapes = append(ev.scrapes, sc...)
		c := sc[0].Cleaned
		info.Counts = &InputCounts{Samples: c.Samples, Dropped: c.Dropped, Rejected: c.Rejected}
	case KindPromJSON:
		ws, err := ReadPromJSON(in, opt.Since, opt.Until)
		if err != nil {
			return info, err
		}
		ev.windows = append(ev.windows, ws...)
		info.Counts = &InputCounts{Instances: len(ws)}
	case KindLog:
		lr := ReadLog(in)
		lr.Events = filterEvents(lr.Events, opt)
		ev.logs = append(ev.logs, lr)
		info.Counts = &InputCounts{Lines: lr.Lines, Events: len(lr.Events), Formats: lr.Formats}
	case KindFioJSON, KindFioText:
		var runs []FioRun
		if kind == KindFioJSON {
			runs, err = ReadFioJSON(in)
		} else {
			runs, err = ReadFioText(in)
		}
		if err != nil {
			return info, err
		}
		ev.fio = runs
	case KindEtcdctl:
		e, err := ReadEtcdctl(in)
		if err != nil {
			return info, err
		}
		ev.etcdctl = append(ev.etcdctl, e)
		info.Counts = &InputCounts{Perf: len(e.Perf), Status: len(e.Status), Health: len(e.Health)}
	}
	return info, nil
}

func filterEvents(evs []LogEvent, opt Options) []LogEvent {
	if opt.Since.IsZero() && opt.Until.IsZero() {
		return evs
	}
	var out []LogEvent
	for _, e := range evs {
		if !e.HasTime || !e.YearKnown {
			continue
		}
		if (!opt.Since.IsZero() && e.Time.Before(opt.Since)) || (!opt.Until.IsZero() && e.Time.After(opt.Until)) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// verdictP99 grades a p99 estimate against a budget by what it proves.
func verdictP99(e *etcdmetric.Estimate, budget time.Duration) (Severity, P99Facts) {
	b := budget.Seconds()
	p := P99Facts{E: e, Budget: budget}
	switch {
	case e == nil:
		p.Grade = P99None
		return Unknown, p
	case e.Lo >= b:
		p.Grade = P99AboveBound
		if e.Interpolated {
			p.Grade = P99Above
		}
		return Bad, p
	case !e.Unbounded && e.Hi > 0 && e.Hi <= b:
		p.Grade = P99UnderBound
		if e.Interpolated {
			p.Grade = P99Under
		}
		return OK, p
	case e.Interpolated && e.Value > b:
		p.Grade = P99StraddleOver
		return Bad, p
	case e.Interpolated:
		p.Grade = P99StraddleUnder
		return Warn, p
	}
	p.Grade = P99Unplaced
	return Unknown, p
}

func (r *Report) diskFindings(ws []MemberWindow, given Timeouts) {
	type p99 struct {
		member string
		lo, hi float64
		sev    Severity
	}
	var walP99 []p99
	for _, w := range ws {
		row := MemberRow{Member: w.Member, Sources: w.Sources, Window: w.Window, Leader: w.Leader, WALName: w.WALName, WAL: Stats(w.WAL), Backend: Stats(w.Backend), From: w.From, To: w.To}
		r.Members = append(r.Members, row)
		for _, d := range []struct {
			topic  string
			what   DiskWhat
			s      *etcdmetric.Series
			h      HistStats
			budget time.Duration
		}{
			{TopicWALFsync, DiskWAL, w.WAL, row.WAL, WALFsyncBudget},
			{TopicBackendCommit, DiskBackend, w.Backend, row.Backend, BackendCommitBudget},
		} {
			if d.s == nil {
				continue
			}
			v := DiskFacts{What: d.what, Sources: w.Sources, Window: w.Window, Where: w.where(), Stats: d.h}
			f := Finding{Topic: d.topic, Subject: w.Member, Disk: &v}
			if d.h.Error != "" {
				f.Severity = Unknown
			} else {
				f.Severity, v.P99 = verdictP99(d.h.P99, d.budget)
				if d.what == DiskWAL && d.h.P99 != nil {
					e := d.h.P99
					lo, hi := e.Lo, e.Hi
					if e.Interpolated {
						lo, hi = e.Value, e.Value
					}
					if e.Unbounded {
						hi = math.Inf(1)
					}
					walP99 = append(walP99, p99{w.Member, lo, hi, f.Severity})
				}
			}
			r.Findings = append(r.Findings, f)
			if st := stallFinding(w, d.topic, d.s, f.Severity, given); st != nil {
				r.Findings = append(r.Findings, *st)
			}
		}
	}
	// Which member is slow: one whose p99 is surely above the budget and
	// above twice every other member's.
	if len(walP99) >= 2 {
		sort.Slice(walP99, func(i, j int) bool { return walP99[i].lo > walP99[j].lo })
		top := walP99[0]
		others := 0.0
		for _, x := range walP99[1:] {
			others = math.Max(others, x.hi)
		}
		v := SlowMemberFacts{Member: top.member, P99: top.lo, Others: others, Members: len(walP99)}
		for _, x := range walP99 {
			if x.sev == Bad {
				v.Over++
			}
		}
		f := Finding{Topic: TopicSlowMember, Subject: "cluster", Slow: &v}
		switch {
		case top.sev == Bad && top.lo > 2*others:
			f.Severity, v.Case = Bad, SlowOne
		case v.Over > 1:
			f.Severity, v.Case = Bad, SlowShared
		case top.sev == Bad:
			// Over budget on the top member alone, the others close
			// behind: not apart, and not shared either.
			f.Severity, v.Case = Warn, SlowOnlyOne
		default:
			f.Severity, v.Case = OK, SlowNone
		}
		r.Findings = append(r.Findings, f)
	}
}

// Notes is a finding's caveats, one clause each (a terminal prints one a
// line). The JSON keeps them as one string joined by "; ", the form it
// had before they were a list.
type Notes []string

// MarshalJSON writes the notes as one string.
func (n Notes) MarshalJSON() ([]byte, error) { return json.Marshal(strings.Join(n, "; ")) }

// UnmarshalJSON reads the one string back as a single note.
func (n *Notes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*n = nil
	if s != "" {
		*n = Notes{s}
	}
	return nil
}
