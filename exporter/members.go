package exporter

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// Members asks the cluster at endpoints (client URLs) for its member list
// (clientv3 MemberList) and marks the leader (Status of the first endpoint
// that answers). Each member's peer URLs are resolved to the addresses its
// peer connections come from, so the etcd comparison can match the
// metric's To label (the member ID) with the connections to that peer.
func Members(ctx context.Context, endpoints []string, tlsCfg *tls.Config) ([]etcdmetric.Member, error) {
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ml, err := cl.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("member list: %w", err)
	}
	var leader uint64
	for _, ep := range endpoints {
		if st, err := cl.Status(ctx, ep); err == nil {
			leader = st.Leader
			break
		}
	}
	var out []etcdmetric.Member
	for _, m := range ml.Members {
		mem := etcdmetric.Member{ID: m.ID, Name: m.Name, Leader: m.ID == leader}
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
		out = append(out, mem)
	}
	return out, nil
}
