package pipeline

import (
	"context"
	"crypto/tls"
	"errors"
	"net/netip"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/etcdinfo"
)

// MembersTimeout bounds one member-list request (Members).
const MembersTimeout = 15 * time.Second

// Members asks the cluster at endpoints for its member list and leader
// (etcdinfo.Members), within MembersTimeout. One policy for `peers` and
// `serve`: when no endpoint answers a status request the members are still
// good for the comparison, only the leader is unknown (leaderKnown false,
// err nil); any other failure is err, with no members.
func Members(ctx context.Context, endpoints []string, tlsCfg *tls.Config) (members []etcdmetric.Member, peerURLs map[uint64]string, leaderKnown bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, MembersTimeout)
	defer cancel()
	members, peerURLs, err = etcdinfo.Members(ctx, endpoints, tlsCfg)
	if errors.Is(err, etcdinfo.ErrLeaderUnknown) {
		return members, peerURLs, false, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	return members, peerURLs, true, nil
}

// EtcdWindow is one comparison of an etcd member's peer RTT metric with
// the connections traced between two scrapes of its /metrics.
type EtcdWindow struct {
	MetricsURL string            // the member's /metrics URL
	From, To   etcdmetric.Scrape // the scrapes at the window's start and end
	Start, End time.Time         // when they were made
	// MonoStart is CLOCK_MONOTONIC ns at Start (the events' clock).
	MonoStart uint64
	// Links are the traced links of the window (peers.Analyze).
	Links   []peers.LinkStats
	Members []etcdmetric.Member
	// KeptAlive: etcdscope's own kept-alive probe time per peer IP, if any.
	KeptAlive map[netip.Addr]time.Duration
	// ProbeErrors: that probe's last error per peer IP, if any.
	ProbeErrors map[netip.Addr]string
}

// CompareEtcd compares the metric's change over the window with the
// connections the member made (the member's pid is the process listening
// on the metrics URL's port, when found: its connections only), the same
// way for `peers` and `serve`: etcd's process start time from the end
// scrape (a restart inside the window resets the counts), the members to
// name each series' peer. It returns the member pid (0 if not found).
func CompareEtcd(w EtcdWindow) (cs []etcdmetric.PeerComparison, resets []etcdmetric.Key, memberPID int) {
	if pid, err := etcdinfo.ListenerPID(w.MetricsURL); err == nil {
		memberPID = pid
	}
	cs, resets = compareWindow(w, memberPID)
	return cs, resets, memberPID
}

// compareWindow is CompareEtcd with the member's pid known (a peers
// run's and its capture's: CompareEtcdEvidence).
func compareWindow(w EtcdWindow, memberPID int) ([]etcdmetric.PeerComparison, []etcdmetric.Key) {
	return etcdmetric.CompareScrapes(w.From, w.To,
		etcdmetric.Window{Start: w.Start, End: w.End, ProcessStart: w.To.ProcessStart, MonoAtStart: w.MonoStart, ProbeErrors: w.ProbeErrors},
		w.Links, uint32(memberPID), w.Members, w.KeptAlive)
}

// CompareEtcdEvidence fills rep's metric comparison and slow-peer
// verdicts from what a peers run read of etcd (ev, as its capture carries
// it; nil: none, and the slow peers are judged against etcd's default
// timeouts) over rep's links and members and the window's length: the one
// path of `etcdscope peers` and of its capture's replay.
func CompareEtcdEvidence(rep *etcdmetric.PeersReport, ev *capture.Etcd, window time.Duration) error {
	if ev == nil {
		rep.Slow = etcdmetric.SlowPeers(rep.Links, rep.Members, etcdmetric.DefaultTimeouts)
		return nil
	}
	rep.MetricsURL, rep.MetricsError, rep.MemberPID, rep.KeptAliveProbeErrors = ev.MetricsURL, ev.MetricsError, ev.MemberPID, ev.ProbeErrors
	for ip, v := range ev.KeptAliveNs {
		if rep.KeptAliveProbe == nil {
			rep.KeptAliveProbe = map[netip.Addr]time.Duration{}
		}
		rep.KeptAliveProbe[ip] = time.Duration(v)
	}
	rep.Slow = etcdmetric.SlowPeers(rep.Links, rep.Members, ev.Timeouts)
	if ev.From == nil || ev.To == nil {
		return nil // a scrape failed: MetricsError says which
	}
	from, err := ev.From.Metric()
	if err != nil {
		return err
	}
	to, err := ev.To.Metric()
	if err != nil {
		return err
	}
	start := time.Unix(0, ev.StartUnixNs)
	rep.Metric, rep.Resets = compareWindow(EtcdWindow{From: from, To: to, Start: start, End: start.Add(window), MonoStart: ev.MonoStartNs,
		Links: rep.Links, Members: rep.Members, KeptAlive: rep.KeptAliveProbe, ProbeErrors: rep.KeptAliveProbeErrors}, ev.MemberPID)
	return nil
}
