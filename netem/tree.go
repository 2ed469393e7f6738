package netem

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Tree is the tc state of one device as the kernel reports it, decoded
// into the terms show prints: qdiscs (netem in ms and %) and the filters
// on the root qdisc (u32 keys as ip/ip6 matches, cls_bpf with its peers).
type Tree struct {
	Dev     string
	Ifindex uint32
	Qdiscs  []Qdisc  // every qdisc of the device, root first as dumped
	Filters []Filter // filters attached to the root qdisc
}

// Qdisc is one decoded qdisc. Prio and Netem are set for those kinds.
type Qdisc struct {
	Kind           string
	Handle, Parent uint32
	Prio           *PrioOptions
	Netem          *Params // what the kernel holds (DistTable is never dumped)
	Stats          *qdiscStats
	raw            rawObject
}

// PrioOptions is struct tc_prio_qopt.
type PrioOptions struct {
	Bands   int
	Priomap [16]uint8
}

// Filter is one classifier rule attached to the root qdisc.
type Filter struct {
	Kind     string
	Pref     uint16 // tc's "pref"/"prio"
	Protocol uint16 // ETH_P_* (host order); ETH_P_ALL for bpf
	Handle   uint32
	ClassID  uint32     // where a match goes (flowid/classid)
	U32      []U32Key   // u32: the selector's keys
	BPF      *BPFFilter // bpf: the attached program
}

// U32Key is one key of a u32 selector: the 32-bit word at Off (bytes from
// the network header) ANDed with Mask must equal Val (host order values).
type U32Key struct {
	Mask, Val uint32
	Off       int32
}

// BPFFilter describes a cls_bpf filter; Peers, Port and Matched are read
// from the program's maps when it is etcdscope's classifier.
type BPFFilter struct {
	Name         string
	ID           uint32 // BPF program id
	DirectAction bool
	Ours         bool
	Peers        []netip.Addr
	Port         uint16
	Matched      uint64 // packets sent to the netem band (counters map)
}

// Root returns the root qdisc, or nil if the device has none.
func (t *Tree) Root() *Qdisc {
	for i := range t.Qdiscs {
		if t.Qdiscs[i].Parent == tcHRoot {
			return &t.Qdiscs[i]
		}
	}
	return nil
}

// child returns the qdisc whose parent is class parent.
func (t *Tree) child(parent uint32) *Qdisc {
	for i := range t.Qdiscs {
		if t.Qdiscs[i].Parent == parent {
			return &t.Qdiscs[i]
		}
	}
	return nil
}

func decodeQdisc(o rawObject) Qdisc {
	q := Qdisc{Kind: o.Kind, Handle: o.Handle, Parent: o.Parent, Stats: o.Stats, raw: o}
	switch o.Kind {
	case "prio":
		if len(o.Options) >= 20 {
			p := &PrioOptions{Bands: int(int32(binary.NativeEndian.Uint32(o.Options)))}
			copy(p.Priomap[:], o.Options[4:20])
			q.Prio = p
		}
	case "netem":
		q.Netem = decodeNetem(o.Options)
	}
	return q
}

// decodeNetem reads struct tc_netem_qopt and the attributes after it.
// LATENCY64/JITTER64 are authoritative; the qopt fields hold ticks.
func decodeNetem(b []byte) *Params {
	const qoptLen = 24
	if len(b) < qoptLen {
		return nil
	}
	p := &Params{
		LatencyNs: int64(binary.NativeEndian.Uint32(b[0:])) << 6, // PSCHED ticks
		Limit:     binary.NativeEndian.Uint32(b[4:]),
		Loss:      binary.NativeEndian.Uint32(b[8:]),
		JitterNs:  int64(binary.NativeEndian.Uint32(b[20:])) << 6,
	}
	ad, err := netlink.NewAttributeDecoder(b[qoptLen:])
	if err != nil {
		return p
	}
	for ad.Next() {
		d := ad.Bytes()
		switch ad.Type() {
		case 1: // TCA_NETEM_CORR: delay_corr, loss_corr, dup_corr
			if len(d) >= 8 {
				p.DelayCorr = binary.NativeEndian.Uint32(d)
				p.LossCorr = binary.NativeEndian.Uint32(d[4:])
			}
		case 10: // TCA_NETEM_LATENCY64
			if len(d) >= 8 {
				p.LatencyNs = int64(binary.NativeEndian.Uint64(d))
			}
		case 11: // TCA_NETEM_JITTER64
			if len(d) >= 8 {
				p.JitterNs = int64(binary.NativeEndian.Uint64(d))
			}
		}
	}
	return p
}

func decodeFilter(o rawObject) (Filter, bool) {
	f := Filter{
		Kind:     o.Kind,
		Pref:     uint16(o.Info >> 16),
		Protocol: ntohs(uint16(o.Info)),
		Handle:   o.Handle,
	}
	ad, err := netlink.NewAttributeDecoder(o.Options)
	if err != nil || len(o.Options) == 0 {
		return f, false
	}
	rule := false
	switch o.Kind {
	case "u32":
		for ad.Next() {
			d := ad.Bytes()
			switch ad.Type() {
			case tcaU32ClassID:
				f.ClassID = ad.Uint32()
			case tcaU32Sel:
				// struct tc_u32_sel: 16-byte header (nkeys at byte 2),
				// then struct tc_u32_key {__be32 mask, val; int off, offmask}.
				if len(d) < 16 {
					continue
				}
				n := int(d[2])
				for i := 0; i < n && 16+16*(i+1) <= len(d); i++ {
					k := d[16+16*i:]
					f.U32 = append(f.U32, U32Key{
						Mask: binary.BigEndian.Uint32(k[0:]),
						Val:  binary.BigEndian.Uint32(k[4:]),
						Off:  int32(binary.NativeEndian.Uint32(k[8:])),
					})
				}
				rule = true
			}
		}
	case "bpf":
		bf := &BPFFilter{}
		for ad.Next() {
			switch ad.Type() {
			case tcaBpfClassID:
				f.ClassID = ad.Uint32()
			case tcaBpfName:
				bf.Name = ad.String()
			case tcaBpfFlags:
				bf.DirectAction = ad.Uint32()&1 != 0
			case tcaBpfID:
				bf.ID = ad.Uint32()
				rule = true
			}
		}
		f.BPF = bf
	default:
		rule = true
	}
	return f, rule
}

func ntohs(v uint16) uint16 { return v>>8 | v<<8 }

// String prints the tree as show does: one line per qdisc, netem in
// human units, then the filters on the root.
func (t *Tree) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dev %s:\n", t.Dev)
	if len(t.Qdiscs) == 0 {
		b.WriteString("  no qdisc (the device is down or has no queue)\n")
	}
	for _, q := range t.Qdiscs {
		fmt.Fprintf(&b, "  qdisc %s %s parent %s", q.Kind, handleString(q.Handle), handleString(q.Parent))
		switch {
		case q.Prio != nil:
			fmt.Fprintf(&b, " bands %d priomap", q.Prio.Bands)
			for _, v := range q.Prio.Priomap {
				fmt.Fprintf(&b, " %d", v)
			}
		case q.Netem != nil:
			b.WriteString(" " + q.Netem.String())
		}
		if s := q.Stats; s != nil {
			fmt.Fprintf(&b, " (sent %d pkts, dropped %d, backlog %d pkts)", s.Packets, s.Drops, s.Qlen)
		}
		b.WriteString("\n")
	}
	for _, f := range t.Filters {
		fmt.Fprintf(&b, "  filter %s pref %d %s -> %s\n", f.Kind, f.Pref, f.Describe(), handleString(f.ClassID))
	}
	return b.String()
}

// String prints netem parameters in tc's terms and human units.
func (p *Params) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "delay %s", FormatDuration(durationNs(p.LatencyNs)))
	if p.JitterNs != 0 {
		fmt.Fprintf(&b, " jitter %s", FormatDuration(durationNs(p.JitterNs)))
		if p.DelayCorr != 0 {
			fmt.Fprintf(&b, " (correlation %s)", FormatPercent(U32ToPercent(p.DelayCorr)))
		}
	}
	if p.Loss != 0 {
		fmt.Fprintf(&b, " loss %s", FormatPercent(U32ToPercent(p.Loss)))
		if p.LossCorr != 0 {
			fmt.Fprintf(&b, " (correlation %s)", FormatPercent(U32ToPercent(p.LossCorr)))
		}
	}
	fmt.Fprintf(&b, " limit %d pkts", p.Limit)
	return b.String()
}

// Describe prints a filter's match in iproute2's vocabulary.
func (f *Filter) Describe() string {
	switch {
	case f.BPF != nil:
		s := fmt.Sprintf("prog %s id %d", f.BPF.Name, f.BPF.ID)
		if f.BPF.Ours {
			ps := make([]string, len(f.BPF.Peers))
			for i, p := range f.BPF.Peers {
				ps[i] = p.String()
			}
			s += fmt.Sprintf(": dst in {%s} and (dport or sport) %d, tcp/udp; %d pkts matched", strings.Join(ps, ", "), f.BPF.Port, f.BPF.Matched)
		}
		return s
	case f.U32 != nil:
		return describeU32(f.Protocol, f.U32)
	}
	return "protocol " + fmt.Sprintf("0x%04x", f.Protocol)
}

// describeU32 names the keys etcdscope writes (and tc's `match ip ...`
// writes) and prints any other key raw, as tc does.
func describeU32(proto uint16, keys []U32Key) string {
	var parts []string
	var v6dst [16]byte
	v6n := 0
	for _, k := range keys {
		switch {
		case proto == unix.ETH_P_IP && k.Off == 0 && k.Mask == 0x0f000000:
			parts = append(parts, fmt.Sprintf("ip ihl %d", k.Val>>24))
		case proto == unix.ETH_P_IP && k.Off == 4 && k.Mask == 0x00001fff && k.Val == 0:
			parts = append(parts, "ip first-fragment")
		case proto == unix.ETH_P_IP && k.Off == 8 && k.Mask == 0x00ff0000:
			parts = append(parts, "ip protocol "+protoName(uint8(k.Val>>16)))
		case proto == unix.ETH_P_IP && k.Off == 16 && k.Mask == 0xffffffff:
			var a [4]byte
			binary.BigEndian.PutUint32(a[:], k.Val)
			parts = append(parts, "ip dst "+netip.AddrFrom4(a).String())
		case proto == unix.ETH_P_IPV6 && k.Off == 4 && k.Mask == 0x0000ff00:
			parts = append(parts, "ip6 nexthdr "+protoName(uint8(k.Val>>8)))
		case proto == unix.ETH_P_IPV6 && k.Off >= 24 && k.Off <= 36 && k.Mask == 0xffffffff:
			binary.BigEndian.PutUint32(v6dst[k.Off-24:], k.Val)
			if v6n++; v6n == 4 {
				parts = append(parts, "ip6 dst "+netip.AddrFrom16(v6dst).String())
			}
		case (proto == unix.ETH_P_IP && k.Off == 20) || (proto == unix.ETH_P_IPV6 && k.Off == 40):
			switch k.Mask {
			case 0x0000ffff:
				parts = append(parts, fmt.Sprintf("dport %d", k.Val))
			case 0xffff0000:
				parts = append(parts, fmt.Sprintf("sport %d", k.Val>>16))
			default:
				parts = append(parts, fmt.Sprintf("match %08x/%08x at %d", k.Val, k.Mask, k.Off))
			}
		default:
			parts = append(parts, fmt.Sprintf("match %08x/%08x at %d", k.Val, k.Mask, k.Off))
		}
	}
	return strings.Join(parts, " and ")
}

func protoName(p uint8) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	}
	return fmt.Sprint(p)
}

// Attribute numbers from include/uapi/linux/pkt_cls.h.
const (
	tcaU32ClassID = 1
	tcaU32Sel     = 5
	tcaBpfClassID = 3
	tcaBpfName    = 7
	tcaBpfFlags   = 8
	tcaBpfID      = 11
)
