package netem

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 -type peer_key classifier ../bpf/classifier.bpf.c

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	tc "github.com/florianl/go-tc"
	"golang.org/x/sys/unix"
)

// bpfProgName is the program's name as the kernel keeps it (and as the
// filter's TCA_BPF_NAME): how show and clear recognise our classifier.
const bpfProgName = "etcdscope_peer"

// bpfFilterHandle and bpfFilterPref place our single cls_bpf filter.
const (
	bpfFilterHandle = 1
	bpfFilterPref   = 1
)

// parsedClassifier parses the embedded ELF once; loads work on copies.
var parsedClassifier = sync.OnceValues(loadClassifier)

// classifierSpec returns a copy of the parsed classifier, safe to modify.
func classifierSpec() (*ebpf.CollectionSpec, error) {
	spec, err := parsedClassifier()
	if err != nil {
		return nil, err
	}
	return spec.Copy(), nil
}

// peerKey converts an address into the map key: IPv4 is IPv4-mapped.
func peerKey(a netip.Addr) classifierPeerKey {
	return classifierPeerKey{Addr: a.As16()}
}

// loadClassifierProg loads bpf/classifier.bpf.c with port set and the
// peers in its map. The caller closes the returned objects once the
// filter holds its own reference.
func loadClassifierProg(port uint16, peers []netip.Addr) (*classifierObjects, error) {
	spec, err := classifierSpec()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables[classifierVarPort].Set(port); err != nil {
		return nil, fmt.Errorf("setting port: %w", err)
	}
	var objs classifierObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("loading classifier: verifier: %v", ve)
		}
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("loading classifier: %w (needs root or CAP_BPF+CAP_NET_ADMIN)", err)
		}
		return nil, fmt.Errorf("loading classifier: %w", err)
	}
	if err := syncPeers(objs.Peers, peers); err != nil {
		objs.Close()
		return nil, err
	}
	return &objs, nil
}

// syncPeers makes the peers map hold exactly want.
func syncPeers(m *ebpf.Map, want []netip.Addr) error {
	have, err := readPeers(m)
	if err != nil {
		return err
	}
	for _, a := range have {
		if !slices.Contains(want, a) {
			k := peerKey(a)
			if err := m.Delete(&k); err != nil {
				return fmt.Errorf("removing peer %s: %w", a, err)
			}
		}
	}
	one := uint8(1)
	for _, a := range want {
		k := peerKey(a)
		if err := m.Update(&k, &one, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("adding peer %s: %w", a, err)
		}
	}
	return nil
}

// readPeers lists the peers map, sorted, IPv4 unmapped.
func readPeers(m *ebpf.Map) ([]netip.Addr, error) {
	var (
		k   classifierPeerKey
		v   uint8
		out []netip.Addr
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		out = append(out, netip.AddrFrom16(k.Addr).Unmap())
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading peers map: %w", err)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out, nil
}

// attachedClassifier opens the maps of an attached etcdscope classifier
// by program id (no pinning needed: the filter keeps them alive).
type attachedClassifier struct {
	prog            *ebpf.Program
	peers, counters *ebpf.Map
	rodata          *ebpf.Map
}

func openAttached(id uint32) (*attachedClassifier, error) {
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return nil, fmt.Errorf("opening BPF program %d: %w", id, err)
	}
	a := &attachedClassifier{prog: prog}
	info, err := prog.Info()
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("reading BPF program %d: %w", id, err)
	}
	ids, _ := info.MapIDs()
	for _, mid := range ids {
		m, err := ebpf.NewMapFromID(mid)
		if err != nil {
			continue
		}
		mi, err := m.Info()
		if err != nil {
			m.Close()
			continue
		}
		switch {
		case mi.Name == "peers" && a.peers == nil:
			a.peers = m
		case mi.Name == "counters" && a.counters == nil:
			a.counters = m
		case mi.Type == ebpf.Array && a.rodata == nil && strings.HasSuffix(mi.Name, ".rodata"):
			a.rodata = m // the const volatile globals (port)
		default:
			m.Close()
		}
	}
	if a.peers == nil {
		a.Close()
		return nil, fmt.Errorf("BPF program %d has no peers map: not etcdscope's classifier", id)
	}
	return a, nil
}

// port reads the const volatile port from the program's .rodata.
func (a *attachedClassifier) port() (uint16, error) {
	if a.rodata == nil {
		return 0, fmt.Errorf("classifier has no .rodata map")
	}
	spec, err := classifierSpec()
	if err != nil {
		return 0, err
	}
	v := spec.Variables[classifierVarPort]
	buf := make([]byte, a.rodata.ValueSize())
	if err := a.rodata.Lookup(uint32(0), &buf); err != nil {
		return 0, fmt.Errorf("reading classifier .rodata: %w", err)
	}
	off := v.Offset
	if int(off)+2 > len(buf) {
		return 0, fmt.Errorf("classifier .rodata too short")
	}
	return binary.NativeEndian.Uint16(buf[off:]), nil
}

// matched sums the per-CPU COUNTER_MATCHED.
func (a *attachedClassifier) matched() uint64 {
	if a.counters == nil {
		return 0
	}
	var per []uint64
	if err := a.counters.Lookup(uint32(0), &per); err != nil {
		return 0
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

func (a *attachedClassifier) Close() {
	for _, m := range []*ebpf.Map{a.peers, a.counters, a.rodata} {
		if m != nil {
			m.Close()
		}
	}
	if a.prog != nil {
		a.prog.Close()
	}
}

// bpfFilterObject is our cls_bpf filter: not direct-action, so the
// program's -1 means "classid 1:4" and 0 means no match.
func bpfFilterObject(ifindex uint32, fd int) *tc.Object {
	ufd := uint32(fd)
	name := bpfProgName
	classid := uint32(NetemParent)
	return &tc.Object{
		Msg: tc.Msg{
			Family:  unix.AF_UNSPEC,
			Ifindex: ifindex,
			Handle:  bpfFilterHandle,
			Parent:  PrioHandle,
			Info:    bpfFilterPref<<16 | uint32(htons(unix.ETH_P_ALL)),
		},
		Attribute: tc.Attribute{Kind: "bpf", BPF: &tc.Bpf{FD: &ufd, Name: &name, ClassID: &classid}},
	}
}

func htons(v uint16) uint16 { return v>>8 | v<<8 }
