package pipeline

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/etcdinfo"
	"github.com/etcdscope/etcdscope/host"
)

// stopScrapeTimeout bounds the end scrape of --etcd-metrics once a
// signal has stopped the run: etcd answers /metrics in milliseconds, and
// the command has 2 s to exit.
const stopScrapeTimeout = time.Second

// PeersEtcdConfig is what `etcdscope peers` asks of etcd around the
// tracing (its --etcd-endpoints, --etcd-metrics, TLS and
// --probe-answer).
type PeersEtcdConfig struct {
	Endpoints   []string
	MetricsURL  string
	TLS         *tls.Config
	ProbeAnswer bool // run the kept-alive probe of each peer
	Port        int  // the peer port traced
	// OnStartScrapeErr, when set, is told at once that the start scrape
	// failed (the tracing goes on; the report will have no metric
	// comparison).
	OnStartScrapeErr func(error)
}

// PeersEtcd is what peers learns of etcd around the tracing: the members,
// the metrics at start, and its own kept-alive probe of each peer.
type PeersEtcd struct {
	f          PeersEtcdConfig
	rep        etcdmetric.PeersReport
	metricErrs []string
	scrape0    etcdmetric.Scrape // the metrics at start
	startOK    bool
	probe      *answerProbe
	cancel     context.CancelFunc
	probeDone  chan struct{}
	t0, t1     time.Time         // the window's start and end
	scrape1    etcdmetric.Scrape // the metrics at the end
	endOK      bool
	timeouts   etcdmetric.Timeouts // the scraped member's (Finish)
	mono0      unix.Timespec       // t0 on the events' clock
}

// StartPeersEtcd asks the members, scrapes the metrics and starts the
// kept-alive probe; the window starts after it (Start). An unreachable
// member list (etcdinfo.ErrUnreachable, not cut short by ctx) is returned:
// bad input, said before the metrics scrape can make the user wait.
func StartPeersEtcd(ctx context.Context, f PeersEtcdConfig) (*PeersEtcd, error) {
	r := &PeersEtcd{f: f, rep: etcdmetric.PeersReport{Port: f.Port, MetricsURL: f.MetricsURL}}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *PeersEtcd) start(ctx context.Context) error {
	f, rep := r.f, &r.rep
	var peerURLs map[uint64]string
	var err error
	if len(f.Endpoints) > 0 {
		var leaderKnown bool
		rep.Members, peerURLs, leaderKnown, err = Members(ctx, f.Endpoints, r.f.TLS)
		if errors.Is(err, etcdinfo.ErrUnreachable) && ctx.Err() == nil {
			// Nothing is attached yet: a wrong address is bad input,
			// said before the metrics scrape can make the user wait. (A
			// stop signal that cut the wait short is not: the run ends
			// as any stopped run does, exit 0.)
			return err
		}
		switch {
		case err != nil:
			rep.MembersError = err.Error()
		case !leaderKnown:
			rep.MembersError = etcdinfo.ErrLeaderUnknown.Error() // the members still name the series
		}
	}
	if f.MetricsURL != "" {
		r.scrape0, err = etcdinfo.Scrape(ctx, f.MetricsURL, r.f.TLS)
		if err != nil {
			r.metricErrs = append(r.metricErrs, "start scrape: "+err.Error())
			// Said now, not after --duration: the tracing goes on.
			if f.OnStartScrapeErr != nil {
				f.OnStartScrapeErr(err)
			}
		} else {
			r.startOK = true
		}
	}
	var local netip.Addr
	if u, err := url.Parse(f.MetricsURL); err == nil && f.MetricsURL != "" {
		if ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname()); err == nil && len(ips) > 0 {
			local = ips[0].Unmap()
		}
	}
	r.probe = &answerProbe{}
	var probeCtx context.Context
	probeCtx, r.cancel = context.WithCancel(ctx)
	r.probeDone = make(chan struct{})
	go func() {
		defer close(r.probeDone)
		if f.ProbeAnswer && len(rep.Members) > 0 {
			r.probe.run(probeCtx, rep.Members, peerURLs, local, r.f.TLS)
		}
	}()
	r.t0 = time.Now()
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &r.mono0) // the events' clock
	return nil
}

// Start is when the window started (after the start scrape).
func (r *PeersEtcd) Start() time.Time { return r.t0 }

// Owns reports whether local is the address of a connection the
// kept-alive probe dialed (not one of etcd's links).
func (r *PeersEtcd) Owns(local netip.AddrPort) bool { return r.probe.owns(local) }

// OwnConns returns the local ends of etcdscope's own probe connections,
// sorted: what the live table leaves out, and a capture or recording
// keeps for its replay to leave out too.
func (r *PeersEtcd) OwnConns() []netip.AddrPort {
	var out []netip.AddrPort
	for a := range r.probe.ownConns() {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return out
}

// Members returns the member list read at the start (nil without
// --etcd-endpoints, or when it could not be read).
func (r *PeersEtcd) Members() []etcdmetric.Member { return r.rep.Members }

// MembersError is why the member list is missing or incomplete ("": it
// is whole).
func (r *PeersEtcd) MembersError() string { return r.rep.MembersError }

// StopProbe stops the kept-alive probe and waits for it (safe to call
// more than once).
func (r *PeersEtcd) StopProbe() {
	r.cancel()
	<-r.probeDone
}

// Finish reads what the comparison takes of etcd once the window ends
// at t1 (after StopProbe): the probe's answers, the end scrape, the
// member's pid and timeouts. Its Evidence goes into a capture; Report
// compares it.
func (r *PeersEtcd) Finish(ctx context.Context, t1 time.Time) {
	f, rep, probe := r.f, &r.rep, r.probe
	r.t1 = t1
	for _, m := range rep.Members {
		for _, ip := range m.PeerIPs {
			if v := probe.mean(ip); v > 0 {
				if rep.KeptAliveProbe == nil {
					rep.KeptAliveProbe = map[netip.Addr]time.Duration{}
				}
				rep.KeptAliveProbe[ip] = v
			}
			if e := probe.err(ip); e != nil {
				if rep.KeptAliveProbeErrors == nil {
					rep.KeptAliveProbeErrors = map[netip.Addr]string{}
				}
				rep.KeptAliveProbeErrors[ip] = e.Error()
			}
		}
	}
	// Metrics are best effort: their errors are reported and the tracing
	// part still comes out. After a stop signal the end scrape waits at
	// most stopScrapeTimeout (the exit's 2 s budget: a stopped etcd must
	// not hold the report); at the end of --duration, etcd's own bound,
	// cut short by a signal.
	sctx, cancel := context.WithCancel(ctx)
	if ctx.Err() != nil {
		sctx, cancel = context.WithTimeout(context.Background(), stopScrapeTimeout)
	}
	defer cancel()
	if r.startOK {
		// Without the start scrape there is nothing to compare with, and
		// a URL that did not answer would hold the report up again.
		end, err := etcdinfo.Scrape(sctx, f.MetricsURL, r.f.TLS)
		switch {
		case err != nil && ctx.Err() != nil && errors.Is(err, etcdinfo.ErrUnreachable):
			r.metricErrs = append(r.metricErrs, fmt.Sprintf("end scrape: no answer within %v of the stop signal (is etcd stopped or overloaded?)", stopScrapeTimeout))
		case err != nil:
			r.metricErrs = append(r.metricErrs, "end scrape: "+err.Error())
		default:
			r.scrape1, r.endOK = end, true
			if pid, err := etcdinfo.ListenerPID(f.MetricsURL); err == nil {
				rep.MemberPID = pid
			}
		}
	}
	rep.MetricsError = strings.Join(r.metricErrs, "; ")
	// Against the scraped member's timeouts (etcd's defaults without it).
	r.timeouts = etcdinfo.Timeouts(rep.MemberPID)
}

// Evidence is what Finish read, for a capture to carry (nil without
// --etcd-metrics).
func (r *PeersEtcd) Evidence() *capture.Etcd {
	if r.f.MetricsURL == "" {
		return nil
	}
	rep := &r.rep
	ev := &capture.Etcd{MetricsURL: r.f.MetricsURL, MetricsError: rep.MetricsError, MemberPID: rep.MemberPID,
		StartUnixNs: r.t0.UnixNano(), MonoStartNs: uint64(r.mono0.Nano()), ProbeErrors: rep.KeptAliveProbeErrors, Timeouts: r.timeouts}
	if r.startOK {
		ev.From = capture.FromScrape(r.scrape0)
	}
	if r.endOK {
		ev.To = capture.FromScrape(r.scrape1)
	}
	for ip, v := range rep.KeptAliveProbe {
		if ev.KeptAliveNs == nil {
			ev.KeptAliveNs = map[netip.Addr]int64{}
		}
		ev.KeptAliveNs[ip] = int64(v)
	}
	return ev
}

// Report completes the report from the tracing's counters and
// connections and what Finish read.
func (r *PeersEtcd) Report(st Stats, owners host.SocketOwnerStats, conns *PeerConns) *etcdmetric.PeersReport {
	rep, probe, t0, t1 := &r.rep, r.probe, r.t0, r.t1
	rep.WindowSeconds = t1.Sub(t0).Seconds()
	// etcdscope's own kept-alive probe connections are not etcd's links.
	pr := conns.Report(peers.Options{Window: t1.Sub(t0), ExcludeLocal: probe.ownConns()})
	rep.OwnConns = r.OwnConns()
	rep.Events, rep.LostEvents, rep.MissedEvents, rep.RingPeakBytes = pr.Events, st.Lost, st.Missed, st.RingPeakBytes
	rep.Links, rep.Unassembled, rep.FoldedEarly = pr.Links, pr.Unassembled, pr.FoldedEarly
	rep.Owners = &etcdmetric.OwnerLookups{Resolved: owners.Resolved, Unowned: owners.Unowned, QueueDrops: owners.QueueDrops,
		Evicted: owners.Evicted, LearnedDrops: owners.LearnedDrops, LateOwners: pr.LateOwners, LateOwnersMissed: pr.LateOwnersMissed,
		Scans: owners.Scans, MaxScanCPUSeconds: time.Duration(owners.MaxScanCPUNs).Seconds()}

	if rep.MembersError == "" && len(rep.Members) > 0 {
		rep.FarLeader = etcdmetric.FindFarLeader(rep.Members, rep.Links)
	}
	rep.FillNotMember()
	// Compared from what a capture carries, as its replay compares it.
	if err := CompareEtcdEvidence(rep, r.Evidence(), t1.Sub(t0)); err != nil {
		rep.MetricsError = strings.TrimPrefix(rep.MetricsError+"; ", "; ") + err.Error()
	}
	return rep
}
