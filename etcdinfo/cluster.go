package etcdinfo

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// Cluster is what a traced member's run knows of its cluster from
// --etcd-endpoints: a client, the members, which of them is the traced
// process and who leads. Close it.
type Cluster struct {
	Client  *clientv3.Client
	Local   string // the client URL the traced process serves
	LocalID uint64
	// LeaderID at Discover; Leader asks again.
	LeaderID uint64
	Version  string // the traced member's etcd version ("3.5.17")
	// ClusterID is etcd's cluster id (every member's response header).
	ClusterID uint64
	Members   []etcdmetric.Member
}

// Discover asks endpoints for the member list, finds the member process
// pid serves (LocalMember) and its leader. The member list waits at most
// 10 s; an unreachable cluster is ErrUnreachable (it names the flag and
// what to check), a leaderless one is not an error.
func Discover(ctx context.Context, endpoints []string, tlsCfg *tls.Config, pid int) (*Cluster, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	c := &Cluster{Client: cli}
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c.Members, _, err = Members(mctx, endpoints, tlsCfg)
	cancel()
	switch {
	case errors.Is(err, ErrUnreachable):
		cli.Close()
		return nil, err
	case err != nil && !errors.Is(err, ErrLeaderUnknown):
		cli.Close()
		return nil, fmt.Errorf("--etcd-endpoints: %w", err)
	}
	c.Local, c.LocalID, c.LeaderID, c.ClusterID, c.Version, err = LocalMember(ctx, cli, endpoints, pid)
	var ns *NotServedError
	if errors.As(err, &ns) {
		// Another member of the cluster may be pid's: the member list
		// (one more request, on this failing path only) names it.
		ns.Member, ns.URL = servedMember(ctx, cli, pid)
		cli.Close()
		return nil, err // it names the flag
	}
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("--etcd-endpoints: %w", err)
	}
	return c, nil
}

// servedMember returns the name and client URL of the member whose client
// URL the local process pid listens on, or "", "".
func servedMember(ctx context.Context, cli *clientv3.Client, pid int) (name, url string) {
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ml, err := cli.MemberList(mctx)
	if err != nil {
		return "", ""
	}
	for _, m := range ml.Members {
		if u := ServedEndpoint(m.ClientURLs, pid); u != "" {
			return m.Name, u
		}
	}
	return "", ""
}

// Leader asks the traced member who leads now, waiting at most timeout.
func (c *Cluster) Leader(ctx context.Context, timeout time.Duration) (uint64, error) {
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := c.Client.Status(sctx, c.Local)
	if err != nil {
		return 0, err
	}
	return st.Leader, nil
}

// Close closes the client.
func (c *Cluster) Close() error { return c.Client.Close() }
