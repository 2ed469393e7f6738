package exporter

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/etcdinfo"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/pipeline"
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
		now, mono := time.Now(), host.MonotonicNs()
		sc, err := etcdinfo.Scrape(ctx, u, tlsCfg)
		switch {
		case err != nil && ctx.Err() == nil:
			m.ScrapeError(label)
			fmt.Fprintf(logw, "etcdscope serve: --etcd-metrics %s: %v\n", u, err)
			have = false
		case err == nil:
			if have {
				links := peers.Analyze(win.between(prevMono, mono), peers.Options{Window: now.Sub(prevT)}).Links
				var members []etcdmetric.Member
				if len(endpoints) > 0 {
					// An unknown leader is no error here: the comparison
					// needs the members, not the leader.
					members, _, _, err = pipeline.Members(ctx, endpoints, tlsCfg)
					if err != nil {
						// Without the list the series are compared with
						// the member's connections pooled; say so once
						// per window.
						m.ScrapeError(label)
						fmt.Fprintf(logw, "etcdscope serve: --etcd-endpoints: %v\n", err)
					}
				}
				cs, _, _ := pipeline.CompareEtcd(pipeline.EtcdWindow{MetricsURL: u, From: prev, To: sc, Start: prevT, End: now,
					MonoStart: prevMono, Links: links, Members: members})
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
