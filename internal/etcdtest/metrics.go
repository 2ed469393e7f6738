package etcdtest

import (
	"context"
	"crypto/tls"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/etcdscope/etcdscope/etcdinfo"
)

// Scrape fetches and parses a Prometheus text exposition from url
// (etcdinfo.Families: prometheus/common/expfmt, families keyed by metric
// name; TLS with tlsCfg when it is https).
func Scrape(ctx context.Context, url string, tlsCfg *tls.Config) (map[string]*dto.MetricFamily, error) {
	return etcdinfo.Families(ctx, url, tlsCfg)
}

// Scrape scrapes member m's plain-HTTP metrics endpoint (MetricsURL).
func (c *Cluster) Scrape(ctx context.Context, m *Member) (map[string]*dto.MetricFamily, error) {
	return Scrape(ctx, m.MetricsURL, nil)
}

// SumCounter sums one family over all its series: counter and untyped
// values, histogram and summary sample counts (so a histogram's name gives
// its _count; "name_count" is accepted too). It returns 0 when the family
// is absent, so a missing metric shows up as a delta of zero.
func SumCounter(fams map[string]*dto.MetricFamily, name string) float64 {
	f, ok := fams[name]
	if !ok {
		base, isCount := strings.CutSuffix(name, "_count")
		if f, ok = fams[base]; !isCount || !ok {
			return 0
		}
	}
	var sum float64
	for _, m := range f.GetMetric() {
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.Summary.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}
