package netem

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"
)

// Classifier names how packets are steered into the netem band.
const (
	// ClassifierBPF is a cls_bpf program (bpf/classifier.bpf.c) whose peer
	// set lives in a BPF hash map, so peers change without a new tree.
	ClassifierBPF = "bpf"
	// ClassifierU32 is plain u32 filters, one per peer, protocol and
	// direction: what `tc filter show` users expect.
	ClassifierU32 = "u32"
)

// DefaultPort is etcd's peer (Raft) port.
const DefaultPort = 2380

// Handles of the tree etcdscope builds: prio 1: at root, netem 40: under
// its fourth band (class 1:4), which the priomap never selects.
const (
	PrioHandle  = 0x0001_0000 // 1:
	NetemParent = 0x0001_0004 // 1:4
	NetemHandle = 0x0040_0000 // 40:
	prioBands   = 4
)

// DefaultPriomap is the kernel's and tc's default prio priomap (TC_PRIO_*
// to band, 0-based). Its largest band is 2, so with 4 bands band 3 (class
// 1:4) receives only what a filter sends there; Pumba's 3-band tree puts
// netem on a band that this priomap also selects.
var DefaultPriomap = [16]uint8{1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}

// maxJitter is the largest jitter netem handles: tabledist() takes sigma
// as s32 nanoseconds (net/sched/sch_netem.c).
const maxJitter = time.Duration(math.MaxInt32)

// Spec is what a user asks for: netem on port Port towards Peers on Dev.
type Spec struct {
	Dev   string       // interface name, in the namespace the Client works in
	Peers []netip.Addr // peer addresses, IPv4 and IPv6; 4in6 is unmapped
	Port  uint16       // L4 port matched as dport (client side) or sport (server side)

	Delay             time.Duration // added one-way delay, ns resolution
	Jitter            time.Duration // sigma of the delay distribution
	JitterCorrelation float64       // percent, 0-100
	Distribution      string        // uniform, normal, pareto or paretonormal
	Loss              float64       // percent, 0-100, random loss
	LossCorrelation   float64       // percent, 0-100

	Classifier string // ClassifierBPF or ClassifierU32

	// RateBitsPerSecond sizes the netem queue limit (rate × maximum delay);
	// 0 means the device's speed, or 10 Gbit/s if it reports none.
	RateBitsPerSecond uint64
	// Limit, if not 0, overrides the computed netem queue limit (packets).
	Limit uint32
}

// MaxDelay bounds Spec.Delay. netem itself takes up to 2^63 ns, but a
// one-way delay beyond a minute no longer emulates a distant peer: TCP
// gives up and etcd elects a new leader long before (its election timeout
// is 1 s by default), and the queue sized for it (rate × delay) is huge.
const MaxDelay = time.Minute

// Validate checks s and normalises it (sorted, unique, unmapped peers;
// defaults for Port, Distribution and Classifier). Its errors are usage
// errors: nothing has been touched.
func (s *Spec) Validate() error {
	if s.Dev == "" {
		return fmt.Errorf("--dev is required (the interface the peers are reached through)")
	}
	if len(s.Peers) == 0 {
		return fmt.Errorf("at least one --peer IP is required (netem is never applied to all traffic)")
	}
	for i, p := range s.Peers {
		if !p.IsValid() {
			return fmt.Errorf("peer %d is not an IP address", i+1)
		}
		if p.Zone() != "" {
			return fmt.Errorf("peer %s: drop the zone, the classifier matches addresses only", p)
		}
		s.Peers[i] = p.Unmap()
	}
	slices.SortFunc(s.Peers, func(a, b netip.Addr) int { return a.Compare(b) })
	s.Peers = slices.Compact(s.Peers)
	if s.Port == 0 {
		s.Port = DefaultPort
	}
	if s.Distribution == "" {
		s.Distribution = DistUniform
	}
	if !slices.Contains(Distributions, s.Distribution) {
		return fmt.Errorf("--distribution %q: want one of uniform, normal, pareto, paretonormal", s.Distribution)
	}
	if s.Classifier == "" {
		s.Classifier = ClassifierBPF
	}
	if s.Classifier != ClassifierBPF && s.Classifier != ClassifierU32 {
		return fmt.Errorf("--classifier %q: want bpf or u32", s.Classifier)
	}
	if s.Delay < 0 || s.Jitter < 0 {
		return fmt.Errorf("--delay and --jitter must not be negative")
	}
	if s.Delay > MaxDelay {
		return fmt.Errorf("--delay %s exceeds %s: a peer link that slow holds every packet past TCP's retransmission timers and etcd's election timeout; give e.g. 25ms", s.Delay, MaxDelay)
	}
	if s.Jitter > maxJitter {
		return fmt.Errorf("--jitter %s exceeds netem's limit of %s (s32 nanoseconds)", s.Jitter, maxJitter)
	}
	if s.Delay == 0 && s.Loss == 0 {
		return fmt.Errorf("nothing to emulate: give --delay and/or --loss")
	}
	if s.Jitter > 0 && s.Delay == 0 {
		return fmt.Errorf("--jitter needs --delay (netem varies the delay around it)")
	}
	if s.Distribution != DistUniform && s.Jitter == 0 {
		return fmt.Errorf("--distribution %s needs --jitter (it shapes the jitter)", s.Distribution)
	}
	if s.JitterCorrelation != 0 && s.Jitter == 0 {
		return fmt.Errorf("--jitter-correlation needs --jitter")
	}
	if s.LossCorrelation != 0 && s.Loss == 0 {
		return fmt.Errorf("--loss-correlation needs --loss")
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"--jitter-correlation", s.JitterCorrelation}, {"--loss", s.Loss}, {"--loss-correlation", s.LossCorrelation}} {
		if p.v < 0 || p.v > 100 || math.IsNaN(p.v) {
			return fmt.Errorf("%s %v%% is outside 0%% to 100%%", p.name, p.v)
		}
	}
	return nil
}

// Params are the netem parameters on the kernel's own scales, as sent in
// RTM_NEWQDISC and as read back: what Verify compares.
type Params struct {
	LatencyNs int64  // TCA_NETEM_LATENCY64
	JitterNs  int64  // TCA_NETEM_JITTER64
	Limit     uint32 // tc_netem_qopt.limit, packets
	Loss      uint32 // tc_netem_qopt.loss, UINT32_MAX = 100%
	DelayCorr uint32 // tc_netem_corr.delay_corr
	LossCorr  uint32 // tc_netem_corr.loss_corr
	// DistTable is TCA_NETEM_DELAY_DIST (nil for uniform). The kernel
	// never dumps it, so it is not read back.
	DistTable []int16
}

// defaultRate is assumed when the device reports no speed (veth reports
// 10000 Mb/s, dummy and tun none).
const defaultRate = 10_000_000_000

// minLimit is netem's own default limit: never go below it.
const minLimit = 1000

// QueueLimit returns the netem queue limit in packets for traffic at
// rateBps bits/s of mtu-byte packets held for up to maxDelay: rate ×
// delay, never below netem's default of 1000. netem's 1000 packets last
// only 1.2 ms at 10 Gbit/s of 1500-byte packets, so at 25 ms it would
// tail-drop peer traffic that the user asked only to delay.
func QueueLimit(rateBps uint64, mtu int, maxDelay time.Duration) uint32 {
	if mtu <= 0 {
		mtu = 1500
	}
	pkts := math.Ceil(float64(rateBps) / 8 * maxDelay.Seconds() / float64(mtu))
	if pkts < minLimit {
		return minLimit
	}
	if pkts > math.MaxInt32 {
		return math.MaxInt32
	}
	return uint32(pkts)
}

// MaxDelay is the largest delay a packet can get under s: the table-based
// distributions reach 4 sigma (entries span ±32767/8192), uniform 1 sigma.
func (s *Spec) MaxDelay() time.Duration {
	k := time.Duration(4)
	if s.Distribution == DistUniform {
		k = 1
	}
	return s.Delay + k*s.Jitter
}

// Params converts s (validated) into kernel parameters; rateBps and mtu
// size the queue limit unless s.Limit is set.
func (s *Spec) Params(rateBps uint64, mtu int) (Params, error) {
	if s.RateBitsPerSecond != 0 {
		rateBps = s.RateBitsPerSecond
	}
	if rateBps == 0 {
		rateBps = defaultRate
	}
	dist, err := DistTable(s.Distribution)
	if err != nil {
		return Params{}, err
	}
	p := Params{
		LatencyNs: int64(s.Delay),
		JitterNs:  int64(s.Jitter),
		Limit:     s.Limit,
		Loss:      PercentToU32(s.Loss),
		DelayCorr: PercentToU32(s.JitterCorrelation),
		LossCorr:  PercentToU32(s.LossCorrelation),
		DistTable: dist,
	}
	if p.Limit == 0 {
		p.Limit = QueueLimit(rateBps, mtu, s.MaxDelay())
	}
	return p, nil
}
