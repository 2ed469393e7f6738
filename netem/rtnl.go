package netem

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// This file reads the tc tree raw (tcmsg + TCA_KIND + TCA_OPTIONS bytes)
// with mdlayher/netlink. go-tc decodes too, but its dump fails as a whole
// when any qdisc on any device carries an attribute it does not know, and
// `show` must decode whatever a host holds. The raw TCA_OPTIONS bytes are
// also what the state file keeps to restore a foreign root qdisc exactly.

// rawObject is one qdisc or filter as the kernel dumped it.
type rawObject struct {
	Ifindex uint32
	Handle  uint32
	Parent  uint32
	Info    uint32 // filters: prio<<16 | protocol (network order)
	Kind    string
	Options []byte // TCA_OPTIONS payload
	Stats   *qdiscStats
}

// qdiscStats is the part of TCA_STATS2 that show prints.
type qdiscStats struct {
	Bytes, Packets uint64
	Drops, Qlen    uint32
	Backlog        uint32
	Overlimits     uint32
}

const tcmsgLen = 20

func encodeTcmsg(ifindex, handle, parent, info uint32) []byte {
	b := make([]byte, tcmsgLen)
	b[0] = unix.AF_UNSPEC
	binary.NativeEndian.PutUint32(b[4:], ifindex)
	binary.NativeEndian.PutUint32(b[8:], handle)
	binary.NativeEndian.PutUint32(b[12:], parent)
	binary.NativeEndian.PutUint32(b[16:], info)
	return b
}

// dump sends an RTM_GET* dump request and decodes the replies that
// belong to ifindex (0: every device).
func dump(c *netlink.Conn, typ netlink.HeaderType, ifindex, parent uint32) ([]rawObject, error) {
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: typ, Flags: netlink.Request | netlink.Dump},
		Data:   encodeTcmsg(ifindex, 0, parent, 0),
	})
	if err != nil {
		return nil, err
	}
	var out []rawObject
	for _, m := range msgs {
		o, ok, err := decodeTcmsg(m.Data)
		if err != nil {
			return nil, err
		}
		if !ok || (ifindex != 0 && o.Ifindex != ifindex) {
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

// decodeTcmsg decodes one RTM_NEWQDISC/RTM_NEWTFILTER message body: struct
// tcmsg and its attributes. ok is false for a body shorter than tcmsg.
func decodeTcmsg(data []byte) (o rawObject, ok bool, err error) {
	if len(data) < tcmsgLen {
		return o, false, nil
	}
	o = rawObject{
		Ifindex: binary.NativeEndian.Uint32(data[4:]),
		Handle:  binary.NativeEndian.Uint32(data[8:]),
		Parent:  binary.NativeEndian.Uint32(data[12:]),
		Info:    binary.NativeEndian.Uint32(data[16:]),
	}
	ad, err := netlink.NewAttributeDecoder(data[tcmsgLen:])
	if err != nil {
		return o, false, fmt.Errorf("decoding tc message: %w", err)
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.TCA_KIND:
			o.Kind = ad.String()
		case unix.TCA_OPTIONS:
			o.Options = append([]byte(nil), ad.Bytes()...)
		case unix.TCA_STATS2:
			o.Stats = decodeStats2(ad.Bytes())
		}
	}
	if err := ad.Err(); err != nil {
		return o, false, fmt.Errorf("decoding tc message: %w", err)
	}
	return o, true, nil
}

func decodeStats2(b []byte) *qdiscStats {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil
	}
	s := &qdiscStats{}
	for ad.Next() {
		d := ad.Bytes()
		switch ad.Type() {
		case tcaStatsBasic: // struct gnet_stats_basic {u64 bytes; u32 packets}
			if len(d) >= 12 {
				s.Bytes = binary.NativeEndian.Uint64(d)
				s.Packets = uint64(binary.NativeEndian.Uint32(d[8:]))
			}
		case tcaStatsQueue: // struct gnet_stats_queue {qlen, backlog, drops, requeues, overlimits}
			if len(d) >= 20 {
				s.Qlen = binary.NativeEndian.Uint32(d)
				s.Backlog = binary.NativeEndian.Uint32(d[4:])
				s.Drops = binary.NativeEndian.Uint32(d[8:])
				s.Overlimits = binary.NativeEndian.Uint32(d[16:])
			}
		}
	}
	return s
}

// dumpQdiscs returns the qdiscs of ifindex (0: all devices).
func dumpQdiscs(c *netlink.Conn, ifindex uint32) ([]rawObject, error) {
	q, err := dump(c, unix.RTM_GETQDISC, ifindex, 0)
	if err != nil {
		return nil, fmt.Errorf("dumping qdiscs: %w", err)
	}
	return q, nil
}

// dumpFilters returns the filters attached to qdisc parent on ifindex.
func dumpFilters(c *netlink.Conn, ifindex, parent uint32) ([]rawObject, error) {
	f, err := dump(c, unix.RTM_GETTFILTER, ifindex, parent)
	if err != nil {
		return nil, fmt.Errorf("dumping filters of %s: %w", handleString(parent), err)
	}
	return f, nil
}

// replaceRootRaw puts back a root qdisc from its dumped kind and options
// (RTM_NEWQDISC, NLM_F_CREATE|NLM_F_REPLACE): how clear restores a root
// qdisc that was there before apply.
func replaceRootRaw(c *netlink.Conn, ifindex uint32, o rawObject) error {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.TCA_KIND, o.Kind)
	if len(o.Options) > 0 {
		ae.Bytes(unix.TCA_OPTIONS, o.Options)
	}
	attrs, err := ae.Encode()
	if err != nil {
		return err
	}
	_, err = c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_NEWQDISC, Flags: netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Replace},
		Data:   append(encodeTcmsg(ifindex, o.Handle, tcHRoot, 0), attrs...),
	})
	if err != nil {
		return fmt.Errorf("restoring root qdisc %s %s: %w", o.Kind, handleString(o.Handle), err)
	}
	return nil
}

// deleteRoot deletes the root qdisc of ifindex; the kernel then attaches
// the device's default (noqueue, mq or pfifo_fast) again.
func deleteRoot(c *netlink.Conn, ifindex uint32) error {
	_, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_DELQDISC, Flags: netlink.Request | netlink.Acknowledge},
		Data:   encodeTcmsg(ifindex, 0, tcHRoot, 0),
	})
	if err != nil {
		return fmt.Errorf("deleting root qdisc: %w", err)
	}
	return nil
}

// handleString prints a tc handle the way tc does ("1:", "1:4", "root").
func handleString(h uint32) string {
	switch h {
	case tcHRoot:
		return "root"
	case tcHIngress:
		return "ingress"
	}
	maj, min := h>>16, h&0xffff
	if min == 0 {
		return fmt.Sprintf("%x:", maj)
	}
	return fmt.Sprintf("%x:%x", maj, min)
}

// Constants from include/uapi/linux/{gen_stats,pkt_sched}.h that
// x/sys/unix does not carry.
const (
	tcaStatsBasic = 1
	tcaStatsQueue = 3
	tcHRoot       = 0xFFFFFFFF
	tcHIngress    = 0xFFFFFFF1
)
