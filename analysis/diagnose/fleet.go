package diagnose

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// The fleet: many clusters' etcd metrics read from one Prometheus (or
// Thanos, Mimir: the same HTTP API). The CLI runs FleetSelectors as
// /api/v1/query_range over FleetRange's grid, hands the answers to
// ReadFleet, and ReadFleet splits their series into clusters (ClusterOf)
// and members (the instance label, as ReadPromJSON) and diagnoses each
// cluster as ReadPromJSON's windows are: promWindows, then the disk and
// peer findings of Diagnose. Raw selectors keep __name__, so every answer
// is the same query_range export a user could save and give as a file.

// FleetSteps: the fewest steps of FleetRange's grid over the window,
// and all of them when no probe says the scrape interval. A counter's
// increase is summed over the grid's points (a fall between two points
// is a restart, as increase() counts one).
const FleetSteps = 6

// The grid's bounds. FleetMaxPoints: the points one query_range answer
// is asked for at most (series × points, the series estimated as
// fleetSeriesPerMember per member the probe counts: a 3-member
// cluster's peer RTT ladders), about 10 MiB of JSON, under the 16 MiB an
// answer may take. promMaxSteps: Prometheus refuses a query_range of
// more than 11,000 points per series.
const (
	FleetMaxPoints       = 400_000
	fleetSeriesPerMember = 40
	promMaxSteps         = 11_000 - 1
)

// FleetProbeRange: the probe reads the raw samples of the window's last
// hour at most.
const FleetProbeRange = time.Hour

// ClusterLabels: the labels that tell clusters apart, besides namespace
// and job. The first of them a series carries names its cluster
// (Thanos/Mimir external labels and kube-prometheus relabelings use
// these names).
var ClusterLabels = []string{"cluster", "cluster_name", "etcd_cluster"}

// Counter names the fleet reads besides the histograms.
const (
	CounterLeaderChanges     = "etcd_server_leader_changes_seen_total"
	CounterHeartbeatFailures = "etcd_server_heartbeat_send_failures_total"
	CounterSlowApply         = "etcd_server_slow_apply_total"
	gaugeIsLeader            = "etcd_server_is_leader"
)

// FleetSelectors are the series selectors the fleet queries, one per
// answer, each narrowed by match (a label-matcher set such as
// {job="etcd"}, "" or {} for all).
func FleetSelectors(match string) []string {
	m := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(match), "{"), "}"))
	if m != "" {
		m = "," + m
	}
	hist := func(names ...string) string {
		var alt []string
		for _, n := range names {
			alt = append(alt, n+"_(bucket|sum|count)")
		}
		return "{__name__=~" + strconv.Quote(strings.Join(alt, "|")) + m + "}"
	}
	return []string{
		hist(etcdmetric.WALFsync.Name, etcdmetric.WALFsync.Old[0]),
		hist(etcdmetric.BackendCommit.Name),
		hist(etcdmetric.PeerRTT.Name),
		"{__name__=~" + strconv.Quote(strings.Join([]string{CounterLeaderChanges, CounterHeartbeatFailures, CounterSlowApply, gaugeIsLeader}, "|")) + m + "}",
	}
}

// FleetProbeQuery is the probe's instant query: the raw samples of
// etcd_server_is_leader (one series per member) over the window's last
// FleetProbeRange at most, evaluated at until: their stamps show the
// scrape interval and how much history Prometheus holds.
func FleetProbeQuery(match string, since, until time.Time) string {
	m := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(match), "{"), "}"))
	if m != "" {
		m = "," + m
	}
	r := min(until.Sub(since), FleetProbeRange)
	return "{__name__=" + strconv.Quote(gaugeIsLeader) + m + "}[" + strconv.FormatInt(max(r.Milliseconds(), 1), 10) + "ms]"
}

// FleetProbe is what the probe's samples say of the data.
type FleetProbe struct {
	// Members: the series answered (one per member).
	Members int `json:"members"`
	// Interval: the scrape interval the samples show (the shortest of
	// the series' median gaps); 0 with fewer than two samples in each.
	Interval time.Duration `json:"interval_ns,omitempty"`
	// First, Last: the earliest and latest sample (zero with none).
	First time.Time `json:"first,omitzero"`
	Last  time.Time `json:"last,omitzero"`
}

// Held is the history the probe saw: its first sample to its last.
func (p FleetProbe) Held() time.Duration { return p.Last.Sub(p.First) }

// ReadFleetProbe reads the probe's answer (a matrix of raw samples); an
// answer that is no Prometheus API JSON is ErrNotPrometheus.
func ReadFleetProbe(body []byte) (FleetProbe, error) {
	var p FleetProbe
	var pr promResponse
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&pr); err != nil || pr.Status != "success" || pr.Data.ResultType != "matrix" {
		return p, ErrNotPrometheus
	}
	for _, r := range pr.Data.Result {
		var ts []time.Time
		for _, v := range r.Values {
			if len(v) == 2 {
				if f, ok := v[0].(float64); ok {
					ts = append(ts, time.UnixMilli(int64(math.Round(f*1e3))).UTC())
				}
			}
		}
		if len(ts) == 0 {
			continue
		}
		p.Members++
		if p.First.IsZero() || ts[0].Before(p.First) {
			p.First = ts[0]
		}
		if l := ts[len(ts)-1]; l.After(p.Last) {
			p.Last = l
		}
		var gaps []time.Duration
		for i := 1; i < len(ts); i++ {
			if g := ts[i].Sub(ts[i-1]); g > 0 {
				gaps = append(gaps, g)
			}
		}
		if len(gaps) == 0 {
			continue
		}
		sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
		if g := gaps[len(gaps)/2]; p.Interval == 0 || g < p.Interval {
			p.Interval = g
		}
	}
	return p, nil
}

// FleetRange is the query_range grid for the window [since, until],
// ending at until with steps of a whole millisecond (start may be up to
// a millisecond per step before since). With the scrape interval known
// (p.Interval), a step of at most it, so every sample the window holds
// is on the grid, within promMaxSteps and FleetMaxPoints for p.Members
// (the step grows instead); at least FleetSteps steps. Without it,
// FleetSteps.
func FleetRange(since, until time.Time, p FleetProbe) (start, end time.Time, step time.Duration) {
	w := until.Sub(since)
	steps := FleetSteps
	if p.Interval > 0 {
		steps = int(min((w+p.Interval-1)/p.Interval, promMaxSteps))
		if p.Members > 0 {
			steps = min(steps, FleetMaxPoints/(p.Members*fleetSeriesPerMember))
		}
		steps = max(steps, FleetSteps)
	}
	step = (w + time.Duration(steps)*time.Millisecond - 1) / time.Duration(steps)
	step = step.Truncate(time.Millisecond)
	if step < time.Millisecond {
		step = time.Millisecond
	}
	return until.Add(-time.Duration(steps) * step), until, step
}

// PromAnswer is one query's answer body, as fetched.
type PromAnswer struct {
	Selector string
	Body     []byte
}

// FleetOptions say what the answers cover and how much to keep.
type FleetOptions struct {
	// Source: the Prometheus URL, named in the report.
	Source string
	// From, To: the window asked for.
	From, To time.Time
	// Match: the label matchers given, for the report.
	Match string
	// MaxClusters: keep the worst this many clusters (0: all).
	MaxClusters int
	// Probe: what the probe saw; Step: the grid's step; EndsNow: the
	// window ends now (--last or the default), for the advice when the
	// history is too short.
	Probe   FleetProbe
	Step    time.Duration
	EndsNow bool
}

// Fleet is the diagnosis of every cluster one Prometheus holds.
type Fleet struct {
	Source string    `json:"prometheus"`
	Match  string    `json:"match,omitempty"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	// Queries: each selector run and how many series it answered.
	Queries []FleetQuery `json:"queries"`
	// Clusters, worst first (see rankCluster).
	Clusters []Cluster `json:"clusters"`
	// Cut: the clusters beyond MaxClusters, left out (all of them no
	// worse than the last one kept).
	Cut *FleetCut `json:"cut,omitempty"`
}

// FleetQuery is one selector and the size of its answer.
type FleetQuery struct {
	Selector string `json:"selector"`
	Series   int    `json:"series"`
}

// FleetCut says what MaxClusters left out.
type FleetCut struct {
	Clusters int `json:"clusters"`
	// Worst: the worst severity among them.
	Worst Severity `json:"worst"`
	// Names: the first ten of them, in rank order.
	Names []string `json:"names"`
}

// Cluster is one cluster's diagnosis: its identifying labels, its worst
// severity and the same Report Diagnose gives for its members' /metrics.
type Cluster struct {
	// Name: the identifying labels, label="value" joined by commas in
	// ClusterLabels, namespace, job order.
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels"`
	Severity Severity          `json:"severity"`
	Report   Report            `json:"report"`
}

// CounterVerdict is one etcd_server counter's increase over the window on
// each member of a cluster that has the series.
type CounterVerdict struct {
	Counter string        `json:"counter"`
	Members []MemberCount `json:"members"`
	Window  time.Duration `json:"window_ns"`
}

// MemberCount is one member's increase of a counter.
type MemberCount struct {
	Member   string  `json:"member"`
	Increase float64 `json:"increase"`
}

// Max is the largest member's increase.
func (v CounterVerdict) Max() float64 {
	m := 0.0
	for _, c := range v.Members {
		m = math.Max(m, c.Increase)
	}
	return m
}

// ClusterOf returns the labels of a series that identify its cluster and
// the cluster's name: the first of ClusterLabels present, then namespace
// and job.
func ClusterOf(metric map[string]string) (map[string]string, string) {
	lbl := map[string]string{}
	var parts []string
	add := func(k string) {
		if v := metric[k]; v != "" {
			lbl[k] = v
			parts = append(parts, k+"="+strconv.Quote(v))
		}
	}
	for _, k := range ClusterLabels {
		if metric[k] != "" {
			add(k)
			break
		}
	}
	add("namespace")
	add("job")
	return lbl, strings.Join(parts, ",")
}

// ErrNotPrometheus: an answer is not the Prometheus HTTP API's JSON.
var ErrNotPrometheus = errors.New("not a Prometheus HTTP API answer")

// ReadFleet splits the answers' series into clusters and diagnoses each:
// its members' windows from the histograms (promWindows, as a saved
// query_range export), the disk and peer findings Diagnose gives, and a
// finding per etcd_server counter present. Clusters come worst first; an
// error only for an answer that is no Prometheus matrix.
func ReadFleet(answers []PromAnswer, opt FleetOptions) (Fleet, error) {
	fl := Fleet{Source: opt.Source, Match: opt.Match, From: opt.From, To: opt.To}
	type part struct {
		labels   map[string]string
		hist     []promResult
		counters []promResult
	}
	parts := map[string]*part{}
	for _, a := range answers {
		var pr promResponse
		if err := json.NewDecoder(bytes.NewReader(a.Body)).Decode(&pr); err != nil || pr.Status != "success" {
			return fl, fmt.Errorf("%s: %w", a.Selector, ErrNotPrometheus)
		}
		if pr.Data.ResultType != "matrix" {
			return fl, fmt.Errorf("%s: resultType %q, not a query_range matrix: %w", a.Selector, pr.Data.ResultType, ErrNotPrometheus)
		}
		fl.Queries = append(fl.Queries, FleetQuery{Selector: a.Selector, Series: len(pr.Data.Result)})
		for _, r := range pr.Data.Result {
			lbl, name := ClusterOf(r.Metric)
			p := parts[name]
			if p == nil {
				p = &part{labels: lbl}
				parts[name] = p
			}
			if strings.HasPrefix(r.Metric["__name__"], "etcd_server_") {
				p.counters = append(p.counters, r)
			} else {
				p.hist = append(p.hist, r)
			}
		}
	}
	for name, p := range parts {
		c := Cluster{Name: name, Labels: p.labels}
		if c.Name == "" {
			c.Name = opt.Source
		}
		var ws []MemberWindow
		if len(p.hist) > 0 {
			var err error
			ws, err = promWindows("matrix", p.hist, c.Name, time.Time{}, time.Time{})
			var few fewSamplesError
			if errors.As(err, &few) {
				c.Report.Unread = append(c.Report.Unread, Unread{Name: c.Name, Few: &FewSamples{Series: few.Series, Step: opt.Step, Probe: opt.Probe,
					EndsNow: opt.EndsNow, Last: shortWindow(opt.Probe.Held())}})
			} else if err != nil {
				c.Report.Unread = append(c.Report.Unread, Unread{Name: c.Name, Err: err.Error()})
			}
		}
		counters, leader := fleetCounters(p.counters, c.Name)
		for i := range ws {
			if l, ok := leader[ws[i].Member]; ok {
				ws[i].Leader = l
			}
		}
		c.Report.Inputs = []InputInfo{{Name: c.Name, Kind: KindPromJSON}}
		c.Report.diskFindings(ws, Timeouts{})
		c.Report.peerFindings(ws, defaultMetricsURL)
		for _, cf := range []struct{ counter, topic string }{
			{CounterLeaderChanges, TopicLeader}, {CounterHeartbeatFailures, TopicHeartbeat}, {CounterSlowApply, TopicApply},
		} {
			v, ok := counters[cf.counter]
			if !ok {
				continue
			}
			v.Window = opt.To.Sub(opt.From)
			sev := OK
			if v.Max() > 0 {
				sev = Warn
			}
			c.Report.Findings = append(c.Report.Findings, Finding{Topic: cf.topic, Subject: "cluster", Severity: sev, Counter: &v})
		}
		c.Severity = worstSeverity(c.Report)
		fl.Clusters = append(fl.Clusters, c)
	}
	sort.Slice(fl.Clusters, func(i, j int) bool { return rankCluster(fl.Clusters[i], fl.Clusters[j]) })
	if n := opt.MaxClusters; n > 0 && len(fl.Clusters) > n {
		cut := fl.Clusters[n:]
		fl.Cut = &FleetCut{Clusters: len(cut), Worst: cut[0].Severity}
		for _, c := range cut[:min(10, len(cut))] {
			fl.Cut.Names = append(fl.Cut.Names, c.Name)
		}
		fl.Clusters = fl.Clusters[:n]
	}
	return fl, nil
}

// fleetCounters reads a cluster's etcd_server series: each counter's
// increase per member (by increase, over every sample of the answer) and
// etcd_server_is_leader's last value per member.
func fleetCounters(rs []promResult, source string) (map[string]CounterVerdict, map[string]int) {
	out := map[string]CounterVerdict{}
	leader := map[string]int{}
	for _, r := range rs {
		name, member := r.Metric["__name__"], promInstance(r.Metric, source)
		if name == gaugeIsLeader {
			for _, p := range r.Values {
				if len(p) != 2 {
					continue
				}
				if v, ok := sampleValue(p[1]); ok {
					leader[member] = int(v)
				}
			}
			continue
		}
		inc, _, _, ok := increase(r.Values, time.Time{}, time.Time{})
		if !ok {
			continue
		}
		v := out[name]
		v.Counter = name
		v.Members = append(v.Members, MemberCount{Member: member, Increase: inc})
		out[name] = v
	}
	for k, v := range out {
		sort.Slice(v.Members, func(i, j int) bool { return v.Members[i].Member < v.Members[j].Member })
		out[k] = v
	}
	return out, leader
}

// severityRank orders severities, worst highest.
func severityRank(s Severity) int {
	switch s {
	case Bad:
		return 3
	case Warn:
		return 2
	case Unknown:
		return 1
	}
	return 0
}

func worstSeverity(r Report) Severity {
	w := OK
	if len(r.Unread) > 0 {
		w = Unknown
	}
	for _, f := range r.Findings {
		if severityRank(f.Severity) > severityRank(w) {
			w = f.Severity
		}
	}
	return w
}

// rankCluster: a before b when a is worse: a worse severity, then more
// findings of that severity, then a higher WAL fsync p99 (its bucket's
// lower bound, or the interpolated value), then by name.
func rankCluster(a, b Cluster) bool {
	if ra, rb := severityRank(a.Severity), severityRank(b.Severity); ra != rb {
		return ra > rb
	}
	na, nb := countSeverity(a.Report, a.Severity), countSeverity(b.Report, b.Severity)
	if na != nb {
		return na > nb
	}
	if pa, pb := maxWALP99(a.Report), maxWALP99(b.Report); pa != pb {
		return pa > pb
	}
	return a.Name < b.Name
}

func countSeverity(r Report, s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

func maxWALP99(r Report) float64 {
	m := 0.0
	for _, row := range r.Members {
		if e := row.WAL.P99; e != nil {
			v := e.Lo
			if e.Interpolated {
				v = e.Value
			}
			m = math.Max(m, v)
		}
	}
	return m
}
