package etcdinfo

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Families fetches a Prometheus text exposition from url (TLS with tlsCfg
// when it is https; nil for plain http), waiting at most 10 s and reading
// at most MaxScrapeBytes (a larger body fails with ErrScrapeTooLarge
// rather than being parsed cut short), and parses it with
// prometheus/common/expfmt into families keyed by metric name. Histogram
// families keep their _bucket/_sum/_count samples inside one family.
func Families(ctx context.Context, url string, tlsCfg *tls.Config) (map[string]*dto.MetricFamily, error) {
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
		return nil, fmt.Errorf("scraping %s: %w", url, ExplainTLS(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scraping %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(&capReader{r: resp.Body, n: MaxScrapeBytes})
	if errors.Is(err, ErrScrapeTooLarge) {
		return nil, fmt.Errorf("scraping %s: %w: give the URL of etcd's own /metrics (its --listen-metrics-urls or client URL)", url, err)
	}
	if err != nil {
		return nil, fmt.Errorf("parsing metrics from %s: %w", url, err)
	}
	return fams, nil
}

// HistogramTotals returns the sample count and sum (seconds) of histogram
// family name over its series whose labels include every pair of match
// (nil: all series); 0, 0 when absent.
func HistogramTotals(fams map[string]*dto.MetricFamily, name string, match map[string]string) (count, sumSeconds float64) {
	f, ok := fams[name]
	if !ok {
		return 0, 0
	}
series:
	for _, m := range f.GetMetric() {
		if m.Histogram == nil {
			continue
		}
		for k, v := range match {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue series
			}
		}
		count += float64(m.Histogram.GetSampleCount())
		sumSeconds += m.Histogram.GetSampleSum()
	}
	return count, sumSeconds
}

// ServedEndpoint returns the first of endpoints whose address the local
// process pid listens on (its listening socket, ListenerPID), or "".
func ServedEndpoint(endpoints []string, pid int) string {
	for _, ep := range endpoints {
		if p, err := ListenerPID(ep); err == nil && p == pid {
			return ep
		}
	}
	return ""
}

// NotServedError is LocalMember's error when no endpoint is served by PID.
// Member and URL, when Discover found them in the member list, are the
// member PID is and the client URL it serves.
type NotServedError struct {
	PID       int
	Endpoints []string
	Member    string
	URL       string
}

func (e *NotServedError) Error() string {
	s := fmt.Sprintf("none of --etcd-endpoints %s is served by pid %d", strings.Join(e.Endpoints, ","), e.PID)
	if e.URL != "" {
		return fmt.Sprintf("%s: pid %d is member %s, at %s: give --etcd-endpoints %s, or the pid of the member at %s", s, e.PID, e.Member, e.URL, e.URL, strings.Join(e.Endpoints, ","))
	}
	return fmt.Sprintf("%s: give the client URL of the member with pid %d", s, e.PID)
}

// LocalMember finds which of endpoints the local process pid serves (its
// listening socket) and asks that member its id, the leader's, its etcd
// version ("3.4.23") and the cluster's id. It returns the endpoint, or a
// *NotServedError when no endpoint is served by pid.
func LocalMember(ctx context.Context, cli *clientv3.Client, endpoints []string, pid int) (endpoint string, id, leader, cluster uint64, version string, err error) {
	endpoint = ServedEndpoint(endpoints, pid)
	if endpoint == "" {
		return "", 0, 0, 0, "", &NotServedError{PID: pid, Endpoints: endpoints}
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := cli.Status(sctx, endpoint)
	if err != nil {
		return endpoint, 0, 0, 0, "", fmt.Errorf("status of %s: %w", endpoint, ExplainTLS(err))
	}
	return endpoint, st.Header.MemberId, st.Leader, st.Header.ClusterId, st.Version, nil
}
