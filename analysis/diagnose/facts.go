package diagnose

import (
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// The typed facts of diagnose's findings, one type per topic: what the
// evidence shows, in numbers and cases. render/diagnose_findings.go words
// them into a finding's summary, evidence, uncertainty, meaning and next
// command; they are not in the JSON, which carries those words.

// LogLines: the first few log lines a finding rests on, and how many more.
type LogLines struct {
	Lines []LogEvent
	More  int
}

// firstLines: the first n of evs.
func firstLines(evs []LogEvent, n int) LogLines {
	if len(evs) > n {
		return LogLines{Lines: evs[:n], More: len(evs) - n}
	}
	return LogLines{Lines: evs}
}

// LogTimes: what a log's time stamps lack (a zone, a year).
type LogTimes struct {
	NoZone, NoYear bool
}

func logTimes(evs []LogEvent) LogTimes {
	var z LogTimes
	for _, e := range evs {
		if e.HasTime && !e.ZoneKnown {
			z.NoZone = true
		}
		if e.HasTime && !e.YearKnown {
			z.NoYear = true
		}
	}
	return z
}

// SlowFsyncFacts: WAL fdatasync calls etcd logged as over its 1 s warning.
type SlowFsyncFacts struct {
	Count int
	// Longest: the longest, to the millisecond.
	Longest time.Duration
	Lines   LogLines
	// Leaders: the log has leader lines; Followed: syncs followed by a
	// leader change within 20 s.
	Leaders  bool
	Followed int
	Times    LogTimes
}

// ApplyFacts: requests or applies etcd logged as taking too long.
type ApplyFacts struct {
	Count int
	// Longest: rounded to 1 ms, or to 100 µs when under 100 ms (Old).
	Longest time.Duration
	// Old: all under 100 ms, so logged only by etcd v3.0-v3.1's 10 ms
	// threshold.
	Old   bool
	Lines LogLines
}

// LeaderFacts: leader lines of a log and the terms they name (a term
// has one leader, however many lines say it: "became leader" and
// "elected leader" of one election are one change).
type LeaderFacts struct {
	Count, Terms int
	Lines        LogLines
	// First: the term of the member's first leader, which is no change:
	// a new cluster's first election (Bootstrap: term 2), or the first
	// leader after the log shows the process start; 0 when neither.
	First     int
	Bootstrap bool
	// Changes: the terms with a leader line, less First unless a
	// "lost leader" line names it.
	Changes int
}

// HeartbeatFacts: late heartbeats, grouped into the leader's stalls.
type HeartbeatFacts struct {
	LateLines int
	Stalls    []Stall
	// MaxGap: the longest gap (0 when no line gives the interval);
	// MaxExceeded: the most over 2×interval; Interval: the heartbeat
	// interval lines or the config give.
	MaxGap, MaxExceeded, Interval time.Duration
	// Election: the election timeout, FromLog when a start-up line gave
	// it (else etcd's default); OverElection: stalls that reached it.
	Election     time.Duration
	FromLog      bool
	OverElection int
	// SlowFsyncs: the log has slow fdatasync lines; WithFsync: stalls
	// with one logged within their gap.
	SlowFsyncs bool
	WithFsync  int
	// Members: the WAL fsync p99 of each member with metrics, and
	// whether those cover the stalls' time.
	Members []StallMember
	// RTTs: a stall's peer whose RTT a peer metric bounds.
	RTTs []StallRTT
	// Leaders: the log has leader lines; LeaderAfter: stalls followed by
	// a leader change within 20 s.
	Leaders     bool
	LeaderAfter int
	Times       LogTimes
}

// Stall is one moment the leader's heartbeats were late (etcd logs one
// line per follower for it).
type Stall struct {
	At                            time.Time
	HasTime, ZoneKnown, YearKnown bool
	Gap, Exceeded                 time.Duration
	To                            []string
}

// StallMember: a member's WAL fsync p99 beside the stalls.
type StallMember struct {
	Member   string
	Severity Severity
	P99      P99Facts
	Cover    Coverage
}

// Coverage says whether metrics cover the stalls' time.
type Coverage struct {
	Kind CoverageKind
	// From, To: the metrics' span; StallsFrom, StallsTo: the stalls'
	// (CoverApart).
	From, To, StallsFrom, StallsTo time.Time
}

// CoverageKind: the cases of Coverage.
type CoverageKind uint8

// The cases of Coverage.
const (
	CoverYes    CoverageKind = iota // the spans meet, or nothing to compare
	CoverNoYear                     // the log's lines carry no year
	CoverNoTime                     // the metrics carry no time
	CoverApart                      // the spans are apart
)

// StallRTT: the RTT bound to a stall's peer, beside the stall's gap.
type StallRTT struct {
	To  string
	RTT float64 // seconds, the RTT is at most this
	Gap time.Duration
}

// FioFacts: one fio job's sync latency against the WAL budget.
type FioFacts struct {
	Run  FioRun
	Case FioCase
	// P99, P999: the syncs' percentiles; P999Over: p99 under the budget
	// but p99.9 over it.
	P99, P999 time.Duration
	P999Over  bool
	// ReadOnly: the job's rw when it only reads (FioNoSync).
	ReadOnly string
	// PastMax: fio's highest percentile reads above the max (bins).
	PastMax *FioPercentile
	// OddBS, OddEngine, OddFdatasync: options unlike etcd's check, ""
	// when like it.
	OddBS, OddEngine, OddFdatasync string
}

// FioCase: what a fio job's output can say.
type FioCase uint8

// The cases of FioFacts.
const (
	FioUnshown FioCase = iota // it synced but the output shows no sync latency
	FioNoSync                 // it made no fsync/fdatasync
	FioNoP99                  // no 99th percentile of its syncs
	FioOver                   // p99 over the WAL budget
	FioUnder                  // p99 under it
)

// P99Facts: a p99 estimate placed against a budget.
type P99Facts struct {
	Grade  P99Grade
	E      *etcdmetric.Estimate
	Budget time.Duration
}

// P99Grade: where a p99 estimate lies against a budget, by what it proves.
type P99Grade uint8

// The grades of P99Facts.
const (
	P99None          P99Grade = iota // no p99
	P99Above                         // interpolated in a bucket all above the budget
	P99AboveBound                    // above a bucket bound at or over the budget
	P99Under                         // interpolated in a bucket all under the budget
	P99UnderBound                    // under a bucket bound at or under the budget
	P99StraddleOver                  // interpolated over the budget in a bucket that straddles it
	P99StraddleUnder                 // interpolated under the budget in a bucket that straddles it
	P99Unplaced                      // cannot be placed against the budget (E.Why)
)

// PeerFacts: one peer RTT series of a member.
type PeerFacts struct {
	Sources []string
	Window  string
	// Where: where the next command runs; URL: the /metrics URL it
	// names.
	Where  Where
	URL    string
	Prober string
	Stats  HistStats
	Modes  Modes
	// Probers, Span: how many probers the observations come from and
	// the time they span: SpanMeasured, the wall time between the
	// scrapes when their times are known; else from the count (one per
	// prober per 30 s), to the minute, or SpanUnder, at most this long
	// (one per prober: under two intervals); 0 without observations.
	Probers      float64
	Span         time.Duration
	SpanMeasured bool
	SpanUnder    bool
	// SlowDial: two humps, the upper ≥ 4× the lower (more than TCP+TLS
	// handshakes take); FarRTT: the RTT is at least half the default
	// heartbeat interval.
	SlowDial, FarRTT bool
}

// DiskWhat: which disk histogram a disk finding is of.
type DiskWhat uint8

// The histograms of DiskFacts.
const (
	DiskWAL     DiskWhat = iota + 1 // etcd_disk_wal_fsync_duration_seconds
	DiskBackend                     // etcd_disk_backend_commit_duration_seconds
)

// DiskFacts: a member's WAL fsync or backend commit against its budget.
type DiskFacts struct {
	What    DiskWhat
	Sources []string
	Window  string
	Where   Where // where the next command runs
	Stats   HistStats
	// P99: its p99 against the budget (unset when Stats.Error).
	P99 P99Facts
}

// SlowCase: which member, if any, is slow.
type SlowCase uint8

// The cases of SlowMemberFacts.
const (
	SlowOne    SlowCase = iota + 1 // one member over budget and over twice the others
	SlowShared                     // over budget on more than one member
	SlowNone                       // no member stands out
	// SlowOnlyOne: one member over budget, the others under it but not
	// under half its p99: it does not stand apart.
	SlowOnlyOne
)

// SlowMemberFacts: the members' WAL fsync p99 side by side.
type SlowMemberFacts struct {
	Case SlowCase
	// Member, P99: the slowest and its p99's lower end; Others: the most
	// any other member's p99 can be, seconds.
	Member      string
	P99, Others float64
	// Over: the members whose p99 is over the budget (their WAL fsync
	// finding Bad), of Members with a p99 placed.
	Over, Members int
	// Alike: inputs that may be scrapes of one member (AlikeFacts).
	Alike []string
}

// AlikeFacts: two inputs without a member identity that look like two
// scrapes of one member (the later, B, counts More WAL fsyncs).
type AlikeFacts struct {
	A, B    string
	WALName string
	More    float64
}
