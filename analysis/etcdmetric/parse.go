// Package etcdmetric reads etcd's peer round-trip metric,
// etcd_network_peer_round_trip_time_seconds, from /metrics text, and tells
// how much of what it reads is network RTT and how much comes from the way
// etcd measures it (see Model and docs/peers.md).
//
// Parsing is prometheus/common's expfmt (no hand parser). Both a typed
// histogram family and loose _bucket/_sum/_count lines (an excerpt pasted
// without # TYPE, parsed as untyped) are accepted, with any extra labels in
// any order: upstream etcd labels the series with To only; builds patched
// for etcd #11100 add the prober as Name= or rtt_name=.
package etcdmetric

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
)

// MetricName is the histogram this package reads.
const MetricName = "etcd_network_peer_round_trip_time_seconds"

// proberLabels are label names patched builds use for the prober.
var proberLabels = []string{"Name", "rtt_name"}

// Key identifies one series: the peer's member ID (the To label, hex) and
// the prober when the build labels it ("" upstream, where both probers
// write into one series).
type Key struct {
	To     string `json:"to"`
	Prober string `json:"prober,omitempty"`
}

// Bucket is one cumulative histogram bucket.
type Bucket struct {
	UpperBound float64 `json:"le"` // seconds; +Inf for the last
	Count      float64 `json:"count"`
}

// Series is one peer's histogram as scraped. Counts are float64 because
// the exposition format allows any float (1.37e+02 included).
type Series struct {
	Key     Key               `json:"key"`
	Labels  map[string]string `json:"labels,omitempty"` // other labels, as found
	Buckets []Bucket          `json:"buckets"`          // ascending by UpperBound, +Inf last if present
	Count   float64           `json:"count"`
	Sum     float64           `json:"sum_seconds"`
	// HasCount, HasSum: the _count/_sum lines were present (an excerpt may
	// lack them).
	HasCount bool `json:"has_count"`
	HasSum   bool `json:"has_sum"`
	// FirstBound: the first bucket etcd's ladder for this family has
	// (Family.FirstBound); 0 means the peer RTT's, FirstBound.
	FirstBound float64 `json:"-"`
}

// Scrape is what Parse found in one /metrics text.
type Scrape struct {
	Series []Series `json:"series"` // sorted by Key
	// ProcessStart: process_start_time_seconds, zero if absent. The model
	// uses it for the probers' EWMA warm-up.
	ProcessStart time.Time `json:"process_start,omitzero"`
	// Leader: etcd_server_is_leader (1 or 0), -1 if absent.
	Leader int `json:"is_leader"`
	// IsEtcd: some family is named etcd_*: the page is etcd's, even when
	// the peer metric is not there yet (no observation made so far).
	IsEtcd bool `json:"is_etcd"`
}

// ErrNoMetric is returned (wrapped) by Parse when the text parses but has
// no peer RTT metric: not an etcd /metrics page, or a single-member etcd.
var ErrNoMetric = fmt.Errorf("no %s in the exposition", MetricName)

// Parse reads a Prometheus text exposition (through ParseText's tolerant
// clean-up) and returns the peer RTT series. It fails when nothing parses
// and with ErrNoMetric when the metric is absent.
func Parse(r io.Reader) (Scrape, error) {
	fams, _, err := ParseText(r)
	if err != nil {
		return Scrape{}, err
	}
	return FromFamilies(fams)
}

// FromFamilies is Parse for already-parsed families (for callers that
// scrape with their own client, e.g. etcdtest.Scrape).
func FromFamilies(fams map[string]*dto.MetricFamily) (Scrape, error) {
	sc := Scrape{Leader: -1}
	for name := range fams {
		if strings.HasPrefix(name, "etcd_") {
			sc.IsEtcd = true
			break
		}
	}
	if v, ok := Gauge(fams, "process_start_time_seconds"); ok {
		sec, frac := math.Modf(v)
		sc.ProcessStart = time.Unix(int64(sec), int64(frac*1e9))
	}
	if v, ok := Gauge(fams, "etcd_server_is_leader"); ok {
		sc.Leader = int(v)
	}
	series, err := Histograms(fams, PeerRTT)
	if err != nil {
		return Scrape{}, err
	}
	if len(series) == 0 {
		return sc, ErrNoMetric
	}
	sc.Series = series
	return sc, nil
}

// Gauge returns the first sample of a single-valued family (gauge,
// counter or untyped), and false when it is absent.
func Gauge(fams map[string]*dto.MetricFamily, name string) (float64, bool) {
	f := fams[name]
	if f == nil || len(f.Metric) == 0 {
		return 0, false
	}
	return value(f.Metric[0])
}

// Family names one etcd histogram: its name since etcd 3.x, the names
// older releases gave it, and the upper bound of its first bucket (each
// next one doubles), from etcd's source.
type Family struct {
	Name       string   `json:"name"`
	Old        []string `json:"old,omitempty"`
	FirstBound float64  `json:"first_bound_seconds"`
}

// The histograms the diagnosis reads.
var (
	// WALFsync: wal/metrics.go, ExponentialBuckets(0.001, 2, 14); etcd
	// 2.x named it etcd_wal_fsync_durations_seconds.
	WALFsync = Family{Name: "etcd_disk_wal_fsync_duration_seconds", Old: []string{"etcd_wal_fsync_durations_seconds"}, FirstBound: 0.001}
	// BackendCommit: mvcc/backend/metrics.go, ExponentialBuckets(0.001, 2, 14).
	BackendCommit = Family{Name: "etcd_disk_backend_commit_duration_seconds", FirstBound: 0.001}
	// PeerRTT: rafthttp/metrics.go, ExponentialBuckets(0.0001, 2, 14 or 16).
	PeerRTT = Family{Name: MetricName, FirstBound: FirstBound}
)

// Histograms returns the series of one histogram family, under whichever
// of its names the text uses: typed (# TYPE histogram) or as loose
// _bucket/_sum/_count samples, with labels in any order. Series are kept
// apart by every label but le (so the same To from two instances of a
// federated scrape stay two series), sorted by Key then labels. A
// histogram's +Inf bucket is only added when its _count was present.
func Histograms(fams map[string]*dto.MetricFamily, fam Family) ([]Series, error) {
	series := map[string]*Series{}
	get := func(lp []*dto.LabelPair) *Series {
		k, rest := keyOf(lp)
		id := k.To + "\x00" + k.Prober + "\x00" + labelString(rest)
		s := series[id]
		if s == nil {
			s = &Series{Key: k, Labels: rest, FirstBound: fam.FirstBound}
			series[id] = s
		}
		return s
	}
	for _, name := range append([]string{fam.Name}, fam.Old...) {
		if f := fams[name]; f != nil && f.GetType() == dto.MetricType_HISTOGRAM {
			for _, m := range f.Metric {
				h := m.GetHistogram()
				s := get(m.Label)
				for _, b := range h.GetBucket() {
					s.Buckets = append(s.Buckets, Bucket{UpperBound: b.GetUpperBound(), Count: bucketCount(b)})
				}
				if h.SampleCount != nil || h.SampleCountFloat != nil {
					s.Count, s.HasCount = countOf(h), true
					// The text format's +Inf line may be kept as a bucket
					// or only as the sample count; add it once.
					if n := len(s.Buckets); n == 0 || !math.IsInf(s.Buckets[n-1].UpperBound, 1) {
						s.Buckets = append(s.Buckets, Bucket{UpperBound: math.Inf(1), Count: s.Count})
					}
				}
				if h.SampleSum != nil {
					s.Sum, s.HasSum = h.GetSampleSum(), true
				}
			}
		}
		// Loose lines (no # TYPE): untyped families named _bucket/_sum/_count.
		if f := fams[name+"_bucket"]; f != nil {
			for _, m := range f.Metric {
				le, lp := splitLabel(m.Label, model.BucketLabel)
				if le == "" {
					continue
				}
				ub, err := parseBound(le)
				if err != nil {
					return nil, fmt.Errorf("%s_bucket: %w", name, err)
				}
				v, _ := value(m)
				s := get(lp)
				s.Buckets = append(s.Buckets, Bucket{UpperBound: ub, Count: v})
			}
		}
		if f := fams[name+"_sum"]; f != nil {
			for _, m := range f.Metric {
				s := get(m.Label)
				s.Sum, _ = value(m)
				s.HasSum = true
			}
		}
		if f := fams[name+"_count"]; f != nil {
			for _, m := range f.Metric {
				s := get(m.Label)
				s.Count, _ = value(m)
				s.HasCount = true
			}
		}
	}
	out := make([]Series, 0, len(series))
	for _, s := range series {
		sort.SliceStable(s.Buckets, func(i, j int) bool { return s.Buckets[i].UpperBound < s.Buckets[j].UpperBound })
		s.Buckets = dedupBuckets(s.Buckets)
		if !s.HasCount && len(s.Buckets) > 0 && math.IsInf(s.Buckets[len(s.Buckets)-1].UpperBound, 1) {
			// The +Inf bucket is the count by definition.
			s.Count, s.HasCount = s.Buckets[len(s.Buckets)-1].Count, true
		}
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Key, out[j].Key
		if a.To != b.To {
			return a.To < b.To
		}
		if a.Prober != b.Prober {
			return a.Prober < b.Prober
		}
		return labelString(out[i].Labels) < labelString(out[j].Labels)
	})
	return out, nil
}

// dedupBuckets keeps one bucket per bound (a line pasted twice).
func dedupBuckets(b []Bucket) []Bucket {
	out := b[:0]
	for i, x := range b {
		if i > 0 && x.UpperBound == out[len(out)-1].UpperBound {
			out[len(out)-1] = x
			continue
		}
		out = append(out, x)
	}
	return out
}

func labelString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + m[k] + ",")
	}
	return b.String()
}

func bucketCount(b *dto.Bucket) float64 {
	if b.CumulativeCountFloat != nil {
		return b.GetCumulativeCountFloat()
	}
	return float64(b.GetCumulativeCount())
}

func countOf(h *dto.Histogram) float64 {
	if h.SampleCountFloat != nil {
		return h.GetSampleCountFloat()
	}
	return float64(h.GetSampleCount())
}

// value returns the sample of an untyped, gauge or counter metric.
func value(m *dto.Metric) (float64, bool) {
	switch {
	case m.Untyped != nil:
		return m.Untyped.GetValue(), true
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	}
	return 0, false
}

// keyOf picks To and the prober label out of lp; the rest is returned.
func keyOf(lp []*dto.LabelPair) (Key, map[string]string) {
	var k Key
	var rest map[string]string
	for _, l := range lp {
		switch {
		case l.GetName() == "To":
			k.To = l.GetValue()
		case isProberLabel(l.GetName()):
			k.Prober = l.GetValue()
		default:
			if rest == nil {
				rest = map[string]string{}
			}
			rest[l.GetName()] = l.GetValue()
		}
	}
	return k, rest
}

func isProberLabel(name string) bool {
	for _, p := range proberLabels {
		if name == p {
			return true
		}
	}
	return false
}

func splitLabel(lp []*dto.LabelPair, name string) (string, []*dto.LabelPair) {
	var v string
	out := make([]*dto.LabelPair, 0, len(lp))
	for _, l := range lp {
		if l.GetName() == name {
			v = l.GetValue()
			continue
		}
		out = append(out, l)
	}
	return v, out
}

// parseBound parses an le label value ("0.0001", "+Inf", "1e-04").
func parseBound(le string) (float64, error) {
	if strings.EqualFold(le, "+Inf") || strings.EqualFold(le, "Inf") {
		return math.Inf(1), nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(le), 64)
	if err != nil {
		return 0, fmt.Errorf("bucket bound %q: %w", le, err)
	}
	return f, nil
}
