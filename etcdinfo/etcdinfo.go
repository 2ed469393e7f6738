// Package etcdinfo asks a running etcd what etcdscope compares its
// measurements with: the /metrics page (parsed by analysis/etcdmetric,
// i.e. prometheus/common's expfmt), the member list and leader
// (go.etcd.io/etcd/client/v3), and which local process serves a URL.
// `etcdscope peers` and `etcdscope serve` share it, and every command
// with --cacert loads its client TLS configuration with LoadTLS.
package etcdinfo

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/host"
)

// ScrapeTimeout bounds Scrape: etcd answers /metrics in milliseconds.
const ScrapeTimeout = 5 * time.Second

// Scrape fetches and parses one etcd /metrics page, waiting at most
// ScrapeTimeout (then ErrUnreachable, wrapped with what to check). A page
// of etcd's without peer RTT observations yet is an empty Scrape, not an
// error; a page that is not etcd's is an error saying so, and TLS
// failures say what to fix (ExplainTLS).
func Scrape(ctx context.Context, u string, tlsCfg *tls.Config) (etcdmetric.Scrape, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return etcdmetric.Scrape{}, err
	}
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	resp, err := cl.Do(req)
	if errors.Is(err, context.DeadlineExceeded) {
		// The caller's deadline may be the shorter one: say how long it waited.
		return etcdmetric.Scrape{}, fmt.Errorf("%w within %v: check the URL (curl %s), the scheme (http/https) and --cacert", ErrUnreachable, time.Since(start).Round(100*time.Millisecond), u)
	}
	if err != nil {
		return etcdmetric.Scrape{}, ExplainTLS(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return etcdmetric.Scrape{}, fmt.Errorf("HTTP %s (is this etcd's /metrics?)", resp.Status)
	}
	sc, err := etcdmetric.Parse(&capReader{r: resp.Body, n: MaxScrapeBytes})
	if errors.Is(err, ErrScrapeTooLarge) || errors.Is(err, etcdmetric.ErrTooManySamples) {
		// Past either bound (bytes or samples) it is not one member's page.
		return etcdmetric.Scrape{}, fmt.Errorf("%w: give the URL of etcd's own /metrics (its --listen-metrics-urls or client URL)", err)
	}
	if errors.Is(err, etcdmetric.ErrNoMetric) && sc.IsEtcd {
		return sc, nil
	}
	if err != nil {
		return sc, fmt.Errorf("not etcd metrics: %w", err)
	}
	return sc, nil
}

// ExplainTLS adds what to fix to a TLS failure (unknown CA, wrong host
// name, plain HTTP server, missing client certificate); other errors come
// back unchanged.
func ExplainTLS(err error) error {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var rec tls.RecordHeaderError
	switch {
	case errors.As(err, &ua):
		return fmt.Errorf("%w (the server's certificate is not signed by --cacert)", err)
	case errors.As(err, &hn):
		return fmt.Errorf("%w (the certificate does not name this host: use the address in its SAN)", err)
	case errors.As(err, &rec):
		return fmt.Errorf("%w (the server does not speak TLS: use http://)", err)
	case strings.Contains(err.Error(), "certificate required") || strings.Contains(err.Error(), "bad certificate"):
		return fmt.Errorf("%w (the server wants a client certificate: give --cert and --key)", err)
	}
	return err
}

// MembersTimeout bounds Members: a member list answers in milliseconds on
// a healthy cluster.
const MembersTimeout = 5 * time.Second

// ErrUnreachable is returned (wrapped) by Members when no endpoint
// answered within MembersTimeout, and by Scrape when the page did not
// come within ScrapeTimeout.
var ErrUnreachable = errors.New("no answer")

// MaxScrapeBytes caps a scraped /metrics body. etcd's own is ~100-300 KiB
// (its histograms and gRPC series; more with many members); a larger body
// is not etcd's, and reading it all would cost the node its memory.
const MaxScrapeBytes = 8 << 20

// ErrScrapeTooLarge is returned (wrapped) by Scrape for a body larger than
// MaxScrapeBytes.
var ErrScrapeTooLarge = errors.New("body larger than 8 MiB")

// capReader fails with ErrScrapeTooLarge once more than n bytes are read.
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n < 0 {
		return 0, ErrScrapeTooLarge
	}
	if int64(len(p)) > c.n+1 {
		p = p[:c.n+1]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	if c.n < 0 {
		return n, ErrScrapeTooLarge
	}
	return n, err
}

// ErrLeaderUnknown is returned (wrapped, with the members) by Members when
// no endpoint answered a status request.
var ErrLeaderUnknown = errors.New("no endpoint answered a status request: leader unknown")

// Members asks the cluster at endpoints (client URLs) for its member list
// (clientv3 MemberList) and marks the leader (Status of the first endpoint
// that answers). Each member's peer URLs are resolved to the addresses its
// peer connections come from, so the metric's To label (the member ID) can
// be matched with the connections to that peer. peerURLs maps each member
// ID to its first peer URL.
//
// It waits at most MembersTimeout for the member list; no answer in that
// time is ErrUnreachable, wrapped in a line naming the endpoints and the fix.
func Members(ctx context.Context, endpoints []string, tlsCfg *tls.Config) (members []etcdmetric.Member, peerURLs map[uint64]string, err error) {
	ctx, cancel := context.WithTimeout(ctx, MembersTimeout)
	defer cancel()
	if err := allRefused(ctx, endpoints, tlsCfg); err != nil {
		return nil, nil, fmt.Errorf("--etcd-endpoints %s: %w: %v: check the client URL (etcdctl --endpoints %s endpoint health)",
			strings.Join(endpoints, ","), ErrUnreachable, err, strings.Join(endpoints, ","))
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsCfg, DialTimeout: MembersTimeout, MaxCallRecvMsgSize: MaxScrapeBytes, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	ml, err := cl.MemberList(ctx)
	if err != nil && ctx.Err() != nil {
		return nil, nil, fmt.Errorf("--etcd-endpoints %s: %w within %v: check the client URL (etcdctl --endpoints %s endpoint health), the scheme (http/https) and --cacert",
			strings.Join(endpoints, ","), ErrUnreachable, MembersTimeout, strings.Join(endpoints, ","))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("member list: %w", ExplainTLS(err))
	}
	var leader uint64
	for _, ep := range endpoints {
		if st, err := cl.Status(ctx, ep); err == nil {
			leader = st.Leader
			break
		}
	}
	peerURLs = map[uint64]string{}
	for _, m := range ml.Members {
		mem := etcdmetric.Member{ID: m.ID, Name: m.Name, Leader: m.ID == leader}
		if len(m.PeerURLs) > 0 {
			peerURLs[m.ID] = m.PeerURLs[0]
		}
		for _, pu := range m.PeerURLs {
			u, err := url.Parse(pu)
			if err != nil {
				continue
			}
			ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname())
			if err != nil {
				continue
			}
			for _, ip := range ips {
				mem.PeerIPs = append(mem.PeerIPs, ip.Unmap())
			}
		}
		members = append(members, mem)
	}
	if leader == 0 {
		return members, peerURLs, ErrLeaderUnknown
	}
	return members, peerURLs, nil
}

// ListenerPID finds the local process listening on u's address (from
// /proc/net/tcp{,6} and /proc/PID/fd, host.ListenerPID): the etcd member
// that serves a metrics or client URL.
func ListenerPID(u string) (int, error) {
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
	return host.ListenerPID(netip.AddrPortFrom(ips[0].Unmap(), uint16(p)))
}

// allRefused dials each endpoint once (within refusedTimeout) and returns
// the first refusal when every endpoint refused the connection: nothing
// listens there, and waiting MembersTimeout for clientv3's retries would
// only hide that. Any other outcome (an answer, a timeout, a name that does
// not resolve, a unix socket) is nil: the client's own error says it. A TLS
// endpoint (https, or a bare address with tlsCfg, as clientv3 reads them) is
// dialled with its handshake, so that etcd does not log a rejected
// connection for a connect closed before it.
func allRefused(ctx context.Context, endpoints []string, tlsCfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, refusedTimeout)
	defer cancel()
	var first error
	for _, ep := range endpoints {
		addr, secure := ep, tlsCfg != nil
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			if u.Scheme != "http" && u.Scheme != "https" {
				return nil
			}
			addr, secure = u.Host, u.Scheme == "https"
		}
		var c net.Conn
		var err error
		if secure {
			cfg := &tls.Config{}
			if tlsCfg != nil {
				cfg = tlsCfg.Clone()
			}
			c, err = (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
		} else {
			c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}
		if err == nil {
			c.Close()
			return nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
		if first == nil {
			first = fmt.Errorf("connection refused by %s (is etcd listening there?)", addr)
		}
	}
	return first
}

// refusedTimeout bounds allRefused's dials together: a refusal comes back
// in one round trip; anything slower is left to the client's own wait.
const refusedTimeout = time.Second
