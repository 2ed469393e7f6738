package netem

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// tcmsgSeed builds an RTM_NEWQDISC body: struct tcmsg, TCA_KIND and
// TCA_OPTIONS.
func tcmsgSeed(kind string, opts []byte) []byte {
	b := make([]byte, tcmsgLen)
	binary.NativeEndian.PutUint32(b[4:], 2)
	binary.NativeEndian.PutUint32(b[8:], 0x10000)
	binary.NativeEndian.PutUint32(b[12:], 0xFFFFFFFF)
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.TCA_KIND, kind)
	ae.Bytes(unix.TCA_OPTIONS, opts)
	attrs, _ := ae.Encode()
	return append(b, attrs...)
}

// FuzzDecodeTcmsg feeds the netlink decoders (tc messages as the kernel
// answers a qdisc or filter dump, then the qdisc, netem and filter
// decoders and their printers) arbitrary bytes: no panic.
func FuzzDecodeTcmsg(f *testing.F) {
	netemOpts := make([]byte, 24)
	binary.NativeEndian.PutUint32(netemOpts[4:], 1000)
	ae := netlink.NewAttributeEncoder()
	ae.Uint64(10, uint64(25*time.Millisecond))
	ae.Uint64(11, uint64(5*time.Millisecond))
	ae.Bytes(1, make([]byte, 12))
	tail, _ := ae.Encode()
	f.Add(tcmsgSeed("netem", append(netemOpts, tail...)))
	prio := make([]byte, 20)
	binary.NativeEndian.PutUint32(prio, 3)
	f.Add(tcmsgSeed("prio", prio))
	sel := make([]byte, 16+16)
	sel[2] = 1
	ae = netlink.NewAttributeEncoder()
	ae.Uint32(tcaU32ClassID, 0x10003)
	ae.Bytes(tcaU32Sel, sel)
	u32, _ := ae.Encode()
	f.Add(tcmsgSeed("u32", u32))
	ae = netlink.NewAttributeEncoder()
	ae.String(tcaBpfName, "classify")
	ae.Uint32(tcaBpfID, 7)
	bpf, _ := ae.Encode()
	f.Add(tcmsgSeed("bpf", bpf))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		o, ok, err := decodeTcmsg(in)
		if err != nil || !ok {
			return
		}
		decodeStats2(o.Options)
		q := decodeQdisc(o)
		if q.Netem != nil {
			_ = q.Netem.String()
		}
		if fl, _ := decodeFilter(o); true {
			_ = fl.Describe()
		}
		tr := &Tree{Qdiscs: []Qdisc{q}}
		_ = tr.String()
	})
}

// FuzzSpec parses arbitrary netem apply options as the command does and,
// when they validate, computes the kernel parameters and the equivalent
// tc commands (--dry-run): no panic, and what Validate accepts has
// parameters.
func FuzzSpec(f *testing.F) {
	f.Add("25ms", "5ms", "25%", "0.1%", "10%", "1gbit", "uniform", "10.0.0.2")
	f.Add("1000h", "", "", "", "", "", "normal", "fd00::2")
	f.Add("1.5ms", "2s", "100%", "100%", "0%", "100mbit", "pareto", "::ffff:10.0.0.2")
	f.Add("25", "NaN", "NaN%", "-1%", "1e309%", "-5gbit", "zipf", "x")
	f.Fuzz(func(t *testing.T, delay, jitter, jcorr, loss, lcorr, rate, dist, peer string) {
		s := Spec{Dev: "eth0", Distribution: dist}
		var err error
		if a, err := netip.ParseAddr(peer); err == nil {
			s.Peers = []netip.Addr{a}
		}
		if delay != "" {
			if s.Delay, err = ParseDuration(delay); err != nil {
				return
			}
		}
		if jitter != "" {
			if s.Jitter, err = ParseDuration(jitter); err != nil {
				return
			}
		}
		for _, pc := range []struct {
			in  string
			out *float64
		}{{jcorr, &s.JitterCorrelation}, {loss, &s.Loss}, {lcorr, &s.LossCorrelation}} {
			if pc.in != "" {
				if *pc.out, err = ParsePercent(pc.in); err != nil {
					return
				}
			}
		}
		if rate != "" {
			if s.RateBitsPerSecond, err = ParseRate(rate); err != nil {
				return
			}
		}
		if err := s.Validate(); err != nil {
			return
		}
		p, err := s.Params(0, 1500)
		if err != nil {
			t.Fatalf("Validate accepted %+v but Params failed: %v", s, err)
		}
		_ = Commands(&s, p, false)
		_ = p.String()
	})
}
