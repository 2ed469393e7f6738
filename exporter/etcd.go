package exporter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/tracer"
)

// watchEtcd scrapes one etcd member's /metrics every window and, from the
// second scrape on, exports the comparison of its peer RTT metric's delta
// with the connections that member opened in the same window.
func watchEtcd(ctx context.Context, u string, endpoints []string, tlsCfg *tls.Config, window time.Duration, m *Metrics, win *peerWindow, logw io.Writer) {
	label := u
	if pu, err := url.Parse(u); err == nil {
		label = pu.Host
	}
	var prev etcdmetric.Scrape
	var prevT time.Time
	var prevMono uint64
	have := false
	tick := time.NewTicker(window)
	defer tick.Stop()
	for {
		now, mono := time.Now(), tracer.MonotonicNs()
		sc, err := ScrapeEtcd(ctx, u, tlsCfg)
		switch {
		case err != nil && ctx.Err() == nil:
			m.ScrapeError(label)
			fmt.Fprintf(logw, "etcdscope serve: --etcd-metrics %s: %v\n", u, err)
			have = false
		case err == nil:
			if have {
				links := peers.Analyze(win.between(prevMono, mono), peers.Options{Window: now.Sub(prevT)}).Links
				pid, _ := MemberPID(u)
				var members []etcdmetric.Member
				if len(endpoints) > 0 {
					mctx, cancel := context.WithTimeout(ctx, 15*time.Second)
					members, err = Members(mctx, endpoints, tlsCfg)
					cancel()
					if err != nil {
						// Without the list the series are compared with
						// the member's connections pooled; say so once
						// per window.
						m.ScrapeError(label)
						fmt.Fprintf(logw, "etcdscope serve: --etcd-endpoints: %v\n", err)
					}
				}
				cs, _ := etcdmetric.CompareScrapes(prev, sc,
					etcdmetric.Window{Start: prevT, End: now, ProcessStart: sc.ProcessStart, MonoAtStart: prevMono},
					links, uint32(pid), members, nil)
				m.SetComparisons(label, cs)
			}
			prev, prevT, prevMono, have = sc, now, mono, true
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// ScrapeEtcd fetches and parses one etcd /metrics page (etcdmetric.Parse,
// i.e. prometheus/common's expfmt). A page of etcd's without peer RTT
// observations yet is an empty Scrape, not an error.
func ScrapeEtcd(ctx context.Context, u string, tlsCfg *tls.Config) (etcdmetric.Scrape, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return etcdmetric.Scrape{}, err
	}
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	resp, err := cl.Do(req)
	if err != nil {
		return etcdmetric.Scrape{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return etcdmetric.Scrape{}, fmt.Errorf("HTTP %s (is this etcd's /metrics?)", resp.Status)
	}
	sc, err := etcdmetric.Parse(io.LimitReader(resp.Body, 64<<20))
	if errors.Is(err, etcdmetric.ErrNoMetric) && sc.IsEtcd {
		return sc, nil
	}
	if err != nil {
		return sc, fmt.Errorf("not etcd metrics: %w", err)
	}
	return sc, nil
}

// MemberPID finds the process listening on the metrics URL's address (from
// /proc/net/tcp{,6} and /proc/PID/fd, tracer.ListenerPID): the
// etcd member whose opened connections are compared with its metric.
func MemberPID(u string) (int, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return 0, err
	}
	port := pu.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[pu.Scheme]
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port %q: %w", port, err)
	}
	ips, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", pu.Hostname())
	if err != nil || len(ips) == 0 {
		return 0, fmt.Errorf("resolving %s: %v", pu.Hostname(), err)
	}
	return tracer.ListenerPID(netip.AddrPortFrom(ips[0].Unmap(), uint16(p)))
}
