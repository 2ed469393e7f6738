package etcdtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape fetches a Prometheus text exposition from url (TLS with tlsCfg
// when it is https; nil for plain http) and parses it with
// prometheus/common/expfmt into families keyed by metric name. Histogram
// families keep their _bucket/_sum/_count samples inside one family.
func Scrape(ctx context.Context, url string, tlsCfg *tls.Config) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	// Ask for the text format: promhttp would otherwise be free to answer
	// with another encoding.
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scraping %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics from %s: %w", url, err)
	}
	return fams, nil
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
