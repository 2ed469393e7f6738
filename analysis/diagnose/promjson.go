package diagnose

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/jsonl"
)

type promResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string       `json:"resultType"`
		Result     []promResult `json:"result"`
	} `json:"data"`
}

// promResult is one series of a Prometheus answer.
type promResult struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

// ReadPromJSON reads a Prometheus HTTP API answer (/api/v1/query or
// /api/v1/query_range) of etcd's histogram series (_bucket, _sum, _count,
// by __name__). A matrix becomes one window per instance: each counter's
// increase between since and until (zero times: the whole range), a fall
// counted as a counter reset as Prometheus' increase() does; a vector
// becomes totals since start. Results without __name__ (a
// histogram_quantile() answer) are not histograms and are reported in
// the error when nothing else is there.
func ReadPromJSON(in Input, since, until time.Time) ([]MemberWindow, error) {
	i := bytes.IndexByte(in.Data, '{')
	if jsonl.TooManyObjects(in.Data, MaxJSONObjects) {
		return nil, ErrTooManyObjects
	}
	var pr promResponse
	if i < 0 || json.NewDecoder(bytes.NewReader(in.Data[i:])).Decode(&pr) != nil {
		return nil, fmt.Errorf("reading Prometheus JSON: not an API answer")
	}
	if pr.Status != "" && pr.Status != "success" {
		return nil, fmt.Errorf("Prometheus answer has status %q", pr.Status)
	}
	return promWindows(pr.Data.ResultType, pr.Data.Result, in.Name, since, until)
}

// promWindows is ReadPromJSON past the decoding: the series of one
// answer (or of one cluster's part of several, for the fleet) to one
// window per instance. source names the members no label names, and is
// every window's source.
func promWindows(resultType string, results []promResult, source string, since, until time.Time) ([]MemberWindow, error) {
	type key struct{ inst, fam, series string }
	members := map[string]*MemberWindow{}
	series := map[key]*etcdmetric.Series{}
	var unnamed, tooFew int
	var first, last time.Time
	for _, r := range results {
		name := r.Metric["__name__"]
		if name == "" {
			unnamed++
			continue
		}
		fam, suffix, ok := familyOf(name)
		if !ok {
			continue
		}
		inst := promInstance(r.Metric, source)
		var v float64
		switch resultType {
		case "matrix":
			var ok bool
			var t0, t1 time.Time
			v, t0, t1, ok = increase(r.Values, since, until)
			if !ok {
				tooFew++ // fewer than two samples in the window
				continue
			}
			if first.IsZero() || t0.Before(first) {
				first = t0
			}
			if t1.After(last) {
				last = t1
			}
		case "vector":
			if len(r.Value) != 2 {
				continue
			}
			v, _ = sampleValue(r.Value[1])
		default:
			return nil, fmt.Errorf("Prometheus resultType %q: export a matrix (query_range) or vector of the _bucket series", resultType)
		}
		lbl := map[string]string{}
		for k, x := range r.Metric {
			if k != "__name__" && k != "le" && k != "instance" && k != "job" && k != "pod" && k != "namespace" && k != "endpoint" && k != "service" {
				lbl[k] = x
			}
		}
		sk := key{inst, fam.Name, "[" + strings.Join(sortedMap(lbl), " ") + "]"}
		s := series[sk]
		if s == nil {
			s = &etcdmetric.Series{FirstBound: fam.FirstBound, Key: etcdmetric.Key{To: lbl["To"], Prober: firstNonEmpty(lbl["Name"], lbl["rtt_name"])}}
			series[sk] = s
		}
		switch suffix {
		case "_bucket":
			ub, err := strconv.ParseFloat(strings.TrimPrefix(r.Metric["le"], "+"), 64)
			if err != nil {
				continue
			}
			s.Buckets = append(s.Buckets, etcdmetric.Bucket{UpperBound: ub, Count: v})
		case "_sum":
			s.Sum, s.HasSum = v, true
		case "_count":
			s.Count, s.HasCount = v, true
		}
		if members[inst] == nil {
			w := WindowSinceStart
			if resultType == "matrix" {
				w = WindowBetweenScrapes
			}
			members[inst] = &MemberWindow{Member: inst, Sources: []string{source}, Window: w, Leader: -1}
		}
	}
	var keys []key
	for k := range series {
		keys = append(keys, k)
	}
	// In the order of "{inst fam series}", as the series were always sorted.
	str := func(k key) string { return "{" + k.inst + " " + k.fam + " " + k.series + "}" }
	sort.Slice(keys, func(i, j int) bool { return str(keys[i]) < str(keys[j]) })
	for _, k := range keys {
		s := series[k]
		sort.Slice(s.Buckets, func(i, j int) bool { return s.Buckets[i].UpperBound < s.Buckets[j].UpperBound })
		if n := len(s.Buckets); !s.HasCount && n > 0 && math.IsInf(s.Buckets[n-1].UpperBound, 1) {
			s.Count, s.HasCount = s.Buckets[n-1].Count, true
		}
		m := members[k.inst]
		switch k.fam {
		case etcdmetric.WALFsync.Name:
			m.WAL, m.WALName = s, k.fam
		case etcdmetric.BackendCommit.Name:
			m.Backend = s
		default:
			m.Peers = append(m.Peers, *s)
		}
	}
	var out []MemberWindow
	for _, m := range members {
		if !first.IsZero() {
			m.Duration = last.Sub(first)
			m.From, m.To = first, last
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Member < out[j].Member })
	if len(out) == 0 {
		if unnamed > 0 {
			return nil, fmt.Errorf("the %d series have no __name__ (a histogram_quantile() answer?): export the raw _bucket series instead, e.g. query_range of {__name__=~\"etcd_disk_wal_fsync_duration_seconds_.*\"}", unnamed)
		}
		if tooFew > 0 {
			return nil, fewSamplesError{fmt.Errorf("the %d etcd series have fewer than two samples inside --since/--until: an increase needs two; widen the window or export a longer range", tooFew), tooFew}
		}
		if len(results) == 0 {
			return nil, fmt.Errorf("%w: the query matched no series (an empty result): check the metric name (etcd_disk_wal_fsync_duration_seconds_bucket, ...) and the time range", ErrNoEvidence)
		}
		return nil, fmt.Errorf("no etcd histogram series in the Prometheus answer")
	}
	return out, nil
}

// fewSamplesError: every etcd series of an answer has fewer than two
// samples in the window, and an increase needs two; Series counts them.
type fewSamplesError struct {
	error
	Series int
}

// FewSamples: a fleet cluster none of whose series has two points on the
// query grid (ReadFleet's Unread.Few; render words the advice).
type FewSamples struct {
	Series int `json:"series"`
	// Step: the grid's; Probe: what the probe saw of the history;
	// EndsNow: the window ends now (--last, or no window given).
	Step    time.Duration `json:"step_ns"`
	Probe   FleetProbe    `json:"probe"`
	EndsNow bool          `json:"ends_now"`
	// Last: a --last within the history held (its 10 s below from 20 s,
	// else its second below, at least 1 s); 0 when the probe saw one
	// sample per series at most.
	Last time.Duration `json:"last_ns,omitempty"`
}

// shortWindow is a --last within the history held.
func shortWindow(held time.Duration) time.Duration {
	switch {
	case held <= 0:
		return 0
	case held >= 20*time.Second:
		return held.Truncate(10 * time.Second)
	}
	return max(held.Truncate(time.Second), time.Second)
}

// promInstance names a series' member: its instance label, else its pod,
// else source.
func promInstance(metric map[string]string, source string) string {
	return firstNonEmpty(metric["instance"], metric["pod"], source)
}

func familyOf(name string) (etcdmetric.Family, string, bool) {
	for _, f := range []etcdmetric.Family{etcdmetric.WALFsync, etcdmetric.BackendCommit, etcdmetric.PeerRTT} {
		for _, n := range append([]string{f.Name}, f.Old...) {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if name == n+suf {
					return f, suf, true
				}
			}
		}
	}
	return etcdmetric.Family{}, "", false
}

// increase is a counter's growth over the samples in [since, until]:
// the sum of the rises, a fall taken as a reset (the new value is all
// growth since it), as Prometheus' increase() without extrapolation.
func increase(values [][]any, since, until time.Time) (float64, time.Time, time.Time, bool) {
	var prev float64
	var t0, t1 time.Time
	n := 0
	inc := 0.0
	for _, p := range values {
		if len(p) != 2 {
			continue
		}
		ts, ok := p[0].(float64)
		if !ok {
			continue
		}
		t := time.Unix(0, int64(ts*1e9)).UTC()
		if (!since.IsZero() && t.Before(since)) || (!until.IsZero() && t.After(until)) {
			continue
		}
		v, ok := sampleValue(p[1])
		if !ok {
			continue
		}
		if n == 0 {
			t0 = t
		} else if v >= prev {
			inc += v - prev
		} else {
			inc += v
		}
		prev, t1 = v, t
		n++
	}
	return inc, t0, t1, n >= 2
}

func sampleValue(v any) (float64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

func sortedMap(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func firstNonEmpty(a ...string) string {
	for _, s := range a {
		if s != "" {
			return s
		}
	}
	return ""
}
