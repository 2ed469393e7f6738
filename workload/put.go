package workload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/host"
)

// LoadKeyPrefix starts every key the built-in load writes; each run adds
// a random part of its own (LoadPrefix).
const LoadKeyPrefix = "/etcdscope/commit-load/"

// loadValueBytes is the size of each put's value: a small write, like a
// Kubernetes lease renewal.
const loadValueBytes = 256

// Load is the built-in put load of `etcdscope commit --load N/s`: puts one
// key at a time under a prefix of its own, attached to a lease so that
// every key expires even if etcdscope is killed, and times each put as a
// client sees it.
type Load struct {
	cli      *clientv3.Client
	Prefix   string
	Lease    clientv3.LeaseID
	TTL      time.Duration
	PerSec   float64
	ClientNs stats.Series // each put, send to answer
	// TransportNs: a serializable Get of the key just put, right after
	// each put: what the client, gRPC and the loopback or network cost around
	// a request that etcd answers locally (no Raft, no disk). A put as the
	// client sees it is about the server's write plus this.
	TransportNs stats.Series
	// IdleTransportNs: the same get half an interval later, from idle
	// (threads asleep, as a put's answer finds them): the cold bound of
	// the client and transport round trip, TransportNs the warm one.
	IdleTransportNs stats.Series
	Puts            int
	Errors          int
	// Intervals are each successful put's [start, end] in CLOCK_MONOTONIC
	// ns (the probes' clock), at most maxIntervals: the write etcd traced
	// for a put lies inside it (puts are sequential), which pairs the
	// client's time with the server's (PairClient).
	Intervals [][2]uint64
}

// maxIntervals bounds Load.Intervals (an hour at 25 puts/s).
const maxIntervals = 100000

// NewLoad grants the lease (TTL: the run's duration plus a minute, at
// least 2 minutes) and returns a load on cli at perSec puts per second.
func NewLoad(ctx context.Context, cli *clientv3.Client, perSec float64, duration time.Duration) (*Load, error) {
	var rb [6]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	host = strings.NewReplacer("/", "_", " ", "_").Replace(host)
	l := &Load{cli: cli, PerSec: perSec, Prefix: fmt.Sprintf("%s%s-%d-%s/", LoadKeyPrefix, host, os.Getpid(), hex.EncodeToString(rb[:]))}
	l.TTL = max(duration+time.Minute, 2*time.Minute)
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Grant(gctx, int64(l.TTL/time.Second))
	if err != nil {
		return nil, fmt.Errorf("granting the load's lease: %w", err)
	}
	l.Lease = resp.ID
	return l, nil
}

// Info is what the load writes, for the notice printed before it starts
// (render.CommitNotice).
func (l *Load) Info() commit.LoadInfo {
	return commit.LoadInfo{PerSec: l.PerSec, ValueBytes: loadValueBytes, Prefix: l.Prefix, Lease: int64(l.Lease), TTL: l.TTL}
}

// Run puts one key per 1/PerSec until ctx ends, one put at a time (a put
// slower than the interval delays the next), each with a 10 s timeout,
// and right after each put and half an interval later reads the key back
// serializably (TransportNs, IdleTransportNs).
func (l *Load) Run(ctx context.Context) {
	value := strings.Repeat("x", loadValueBytes)
	interval := time.Duration(float64(time.Second) / l.PerSec)
	t := time.NewTicker(interval)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		key := fmt.Sprintf("%s%08d", l.Prefix, i)
		mono := host.MonotonicNs()
		start := time.Now()
		_, err := l.cli.Put(pctx, key, value, clientv3.WithLease(l.Lease))
		d := time.Since(start)
		monoEnd := host.MonotonicNs()
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.Errors++
			continue
		}
		l.Puts++
		l.ClientNs.Add(d.Nanoseconds())
		if len(l.Intervals) < maxIntervals {
			l.Intervals = append(l.Intervals, [2]uint64{mono, monoEnd})
		}
		// Right after the put, on the threads the put's answer just woke,
		// and again half an interval later, from idle: a put's own
		// client and transport time lies between the two.
		if d, ok := l.get(ctx, key); ok {
			l.TransportNs.Add(d)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval / 2):
		}
		if d, ok := l.get(ctx, key); ok {
			l.IdleTransportNs.Add(d)
		}
	}
}

// get times a serializable get of key (ns).
func (l *Load) get(ctx context.Context, key string) (int64, bool) {
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := l.cli.Get(gctx, key, clientv3.WithSerializable(), clientv3.WithKeysOnly())
	return time.Since(start).Nanoseconds(), err == nil
}

// Revoke revokes the lease, deleting every key of the load, within ctx.
func (l *Load) Revoke(ctx context.Context) error {
	_, err := l.cli.Revoke(ctx, l.Lease)
	return err
}

// PairClient pairs traced writes (their [start, end], CLOCK_MONOTONIC ns)
// with the load's puts: a write inside exactly one put's interval is that
// put. It returns, for each pair, the client's time minus the server's:
// the client library, gRPC and the transport around the write.
func PairClient(intervals [][2]uint64, writes [][2]uint64) (outside stats.Series) {
	j := 0
	for _, w := range writes { // both in time order
		for j < len(intervals) && intervals[j][1] < w[1] {
			j++
		}
		if j == len(intervals) {
			break
		}
		if iv := intervals[j]; iv[0] <= w[0] && w[1] <= iv[1] {
			outside.Add(int64((iv[1] - iv[0]) - (w[1] - w[0])))
		}
	}
	return outside
}
