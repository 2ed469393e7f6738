package netem

import (
	"encoding/binary"
	"fmt"
	"strings"

	tc "github.com/florianl/go-tc"
	"golang.org/x/sys/unix"
)

// u32Rule is one u32 filter etcdscope installs: its EtherType, selector
// keys (as the kernel reports them back) and tc's words for them.
type u32Rule struct {
	Proto uint16 // ETH_P_IP or ETH_P_IPV6
	Keys  []U32Key
	Match string // iproute2 `match ...` words
}

// u32 filter prefs: tc needs one protocol per pref.
const (
	u32PrefIPv4 = 1
	u32PrefIPv6 = 2
)

// u32Rules returns the filters for s: per peer, per L4 protocol (TCP and
// UDP), one rule for dport = port (we are the client) and one for sport =
// port (we are the server). IPv4 rules also require a 20-byte header
// (ihl 5) and a first fragment, so that the port offset is exact; IPv6
// rules require TCP/UDP as the first next header.
func u32Rules(s *Spec) []u32Rule {
	var out []u32Rule
	for _, peer := range s.Peers {
		for _, proto := range []uint8{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
			for _, dir := range []string{"dport", "sport"} {
				portKey := U32Key{Mask: 0x0000ffff, Val: uint32(s.Port)}
				if dir == "sport" {
					portKey = U32Key{Mask: 0xffff0000, Val: uint32(s.Port) << 16}
				}
				if peer.Is4() {
					a := peer.As4()
					portKey.Off = 20
					out = append(out, u32Rule{
						Proto: unix.ETH_P_IP,
						Keys: []U32Key{
							{Mask: 0x0f000000, Val: 5 << 24, Off: 0},
							{Mask: 0x00001fff, Val: 0, Off: 4},
							{Mask: 0x00ff0000, Val: uint32(proto) << 16, Off: 8},
							{Mask: 0xffffffff, Val: binary.BigEndian.Uint32(a[:]), Off: 16},
							portKey,
						},
						Match: fmt.Sprintf("match ip ihl 5 0xf match u16 0 0x1fff at 6 match ip protocol %d 0xff match ip dst %s/32 match ip %s %d 0xffff",
							proto, peer, dir, s.Port),
					})
					continue
				}
				a := peer.As16()
				portKey.Off = 40
				keys := []U32Key{{Mask: 0x0000ff00, Val: uint32(proto) << 8, Off: 4}}
				for i := 0; i < 4; i++ {
					keys = append(keys, U32Key{Mask: 0xffffffff, Val: binary.BigEndian.Uint32(a[4*i:]), Off: int32(24 + 4*i)})
				}
				keys = append(keys, portKey)
				out = append(out, u32Rule{
					Proto: unix.ETH_P_IPV6,
					Keys:  keys,
					Match: fmt.Sprintf("match ip6 protocol %d 0xff match ip6 dst %s/128 match ip6 %s %d 0xffff", proto, peer, dir, s.Port),
				})
			}
		}
	}
	return out
}

func u32Pref(proto uint16) uint32 {
	if proto == unix.ETH_P_IPV6 {
		return u32PrefIPv6
	}
	return u32PrefIPv4
}

// object builds the RTM_NEWTFILTER for r. tc_u32_key's mask and val are
// __be32, and go-tc writes the struct in native order, so they are given
// pre-swapped.
func (r u32Rule) object(ifindex uint32) *tc.Object {
	keys := make([]tc.U32Key, len(r.Keys))
	for i, k := range r.Keys {
		keys[i] = tc.U32Key{Mask: toBE(k.Mask), Val: toBE(k.Val), Off: uint32(k.Off)}
	}
	classid := uint32(NetemParent)
	return &tc.Object{
		Msg: tc.Msg{
			Family:  unix.AF_UNSPEC,
			Ifindex: ifindex,
			Parent:  PrioHandle,
			Info:    u32Pref(r.Proto)<<16 | uint32(htons(r.Proto)),
		},
		Attribute: tc.Attribute{Kind: "u32", U32: &tc.U32{
			ClassID: &classid,
			Sel:     &tc.U32Sel{Flags: 1 /* TC_U32_TERMINAL */, NKeys: uint8(len(keys)), Keys: keys},
		}},
	}
}

// toBE returns the native-order integer whose bytes are v in big endian.
func toBE(v uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return binary.NativeEndian.Uint32(b[:])
}

// ruleKey is a comparable form of a rule for verification.
func ruleKey(proto uint16, keys []U32Key) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%04x", proto)
	for _, k := range keys {
		fmt.Fprintf(&b, " %08x/%08x@%d", k.Val, k.Mask, k.Off)
	}
	return b.String()
}
