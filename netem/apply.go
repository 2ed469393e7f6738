package netem

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	tc "github.com/florianl/go-tc"
	"github.com/mdlayher/netlink"
	vnl "github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Options configure a Client.
type Options struct {
	// NetNS is an fd of the network namespace to work in; 0 is the
	// caller's own. Tests use it to work inside namespaces they create.
	NetNS int
	// StateDir holds the state files; "" is DefaultStateDir.
	StateDir string
	// Replace allows apply to replace a root qdisc etcdscope did not make
	// (it is saved and restored by clear).
	Replace bool
	// SkipProbe skips the feature probe (the tree is known to work here).
	SkipProbe bool
}

// Client changes and reads the tc tree of devices in one namespace.
type Client struct {
	opts  Options
	raw   *netlink.Conn
	tc    *tc.Tc
	links *vnl.Handle
	ino   uint64
}

// Open connects to rtnetlink in opts.NetNS. Close releases it.
func Open(opts Options) (*Client, error) {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	c := &Client{opts: opts}
	var err error
	if c.raw, err = netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: opts.NetNS}); err != nil {
		if opts.NetNS != 0 && errors.Is(err, unix.EPERM) {
			// The socket is made inside the namespace through setns(2).
			return nil, usagef("--netns needs root or CAP_SYS_ADMIN (entering another network namespace) besides CAP_NET_ADMIN; nothing was changed")
		}
		return nil, fmt.Errorf("opening rtnetlink: %w", err)
	}
	if c.tc, err = tc.Open(&tc.Config{NetNS: opts.NetNS}); err != nil {
		c.Close()
		return nil, fmt.Errorf("opening rtnetlink: %w", err)
	}
	if opts.NetNS != 0 {
		c.links, err = vnl.NewHandleAt(netns.NsHandle(opts.NetNS), unix.NETLINK_ROUTE)
	} else {
		c.links, err = vnl.NewHandle(unix.NETLINK_ROUTE)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("opening rtnetlink: %w", err)
	}
	var st unix.Stat_t
	if opts.NetNS != 0 {
		err = unix.Fstat(opts.NetNS, &st)
	} else {
		err = unix.Stat("/proc/self/ns/net", &st)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("identifying network namespace: %w", err)
	}
	c.ino = st.Ino
	return c, nil
}

// Close releases the netlink sockets; it may be called more than once.
func (c *Client) Close() error {
	if c.raw != nil {
		c.raw.Close()
		c.raw = nil
	}
	if c.tc != nil {
		c.tc.Close()
		c.tc = nil
	}
	if c.links != nil {
		c.links.Close()
		c.links = nil
	}
	return nil
}

// link resolves dev to its ifindex and MTU.
func (c *Client) link(dev string) (uint32, int, error) {
	l, err := c.links.LinkByName(dev)
	if err != nil {
		return 0, 0, c.noDevice(dev)
	}
	return uint32(l.Attrs().Index), l.Attrs().MTU, nil
}

// noDevice is the usage error for a device name that is not in the
// client's namespace.
func (c *Client) noDevice(dev string) error {
	if c.opts.NetNS != 0 {
		return usagef("no network device %q in that network namespace (see `ip -n NAME link show`)", dev)
	}
	return usagef("no network device %q here (see `ip link show`, or pass --netns for another network namespace)", dev)
}

// isLoopback reports whether dev carries IFF_LOOPBACK.
func (c *Client) isLoopback(dev string) bool {
	l, err := c.links.LinkByName(dev)
	return err == nil && l.Attrs().Flags&net.FlagLoopback != 0
}

// linkSpeed returns the device speed in bits/s from sysfs, 0 if unknown
// (sysfs shows the caller's namespace, so only then).
func (c *Client) linkSpeed(dev string) uint64 {
	if c.opts.NetNS != 0 {
		return 0
	}
	b, err := os.ReadFile("/sys/class/net/" + dev + "/speed")
	if err != nil {
		return 0
	}
	mbit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || mbit <= 0 {
		return 0
	}
	return uint64(mbit) * 1_000_000
}

// Tree reads and decodes the tc tree of dev.
func (c *Client) Tree(dev string) (*Tree, error) {
	ifindex, _, err := c.link(dev)
	if err != nil {
		return nil, err
	}
	return c.tree(dev, ifindex)
}

func (c *Client) tree(dev string, ifindex uint32) (*Tree, error) {
	qs, err := dumpQdiscs(c.raw, ifindex)
	if err != nil {
		return nil, err
	}
	t := &Tree{Dev: dev, Ifindex: ifindex}
	for _, o := range qs {
		t.Qdiscs = append(t.Qdiscs, decodeQdisc(o))
	}
	root := t.Root()
	if root == nil || root.Handle == 0 || root.Kind == "noqueue" {
		return t, nil
	}
	fs, err := dumpFilters(c.raw, ifindex, root.Handle)
	if err != nil {
		return nil, err
	}
	for _, o := range fs {
		f, ok := decodeFilter(o)
		if !ok {
			continue
		}
		if f.BPF != nil && f.BPF.ID != 0 && f.BPF.Name == bpfProgName {
			if a, err := openAttached(f.BPF.ID); err == nil {
				f.BPF.Ours = true
				f.BPF.Peers, _ = readPeers(a.peers)
				f.BPF.Port, _ = a.port()
				f.BPF.Matched = a.matched()
				a.Close()
			}
		}
		t.Filters = append(t.Filters, f)
	}
	return t, nil
}

// Show returns the trees of dev, or of every device when dev is "".
func (c *Client) Show(dev string) ([]*Tree, error) {
	if dev != "" {
		t, err := c.Tree(dev)
		if err != nil {
			return nil, err
		}
		return []*Tree{t}, nil
	}
	links, err := c.links.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing devices: %w", err)
	}
	var out []*Tree
	for _, l := range links {
		t, err := c.tree(l.Attrs().Name, uint32(l.Attrs().Index))
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Result reports what Apply did.
type Result struct {
	Tree    *Tree    // the tree read back after apply
	Params  Params   // what was asked, on the kernel's scales
	Actions []string // what changed ("nothing" for an identical re-apply)
	// Warnings are things the tree does that the caller may not expect,
	// e.g. LoopbackWarning; the CLI prints them on stderr.
	Warnings []string
}

// LoopbackWarning explains what a tree on a loopback device delays. On a
// veth or a NIC each end's qdisc sees only what that end sends, so applying
// on both ends delays both directions. On lo both directions leave through
// the one qdisc, and the classifier (destination is a peer and port is
// --port) takes only the packets addressed to a peer: the peer's answers,
// addressed to the local address, are not delayed, so a round trip gets
// the delay once, not twice.
func LoopbackWarning(s Spec) string {
	to := "the peer"
	if len(s.Peers) > 0 {
		to = netip.AddrPortFrom(s.Peers[0], s.Port).String()
	}
	return fmt.Sprintf("%s is a loopback device: a round trip gets %s once, not twice (only packets to a --peer wait; a connect to %s reads ~%s): use a veth pair (--netns on each end), or --delay %s",
		s.Dev, FormatDuration(s.Delay), to, FormatDuration(s.Delay), FormatDuration(2*s.Delay))
}

// classfulKinds are qdiscs with classes (and usually filters and child
// qdiscs) that a saved TCA_OPTIONS alone cannot bring back.
var classfulKinds = map[string]bool{
	"htb": true, "hfsc": true, "prio": true, "drr": true, "qfq": true, "cbq": true,
	"ets": true, "mqprio": true, "taprio": true, "multiq": true, "atm": true, "dsmark": true,
}

// isOurs reports whether t is the tree st describes.
func isOurs(t *Tree, st *State, ifindex uint32) bool {
	if st == nil || st.Ifindex != ifindex {
		return false
	}
	root := t.Root()
	return root != nil && root.Kind == "prio" && root.Handle == PrioHandle
}

// isDefaultRoot reports whether the device's root qdisc is the one the
// kernel attaches by itself (handle 0: noqueue, mq, pfifo_fast, or the
// default_qdisc sysctl's choice), with no user-made children.
func isDefaultRoot(t *Tree) bool {
	root := t.Root()
	if root == nil {
		return true
	}
	if root.Handle != 0 {
		return false
	}
	for _, q := range t.Qdiscs {
		if q.Parent != tcHRoot && q.Parent != tcHIngress && q.Handle != 0 && q.Parent>>16 == 0 {
			return false // a user qdisc under a default mq
		}
	}
	return true
}

// Apply makes dev hold the tree for s: probe (unless skipped), then build
// it, or change it in place if it is already ours; then read it back and
// fail if the kernel holds anything other than what was asked. State is
// written before the first change so that Clear can always restore.
//
// On a loopback device the result carries LoopbackWarning.
func (c *Client) Apply(s Spec) (*Result, error) {
	res, err := c.apply(s)
	if err == nil && c.isLoopback(s.Dev) {
		res.Warnings = append(res.Warnings, LoopbackWarning(s))
	}
	return res, err
}

func (c *Client) apply(s Spec) (*Result, error) {
	if err := s.Validate(); err != nil {
		return nil, &UsageError{Msg: err.Error()}
	}
	ifindex, mtu, err := c.link(s.Dev)
	if err != nil {
		return nil, err
	}
	p, err := s.Params(c.linkSpeed(s.Dev), mtu)
	if err != nil {
		return nil, &UsageError{Msg: err.Error()}
	}
	t, err := c.tree(s.Dev, ifindex)
	if err != nil {
		return nil, err
	}
	path := statePath(c.opts.StateDir, c.ino, s.Dev)
	st, err := readState(path)
	if err != nil {
		return nil, err
	}
	if isOurs(t, st, ifindex) {
		return c.update(s, p, t, st, path)
	}
	root := t.Root()
	var saved *SavedQdisc
	if !isDefaultRoot(t) {
		if !c.opts.Replace {
			return nil, usagef("%s has root qdisc %s %s that etcdscope did not make; pass --replace to save it and have clear restore it", s.Dev, root.Kind, handleString(root.Handle))
		}
		if classfulKinds[root.Kind] {
			return nil, usagef("%s has a classful root %s %s; etcdscope restores a single root qdisc but not its classes and filters, so it will not replace it: remove it yourself (tc qdisc del dev %s root) and apply again", s.Dev, root.Kind, handleString(root.Handle), s.Dev)
		}
		for _, q := range t.Qdiscs {
			if q.Parent != tcHRoot && q.Parent != tcHIngress && q.Handle != 0 {
				return nil, usagef("%s has a classful root %s %s with child qdisc %s %s; etcdscope restores only a single root qdisc, remove the children first", s.Dev, root.Kind, handleString(root.Handle), q.Kind, handleString(q.Handle))
			}
		}
		saved = &SavedQdisc{Kind: root.Kind, Handle: root.Handle, Options: root.raw.Options}
	}
	if !c.opts.SkipProbe {
		if err := Probe(s.Classifier); err != nil {
			return nil, err
		}
	}
	st = &State{Version: stateVersion, Dev: s.Dev, Ifindex: ifindex, NetnsIno: c.ino, Spec: s, AppliedAt: time.Now().UTC(), Original: saved}
	if err := writeState(path, st); err != nil {
		return nil, err
	}
	res, err := c.build(s, p, ifindex, saved != nil)
	if err == nil {
		err = c.verify(s, p, res)
	}
	if err != nil {
		if _, cerr := c.Clear(s.Dev); cerr != nil {
			return nil, fmt.Errorf("%w (and rolling back failed: %v; run `etcdscope netem clear --dev %s`)", err, cerr, s.Dev)
		}
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			// The kernel has no such qdisc or classifier (the probe could
			// not tell without CAP_SYS_ADMIN); the host is as before.
			return nil, usagef("this kernel refused the tree (%v): modprobe sch_netem, sch_prio and cls_%s, or boot a kernel with CONFIG_NET_SCH_NETEM, _PRIO and CONFIG_NET_CLS_%s; %s is as before",
				err, s.Classifier, strings.ToUpper(s.Classifier), s.Dev)
		}
		return nil, fmt.Errorf("%w (rolled back: %s is as before)", err, s.Dev)
	}
	return res, nil
}

// build creates the tree from scratch.
func (c *Client) build(s Spec, p Params, ifindex uint32, replace bool) (*Result, error) {
	res := &Result{Params: p}
	prio := prioObject(ifindex)
	var err error
	if replace {
		err = c.tc.Qdisc().Replace(prio)
	} else {
		err = c.tc.Qdisc().Add(prio)
	}
	if err != nil {
		return nil, fmt.Errorf("adding root prio qdisc: %w", err)
	}
	res.Actions = append(res.Actions, "root prio 1: bands 4")
	if err := c.tc.Qdisc().Add(netemObject(ifindex, NetemParent, p, NetemHandle)); err != nil {
		return nil, fmt.Errorf("adding netem on 1:4: %w", err)
	}
	res.Actions = append(res.Actions, "netem 40: on 1:4: "+p.String())
	if err := c.addFilters(&s, ifindex); err != nil {
		return nil, err
	}
	res.Actions = append(res.Actions, fmt.Sprintf("%s classifier: %d peer(s), port %d", s.Classifier, len(s.Peers), s.Port))
	return res, nil
}

func (c *Client) addFilters(s *Spec, ifindex uint32) error {
	if s.Classifier == ClassifierU32 {
		for _, r := range u32Rules(s) {
			if err := c.tc.Filter().Add(r.object(ifindex)); err != nil {
				return fmt.Errorf("adding u32 filter %q: %w", r.Match, err)
			}
		}
		return nil
	}
	objs, err := loadClassifierProg(s.Port, s.Peers)
	if err != nil {
		return err
	}
	defer objs.Close() // the filter holds its own reference
	if err := c.tc.Filter().Add(bpfFilterObject(ifindex, objs.EtcdscopePeer.FD())); err != nil {
		return fmt.Errorf("attaching cls_bpf filter: %w", err)
	}
	return nil
}

// deleteFilters removes every filter on the root prio 1: (RTM_DELTFILTER
// with no pref and no handle deletes the whole chain).
func (c *Client) deleteFilters(ifindex uint32) error {
	_, err := c.raw.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_DELTFILTER, Flags: netlink.Request | netlink.Acknowledge},
		Data:   encodeTcmsg(ifindex, 0, PrioHandle, 0),
	})
	if err != nil {
		return fmt.Errorf("deleting filters on 1:: %w", err)
	}
	return nil
}

// update changes an existing tree of ours in place: netem through
// RTM_NEWQDISC without NLM_F_CREATE (a new distribution needs a new netem,
// as the kernel keeps an old table when none is sent), peers through the
// BPF map, anything else by replacing the filters.
func (c *Client) update(s Spec, p Params, t *Tree, st *State, path string) (*Result, error) {
	res := &Result{Params: p}
	ifindex := t.Ifindex
	old := st.Spec
	nq := t.child(NetemParent)
	switch {
	case nq == nil || nq.Kind != "netem" || nq.Handle != NetemHandle:
		if nq != nil {
			return nil, fmt.Errorf("class 1:4 holds %s %s, not etcdscope's netem: run clear first", nq.Kind, handleString(nq.Handle))
		}
		if err := c.tc.Qdisc().Add(netemObject(ifindex, NetemParent, p, NetemHandle)); err != nil {
			return nil, fmt.Errorf("adding netem on 1:4: %w", err)
		}
		res.Actions = append(res.Actions, "netem 40: re-added: "+p.String())
	case old.Distribution != s.Distribution:
		del := netemObject(ifindex, NetemParent, p, NetemHandle)
		if err := c.tc.Qdisc().Delete(del); err != nil {
			return nil, fmt.Errorf("deleting netem for a new distribution: %w", err)
		}
		if err := c.tc.Qdisc().Add(netemObject(ifindex, NetemParent, p, NetemHandle)); err != nil {
			return nil, fmt.Errorf("adding netem on 1:4: %w", err)
		}
		res.Actions = append(res.Actions, "netem 40: rebuilt for distribution "+s.Distribution)
	case !sameParams(nq.Netem, p):
		if err := c.tc.Qdisc().Change(netemObject(ifindex, NetemParent, p, NetemHandle)); err != nil {
			return nil, fmt.Errorf("changing netem: %w", err)
		}
		res.Actions = append(res.Actions, "netem 40: changed to "+p.String())
	}
	sameFilters := old.Classifier == s.Classifier && old.Port == s.Port && slices.Equal(old.Peers, s.Peers)
	if !sameFilters {
		if s.Classifier == ClassifierBPF && old.Classifier == ClassifierBPF && old.Port == s.Port {
			if err := c.updatePeers(t, s.Peers); err != nil {
				return nil, err
			}
			res.Actions = append(res.Actions, fmt.Sprintf("peers map updated: %d peer(s)", len(s.Peers)))
		} else {
			if err := c.deleteFilters(ifindex); err != nil {
				return nil, err
			}
			if err := c.addFilters(&s, ifindex); err != nil {
				return nil, err
			}
			res.Actions = append(res.Actions, fmt.Sprintf("%s classifier rebuilt: %d peer(s), port %d", s.Classifier, len(s.Peers), s.Port))
		}
	}
	st.Spec = s
	st.AppliedAt = time.Now().UTC()
	if err := writeState(path, st); err != nil {
		return nil, err
	}
	if len(res.Actions) == 0 {
		res.Actions = []string{"nothing: the tree already holds these arguments"}
	}
	if err := c.verify(s, p, res); err != nil {
		return nil, err
	}
	return res, nil
}

func (c *Client) updatePeers(t *Tree, peers []netip.Addr) error {
	for _, f := range t.Filters {
		if f.BPF != nil && f.BPF.Ours {
			a, err := openAttached(f.BPF.ID)
			if err != nil {
				return err
			}
			defer a.Close()
			return syncPeers(a.peers, peers)
		}
	}
	return fmt.Errorf("no etcdscope cls_bpf filter on 1: to update: run clear first")
}

func sameParams(have *Params, want Params) bool {
	return have != nil && have.LatencyNs == want.LatencyNs && have.JitterNs == want.JitterNs &&
		have.Limit == want.Limit && have.Loss == want.Loss &&
		have.DelayCorr == want.DelayCorr && have.LossCorr == want.LossCorr
}

// verify reads the tree back into res and compares it with s and p.
func (c *Client) verify(s Spec, p Params, res *Result) error {
	ifindex, _, err := c.link(s.Dev)
	if err != nil {
		return err
	}
	t, err := c.tree(s.Dev, ifindex)
	if err != nil {
		return err
	}
	res.Tree = t
	if diffs := Diff(t, &s, p); len(diffs) > 0 {
		return fmt.Errorf("the kernel holds a different tree than asked: %s", strings.Join(diffs, "; "))
	}
	return nil
}

// Diff compares a tree read from the kernel with what s and p ask for
// and lists every difference in words (empty: identical). The delay
// distribution table is not compared: the kernel never dumps it.
func Diff(t *Tree, s *Spec, p Params) []string {
	var d []string
	root := t.Root()
	if root == nil || root.Kind != "prio" || root.Handle != PrioHandle || root.Prio == nil {
		return []string{"root is not prio 1:"}
	}
	if root.Prio.Bands != prioBands || root.Prio.Priomap != DefaultPriomap {
		d = append(d, fmt.Sprintf("prio has %d bands priomap %v, want %d bands priomap %v", root.Prio.Bands, root.Prio.Priomap, prioBands, DefaultPriomap))
	}
	nq := t.child(NetemParent)
	switch {
	case nq == nil || nq.Kind != "netem" || nq.Netem == nil:
		d = append(d, "no netem on 1:4")
	case !sameParams(nq.Netem, p):
		d = append(d, fmt.Sprintf("netem holds %s, want %s (raw: loss %d want %d, delay_corr %d want %d, loss_corr %d want %d)",
			nq.Netem, &p, nq.Netem.Loss, p.Loss, nq.Netem.DelayCorr, p.DelayCorr, nq.Netem.LossCorr, p.LossCorr))
	}
	switch s.Classifier {
	case ClassifierU32:
		want := map[string]bool{}
		for _, r := range u32Rules(s) {
			want[ruleKey(r.Proto, r.Keys)] = true
		}
		got := map[string]bool{}
		for _, f := range t.Filters {
			if f.Kind != "u32" || f.ClassID != NetemParent {
				d = append(d, fmt.Sprintf("unexpected filter %s pref %d -> %s", f.Kind, f.Pref, handleString(f.ClassID)))
				continue
			}
			k := ruleKey(f.Protocol, f.U32)
			if !want[k] {
				d = append(d, "unexpected u32 filter: "+f.Describe())
			}
			got[k] = true
		}
		for _, r := range u32Rules(s) {
			if !got[ruleKey(r.Proto, r.Keys)] {
				d = append(d, "missing u32 filter: "+r.Match)
			}
		}
	default:
		n := 0
		for _, f := range t.Filters {
			if f.BPF == nil || !f.BPF.Ours || f.ClassID != NetemParent || f.BPF.DirectAction {
				d = append(d, fmt.Sprintf("unexpected filter %s pref %d: %s", f.Kind, f.Pref, f.Describe()))
				continue
			}
			n++
			if f.BPF.Port != s.Port {
				d = append(d, fmt.Sprintf("classifier port %d, want %d", f.BPF.Port, s.Port))
			}
			if !slices.Equal(f.BPF.Peers, s.Peers) {
				d = append(d, fmt.Sprintf("classifier peers %v, want %v", f.BPF.Peers, s.Peers))
			}
		}
		if n != 1 {
			d = append(d, fmt.Sprintf("%d etcdscope cls_bpf filters on 1:, want 1", n))
		}
	}
	return d
}

// ClearResult reports what Clear did.
type ClearResult struct {
	Restored string // "kernel default" or the restored root, e.g. "tbf 8001:"
	Nothing  bool   // no state: nothing was done
	Hint     string // with Nothing: what to do about a tree that looks like ours
}

// Clear removes etcdscope's tree from dev and restores what apply found:
// the saved root qdisc, or the kernel default. It works from the state
// file alone, so it also cleans up after an apply that was SIGKILLed.
func (c *Client) Clear(dev string) (*ClearResult, error) {
	ifindex, _, err := c.link(dev)
	if err != nil {
		return nil, err
	}
	path := statePath(c.opts.StateDir, c.ino, dev)
	st, err := readState(path)
	if err != nil {
		return nil, err
	}
	t, err := c.tree(dev, ifindex)
	if err != nil {
		return nil, err
	}
	if st == nil {
		res := &ClearResult{Nothing: true}
		if root := t.Root(); root != nil && root.Kind == "prio" && root.Handle == PrioHandle {
			if nq := t.child(NetemParent); nq != nil && nq.Kind == "netem" {
				// Without state we cannot know what to restore; a tree
				// shaped like ours may also be hand-made. Say how to remove it.
				res.Hint = fmt.Sprintf("%s has prio 1: with netem on 1:4 but no etcdscope state in %s; if it is etcdscope's, remove it with `tc qdisc del dev %s root`", dev, c.opts.StateDir, dev)
			}
		}
		return res, nil
	}
	root := t.Root()
	ours := root != nil && root.Kind == "prio" && root.Handle == PrioHandle
	res := &ClearResult{Restored: "kernel default"}
	switch {
	case st.Original != nil:
		// Replacing our root with the saved one is one atomic step.
		o := rawObject{Kind: st.Original.Kind, Handle: st.Original.Handle, Options: st.Original.Options}
		if err := replaceRootRaw(c.raw, ifindex, o); err != nil {
			return nil, err
		}
		res.Restored = st.Original.Kind + " " + handleString(st.Original.Handle)
	case ours:
		if err := deleteRoot(c.raw, ifindex); err != nil {
			return nil, err
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing state: %w", err)
	}
	removeEmptyDefaultDirs(c.opts.StateDir)
	return res, nil
}

// removeEmptyDefaultDirs removes DefaultStateDir and its parent
// (/run/etcdscope), which apply made, once the last state file is gone:
// nothing of etcdscope's stays on the host after clear. Only those, and
// only when empty (rmdir fails otherwise, and on a pod's hostPath mount
// point): a --state-dir the operator named is theirs and stays.
func removeEmptyDefaultDirs(dir string) {
	if filepath.Clean(dir) != DefaultStateDir {
		return
	}
	if os.Remove(DefaultStateDir) == nil {
		os.Remove(filepath.Dir(DefaultStateDir))
	}
}

// HoldAndClear is apply's --for: it waits until hold has passed or ctx
// is done (the CLI cancels it on SIGINT and SIGTERM), then clears dev.
// After a SIGKILL nothing runs here; the state file lets a later Clear
// restore the device all the same.
func (c *Client) HoldAndClear(ctx context.Context, dev string, hold time.Duration) (*ClearResult, error) {
	timer := time.NewTimer(hold)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	return c.Clear(dev)
}

func prioObject(ifindex uint32) *tc.Object {
	return &tc.Object{
		Msg:       tc.Msg{Family: unix.AF_UNSPEC, Ifindex: ifindex, Handle: PrioHandle, Parent: tcHRoot},
		Attribute: tc.Attribute{Kind: "prio", Prio: &tc.Prio{Bands: prioBands, PrioMap: DefaultPriomap}},
	}
}

// netemObject encodes p: LATENCY64/JITTER64 carry the nanoseconds (the
// qopt fields get PSCHED ticks, ns>>6, for old readers; the kernel takes
// the 64-bit attributes when present), CORR the correlations, DELAY_DIST
// the table.
func netemObject(ifindex, parent uint32, p Params, handle uint32) *tc.Object {
	lat, jit := p.LatencyNs, p.JitterNs
	n := &tc.Netem{
		Qopt: tc.NetemQopt{
			Latency: ticks(lat),
			Limit:   p.Limit,
			Loss:    p.Loss,
			Jitter:  ticks(jit),
		},
		Corr:      &tc.NetemCorr{Delay: p.DelayCorr, Loss: p.LossCorr},
		Latency64: &lat,
		Jitter64:  &jit,
	}
	if p.DistTable != nil {
		dist := p.DistTable
		n.DelayDist = &dist
	}
	return &tc.Object{
		Msg:       tc.Msg{Family: unix.AF_UNSPEC, Ifindex: ifindex, Handle: handle, Parent: parent},
		Attribute: tc.Attribute{Kind: "netem", Netem: n},
	}
}

func ticks(ns int64) uint32 {
	t := ns >> 6
	if t > 0xffffffff {
		return 0xffffffff
	}
	return uint32(t)
}

func mustAddrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}
