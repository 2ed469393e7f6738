package pipeline

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/etcdinfo"
)

// answerProbe measures what etcd's kept-alive ROUND_TRIPPER_SNAPSHOT
// prober measures, from this host: GET <peerURL>/raft/probing every
// etcdmetric.ProbeInterval on one kept-alive connection, timed from before
// the request to the decoded answer (as github.com/xiang90/probing does).
// The kernel cannot see that time whole: its srtt of the connection covers
// RTT + the peer's answer but not TLS record work and scheduling on the
// client, which on a LAN or loopback are most of it.
type answerProbe struct {
	mu      sync.Mutex
	samples map[netip.Addr][]time.Duration // per peer IP, after the dial
	errs    map[netip.Addr]error
	// locals: the local address of every connection the probe dialed,
	// so that the report leaves them out of etcd's links
	// (peers.Options.ExcludeLocal).
	locals map[netip.AddrPort]bool
}

// dial is the probe transport's DialContext: it records each
// connection's local address in a.locals.
func (a *answerProbe) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if ap, err := netip.ParseAddrPort(c.LocalAddr().String()); err == nil {
		a.mu.Lock()
		if a.locals == nil {
			a.locals = map[netip.AddrPort]bool{}
		}
		a.locals[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = true
		a.mu.Unlock()
	}
	return c, nil
}

// owns says whether local is the local address of a probe connection
// (peers.Assembler.Exclude).
func (a *answerProbe) owns(local netip.AddrPort) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.locals[local]
}

// ownConns returns the local addresses of the probe's connections.
func (a *answerProbe) ownConns() map[netip.AddrPort]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[netip.AddrPort]bool, len(a.locals))
	for k := range a.locals {
		out[k] = true
	}
	return out
}

// run probes every member's first peer URL except the one at skip until
// ctx ends.
func (a *answerProbe) run(ctx context.Context, members []etcdmetric.Member, peerURLs map[uint64]string, skip netip.Addr, tlsCfg *tls.Config) {
	a.samples = map[netip.Addr][]time.Duration{}
	a.errs = map[netip.Addr]error{}
	var wg sync.WaitGroup
	for _, m := range members {
		u := peerURLs[m.ID]
		if u == "" || len(m.PeerIPs) == 0 || m.PeerIPs[0] == skip {
			continue
		}
		ip := m.PeerIPs[0]
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.probe(ctx, ip, u, tlsCfg)
		}()
	}
	wg.Wait()
}

func (a *answerProbe) probe(ctx context.Context, ip netip.Addr, peerURL string, tlsCfg *tls.Config) {
	tr := &http.Transport{TLSClientConfig: tlsCfg, MaxIdleConnsPerHost: 1, DialContext: a.dial}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	target, err := url.JoinPath(peerURL, "/raft/probing")
	if err != nil {
		a.fail(ip, err)
		return
	}
	tick := time.NewTicker(etcdmetric.ProbeInterval)
	defer tick.Stop()
	first := true
	for {
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			a.fail(ip, err)
			return
		}
		resp, err := cl.Do(req)
		if err == nil {
			var health struct{ OK bool }
			err = json.NewDecoder(resp.Body).Decode(&health)
			resp.Body.Close()
			if err == nil && !health.OK {
				err = fmt.Errorf("peer answered OK=false")
			}
		}
		d := time.Since(start)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.fail(ip, etcdinfo.ExplainTLS(err))
		} else if !first { // the first one dials
			a.mu.Lock()
			a.samples[ip] = append(a.samples[ip], d)
			a.mu.Unlock()
		}
		first = false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (a *answerProbe) fail(ip netip.Addr, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs[ip] = err
}

// err returns the last error probing ip, nil if none.
func (a *answerProbe) err(ip netip.Addr) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.errs[ip]
}

// mean returns the mean kept-alive probe time to ip, 0 if none.
func (a *answerProbe) mean(ip netip.Addr) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.samples[ip]
	if len(s) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return sum / time.Duration(len(s))
}
