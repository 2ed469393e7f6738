//go:build vmtest

package netem

// Tests for the VM rig (vmtest/run.sh): they need sch_prio, sch_netem,
// cls_u32 and cls_bpf, which the development machine's kernel lacks. Each
// creates its own network namespaces joined by a veth pair; addresses are
// private and never leave them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// pair is two namespaces A and B joined by veth vA <-> vB.
type pair struct {
	nameA, nameB string
	a, b         netns.NsHandle
	addrA, addrB netip.Addr // IPv4
	a6, b6       netip.Addr // IPv6
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func newPair(t *testing.T) *pair {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.LookPath(t, "ip", "iproute2")
	testenv.LookPath(t, "tc", "iproute2")
	p := &pair{
		nameA: fmt.Sprintf("esA%d", time.Now().UnixNano()%1e6), nameB: fmt.Sprintf("esB%d", time.Now().UnixNano()%1e6),
		addrA: netip.MustParseAddr("10.99.0.1"), addrB: netip.MustParseAddr("10.99.0.2"),
		a6: netip.MustParseAddr("fd99::1"), b6: netip.MustParseAddr("fd99::2"),
	}
	run(t, "ip", "netns", "add", p.nameA)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", p.nameA).Run() })
	run(t, "ip", "netns", "add", p.nameB)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", p.nameB).Run() })
	run(t, "ip", "-n", p.nameA, "link", "add", "vA", "type", "veth", "peer", "name", "vB", "netns", p.nameB)
	for _, c := range [][]string{
		{p.nameA, "addr", "add", "10.99.0.1/24", "dev", "vA"},
		{p.nameA, "addr", "add", "fd99::1/64", "dev", "vA", "nodad"},
		{p.nameA, "link", "set", "vA", "up"},
		{p.nameA, "link", "set", "lo", "up"},
		{p.nameB, "addr", "add", "10.99.0.2/24", "dev", "vB"},
		{p.nameB, "addr", "add", "fd99::2/64", "dev", "vB", "nodad"},
		{p.nameB, "link", "set", "vB", "up"},
		{p.nameB, "link", "set", "lo", "up"},
	} {
		run(t, append([]string{"ip", "-n"}, c...)...)
	}
	var err error
	if p.a, err = netns.GetFromName(p.nameA); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.a.Close() })
	if p.b, err = netns.GetFromName(p.nameB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.b.Close() })
	return p
}

// inNS runs f on a thread switched into ns; sockets made there stay in ns.
func inNS(t *testing.T, ns netns.NsHandle, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		t.Fatal(err)
	}
	defer netns.Set(orig)
	f()
}

func client(t *testing.T, ns netns.NsHandle, opts Options) *Client {
	t.Helper()
	opts.NetNS = int(ns)
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	c, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// listenTCP accepts and closes connections on addr:port inside ns and
// returns how many it has accepted (a connection is accepted once the
// dialer's last handshake ACK has reached the listening end).
func listenTCP(t *testing.T, ns netns.NsHandle, addr netip.Addr, port int) *atomic.Int64 {
	t.Helper()
	var ln net.Listener
	inNS(t, ns, func() {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(addr, uint16(port)).String())
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return &accepted
}

// dialTimes returns the TCP connect durations of n dials from ns.
func dialTimes(t *testing.T, ns netns.NsHandle, to netip.AddrPort, n int) []time.Duration {
	t.Helper()
	var out []time.Duration
	inNS(t, ns, func() {
		for i := 0; i < n; i++ {
			start := time.Now()
			c, err := net.DialTimeout("tcp", to.String(), 3*time.Second)
			d := time.Since(start)
			if err != nil {
				t.Fatalf("dial %s: %v", to, err)
			}
			c.Close()
			out = append(out, d)
		}
	})
	slices.Sort(out)
	return out
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// TestVMPeerDelayBothClassifiers is issue 4 test 1: 25 ms each way on
// both sides, so a TCP connect to :2380 (SYN out, SYN-ACK back) takes
// 50 ms, and :2379 is not delayed. Two oracles read it: the test's own
// dial timing and `etcdscope peers` (checkPeersCLI).
func TestVMPeerDelayBothClassifiers(t *testing.T) {
	for _, cls := range []string{ClassifierBPF, ClassifierU32} {
		t.Run(cls, func(t *testing.T) {
			p := newPair(t)
			ca := client(t, p.a, Options{})
			cb := client(t, p.b, Options{})
			for _, side := range []struct {
				c     *Client
				dev   string
				peers []netip.Addr
			}{{ca, "vA", []netip.Addr{p.addrB, p.b6}}, {cb, "vB", []netip.Addr{p.addrA, p.a6}}} {
				res, err := side.c.Apply(Spec{Dev: side.dev, Peers: side.peers, Delay: 25 * time.Millisecond, Classifier: cls})
				if err != nil {
					t.Fatalf("apply on %s: %v", side.dev, err)
				}
				t.Logf("apply %s: %v\n%s", side.dev, res.Actions, res.Tree)
			}
			accepted := map[netip.AddrPort]*atomic.Int64{}
			for _, addr := range []netip.Addr{p.addrB, p.b6} {
				for _, port := range []uint16{2380, 2379} {
					accepted[netip.AddrPortFrom(addr, port)] = listenTCP(t, p.b, addr, int(port))
				}
				peer := dialTimes(t, p.a, netip.AddrPortFrom(addr, 2380), 7)
				client := dialTimes(t, p.a, netip.AddrPortFrom(addr, 2379), 7)
				t.Logf("%s: connect :2380 fastest %.2f ms median %.2f ms; :2379 fastest %.2f ms median %.2f ms",
					addr, ms(peer[0]), ms(peer[3]), ms(client[0]), ms(client[3]))
				// The guest's own connect (TCG, one vCPU) costs what the
				// undelayed :2379 connect shows (4-7 ms in a fresh-root run,
				// which read 55.05-55.75 ms on :2380): netem adds 50 ms on top.
				if f, own := ms(peer[0]), ms(client[0]); f < 45 || f > 55+own {
					t.Errorf("%s: fastest connect to :2380 took %.2f ms, want 50 ± 5 ms + the undelayed connect's %.2f ms", addr, f, own)
				}
				if m := ms(peer[3]); m > 70 {
					t.Errorf("%s: median connect to :2380 took %.2f ms, want under 70 ms", addr, m)
				}
				// One netem pass alone would add 25 ms: under TCG an
				// undelayed connect is fast at best and noisy at the median.
				if f, m := ms(client[0]), ms(client[3]); f > 20 || m > 25 {
					t.Errorf("%s: connect to :2379 fastest %.2f ms median %.2f ms: the client port must not be delayed", addr, f, m)
				}
			}
			checkPeersCLI(t, p, accepted)
			// iproute2 as the independent decoder.
			q := run(t, "tc", "-n", p.nameA, "-s", "qdisc", "show", "dev", "vA")
			f := run(t, "tc", "-n", p.nameA, "filter", "show", "dev", "vA")
			t.Logf("tc -s qdisc show:\n%s\ntc filter show:\n%s", q, f)
			for _, want := range []string{
				"qdisc prio 1: root", "bands 4 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1",
				"qdisc netem 40: parent 1:4", "delay 25ms",
			} {
				if !strings.Contains(q, want) {
					t.Errorf("tc qdisc show lacks %q", want)
				}
			}
			if strings.Contains(q, "loss") || strings.Contains(q, "jitter") {
				t.Errorf("tc qdisc show has loss or jitter that nobody asked for")
			}
			if cls == ClassifierU32 {
				for _, want := range []string{
					"match 0a630002/ffffffff at 16", "match 0000094c/0000ffff at 20", "match 094c0000/ffff0000 at 20",
					"match 00060000/00ff0000 at 8", "match 00110000/00ff0000 at 8",
					"match fd990000/ffffffff at 24", "match 00000002/ffffffff at 36", "match 0000094c/0000ffff at 40",
					"flowid 1:4",
				} {
					if !strings.Contains(f, want) {
						t.Errorf("tc filter show lacks %q", want)
					}
				}
				if n := strings.Count(f, "flowid 1:4"); n != 8 {
					t.Errorf("tc filter show has %d rules to 1:4, want 8 (2 protocols x 2 directions x 2 families)", n)
				}
			} else {
				for _, want := range []string{"bpf", "etcdscope_peer", "1:4"} {
					if !strings.Contains(f, want) {
						t.Errorf("tc filter show lacks %q", want)
					}
				}
				if strings.Contains(f, "direct-action") {
					t.Errorf("cls_bpf filter is direct-action; it must return a classid")
				}
			}
			for _, c := range []struct {
				c   *Client
				dev string
			}{{ca, "vA"}, {cb, "vB"}} {
				if _, err := c.c.Clear(c.dev); err != nil {
					t.Fatalf("clear %s: %v", c.dev, err)
				}
			}
			peer := dialTimes(t, p.a, netip.AddrPortFrom(p.addrB, 2380), 5)
			if m := ms(peer[2]); m > 15 {
				t.Errorf("after clear, median connect to :2380 took %.2f ms", m)
			}
		})
	}
}

// checkPeersCLI is the `etcdscope peers` half of issue 4 test 1: while
// the same 7 connects per port and address family are made again, one
// `etcdscope peers --port 2380` and one `--port 2379` trace them, and their
// JSON reports must read the 50 ms handshake on :2380 and an undelayed one
// on :2379, within the bounds of the dial timing check above.
//
// A pass of its own: on the rig's one vCPU, two tracers woken by their
// ring buffers on every connection change what the dial timing above
// measures (seen in 4 runs with the dials traced: :2380 medians 56-92 ms,
// :2379 medians up to 44 ms, 7 of 8 subtests failing the bounds above;
// untraced at the same host load: 52-63 ms and 2-8 ms), so the untraced
// pass keeps the dial oracle clean, and here the dial times only bound
// the traced handshakes from above.
func checkPeersCLI(t *testing.T, p *pair, accepted map[netip.AddrPort]*atomic.Int64) {
	tr2380 := startPeersTrace(t, 2380)
	tr2379 := startPeersTrace(t, 2379)
	// Dial once neither is busy any more with what follows its attach.
	tr2380.waitIdle(t)
	tr2379.waitIdle(t)
	// Counted after the attach: the first pass's last accepts (25 ms
	// after its dials) are in by then.
	before := map[netip.AddrPort]int64{}
	for to, n := range accepted {
		before[to] = n.Load()
	}
	fastest := map[netip.AddrPort]time.Duration{}
	for _, addr := range []netip.Addr{p.addrB, p.b6} {
		for _, port := range []uint16{2380, 2379} {
			to := netip.AddrPortFrom(addr, port)
			d := dialTimes(t, p.a, to, 7)
			fastest[to] = d[0]
			t.Logf("traced: connect %s fastest %.2f ms median %.2f ms", to, ms(d[0]), ms(d[3]))
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var short []string
		for to, n := range accepted {
			if got := n.Load() - before[to]; got < 7 {
				short = append(short, fmt.Sprintf("%s accepted %d of 7", to, got))
			}
		}
		if len(short) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5s after the traced dials: %s", strings.Join(short, ", "))
		}
	}
	rep2380, rep2379 := tr2380.stop(t), tr2379.stop(t)
	for _, ends := range []struct{ from, to netip.Addr }{{p.addrA, p.addrB}, {p.a6, p.b6}} {
		// As in the dial check: the delayed handshake may take 50 ± 5 ms
		// plus the guest's own handshake cost, which the undelayed :2379
		// dial of the same pass shows (a run at host load 5.8 read 55.21 ms
		// against a fixed 55 ms bound).
		own := ms(fastest[netip.AddrPortFrom(ends.to, 2379)])
		checkTracedHandshakes(t, rep2380, ends.from, netip.AddrPortFrom(ends.to, 2380), fastest, 45, 55+own, 70+own)
		checkTracedHandshakes(t, rep2379, ends.from, netip.AddrPortFrom(ends.to, 2379), fastest, 0, 20, 25)
	}
}

// peersTrace is a running `etcdscope peers --output json` (the static
// binary the rig puts at bin/etcdscope under the repository root).
type peersTrace struct {
	port           int
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	exited         chan struct{}
	waitErr        error
	ticksAtIdle    int64 // CPU ticks when waitIdle returned
}

// startPeersTrace runs `etcdscope peers --port PORT --duration 0 --output
// json --ready-file F` in the root namespace (its tracepoint programs see
// the sockets of every namespace) and returns once its programs are
// attached, that is once F exists.
func startPeersTrace(t *testing.T, port int) *peersTrace {
	t.Helper()
	bin := filepath.Join(testenv.RepoRoot(t), "bin", "etcdscope")
	if _, err := os.Stat(bin); err != nil {
		if testenv.Required() {
			t.Fatalf("no etcdscope binary at %s (vmtest/run.sh builds it; on a host: go build -o bin/etcdscope ./cmd/etcdscope)", bin)
		}
		t.Skipf("no etcdscope binary at %s (go build -o bin/etcdscope ./cmd/etcdscope)", bin)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	tr := &peersTrace{port: port, exited: make(chan struct{})}
	// --duration 0 traces until SIGINT: stop() sends it once the dials
	// are done, so the window is exactly the traffic under test.
	tr.cmd = exec.Command(bin, "peers", "--port", strconv.Itoa(port), "--duration", "0", "--output", "json", "--ready-file", ready)
	tr.cmd.Stdout, tr.cmd.Stderr = &tr.stdout, &tr.stderr
	start := time.Now()
	startIdle(t, tr.cmd)
	go func() { tr.waitErr = tr.cmd.Wait(); close(tr.exited) }()
	t.Cleanup(func() {
		select {
		case <-tr.exited:
		default:
			tr.cmd.Process.Kill()
			<-tr.exited
		}
	})
	for {
		if _, err := os.Stat(ready); err == nil {
			t.Logf("etcdscope peers --port %d attached in %s", port, time.Since(start).Round(time.Millisecond))
			return tr
		}
		select {
		case <-tr.exited:
			t.Fatalf("etcdscope peers --port %d exited before attaching: %v\n%s", port, tr.waitErr, tr.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("etcdscope peers --port %d did not write its --ready-file in 30 s\n%s", port, tr.stderr.String())
		}
	}
}

// startIdle starts cmd under SCHED_IDLE. On the rig's one vCPU a tracer
// woken by its ring buffer at the same softirq as the dialer (the SYN-ACK
// makes both an ESTABLISHED event and a writable socket) may run first and
// add its work to the dial: seen, dial medians of 75 and 92 ms where the
// kernel's fastest handshakes were 53 ms, and the tracers using 0.26 s of
// CPU each during 2 s of dials (0.03-0.07 s under SCHED_IDLE). A
// SCHED_IDLE task never preempts a normal one. The policy is set on this
// locked thread, inherited by the child across fork and exec (and by all
// its threads), then set back.
func startIdle(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	runtime.LockOSThread()
	if err := unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_IDLE}, 0); err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("sched_setattr SCHED_IDLE: %v", err)
	}
	startErr := cmd.Start()
	if err := unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_NORMAL}, 0); err != nil {
		// Still locked: the thread ends with this goroutine, its
		// policy with it.
		t.Fatalf("sched_setattr SCHED_NORMAL: %v", err)
	}
	runtime.UnlockOSThread()
	if startErr != nil {
		t.Fatal(startErr)
	}
	if a, err := unix.SchedGetAttr(cmd.Process.Pid, 0); err != nil || a.Policy != unix.SCHED_IDLE {
		t.Fatalf("%s runs with policy %+v (%v), want SCHED_IDLE", cmd.Path, a, err)
	}
}

// cpuTicks returns the process's user+system CPU time in clock ticks
// (/proc/PID/stat fields 14 and 15; the comm field may hold spaces, so
// count from its closing parenthesis).
func (tr *peersTrace) cpuTicks(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", tr.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("etcdscope peers --port %d: %v", tr.port, err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	var sum int64
	for _, v := range f[11:13] { // utime, stime: fields 14, 15 counted from pid
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/stat: %q: %v", tr.cmd.Process.Pid, v, err)
		}
		sum += n
	}
	return sum
}

// waitIdle returns once the tracer used no CPU tick over 200 ms (or after
// 5 s, saying so): what it does after attaching must not compete with the
// connects it is about to time.
func (tr *peersTrace) waitIdle(t *testing.T) {
	t.Helper()
	start := time.Now()
	last := tr.cpuTicks(t)
	for time.Since(start) < 5*time.Second {
		time.Sleep(200 * time.Millisecond)
		now := tr.cpuTicks(t)
		if now == last {
			t.Logf("etcdscope peers --port %d idle after %s (%d CPU ticks in all)", tr.port, time.Since(start).Round(time.Millisecond), now)
			tr.ticksAtIdle = now
			return
		}
		last = now
	}
	tr.ticksAtIdle = last
	t.Logf("etcdscope peers --port %d still busy after %s (%d CPU ticks)", tr.port, time.Since(start).Round(time.Millisecond), last)
}

// peersJSON is the part of `etcdscope peers --output json` checked here
// (analysis/etcdmetric.PeersReport).
type peersJSON struct {
	Port       int               `json:"port"`
	Events     int               `json:"events"`
	LostEvents uint64            `json:"lost_events"`
	Links      []peers.LinkStats `json:"links"`
}

// stop sends SIGINT (the tool's Ctrl-C: it drains what was traced and
// prints its report) and decodes the report.
func (tr *peersTrace) stop(t *testing.T) peersJSON {
	t.Helper()
	// The tracer's own CPU use while the traffic ran (the observer's
	// share of the one vCPU), for whoever reads a timing miss.
	t.Logf("etcdscope peers --port %d used %d CPU ticks while tracing", tr.port, tr.cpuTicks(t)-tr.ticksAtIdle)
	start := time.Now()
	if err := tr.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatalf("signalling etcdscope peers --port %d: %v", tr.port, err)
	}
	select {
	case <-tr.exited:
		t.Logf("etcdscope peers --port %d exited %s after SIGINT", tr.port, time.Since(start).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatalf("etcdscope peers --port %d did not exit 30 s after SIGINT\n%s", tr.port, tr.stderr.String())
	}
	if tr.waitErr != nil {
		t.Fatalf("etcdscope peers --port %d: %v\n%s", tr.port, tr.waitErr, tr.stderr.String())
	}
	var rep peersJSON
	if err := json.Unmarshal(tr.stdout.Bytes(), &rep); err != nil {
		t.Fatalf("etcdscope peers --port %d printed no JSON report: %v\n%s\n%s", tr.port, err, tr.stdout.String(), tr.stderr.String())
	}
	if rep.Port != tr.port {
		t.Errorf("etcdscope peers --port %d reports port %d", tr.port, rep.Port)
	}
	if rep.LostEvents != 0 {
		t.Errorf("etcdscope peers --port %d lost %d events", tr.port, rep.LostEvents)
	}
	return rep
}

// checkTracedHandshakes checks the link from -> to.Addr() in a report of
// `etcdscope peers --port to.Port()`: the 7 connects dialTimes made, each
// with a handshake RTT (SYN_SENT -> ESTABLISHED of the connecting socket);
// the fastest within [lo, hi] ms and p50 under p50Max ms, the bounds of the
// dial timing check; and the fastest no slower than the fastest dial, which
// encloses the kernel's SYN_SENT -> ESTABLISHED. The accepting end in the
// other namespace is traced too and folded into the link: its SYN-ACK RTT
// (the kernel's srtt at ESTABLISHED) must meet the same bounds.
func checkTracedHandshakes(t *testing.T, rep peersJSON, from netip.Addr, to netip.AddrPort, dialFastest map[netip.AddrPort]time.Duration, lo, hi, p50Max float64) {
	t.Helper()
	var l *peers.LinkStats
	for i := range rep.Links {
		k := rep.Links[i].Link
		if k.Direction == event.PeerActive && k.From == from && k.To == to.Addr() {
			l = &rep.Links[i]
		}
	}
	if l == nil {
		var have []string
		for _, k := range rep.Links {
			have = append(have, k.Link.String())
		}
		t.Errorf("etcdscope peers --port %d: no active link %s -> %s; links: %v", to.Port(), from, to.Addr(), have)
		return
	}
	hs, sa := l.HandshakeRTT, l.PeerSynAckRTT
	nsMs := func(v int64) float64 { return float64(v) / 1e6 }
	t.Logf("etcdscope peers --port %d: %s opened %d, handshake RTT min %.2f ms p50 %.2f ms max %.2f ms (n %d); accepting end's SYN-ACK RTT min %.2f ms p50 %.2f ms (n %d); fastest dial %.2f ms",
		to.Port(), l.Link, l.Opened, nsMs(hs.Min), nsMs(hs.P50), nsMs(hs.Max), hs.Count, nsMs(sa.Min), nsMs(sa.P50), sa.Count, ms(dialFastest[to]))
	if l.Opened != 7 || hs.Count != 7 {
		t.Errorf("%s: etcdscope peers saw %d opens and %d handshakes, want the 7 connects the test made", to, l.Opened, hs.Count)
	}
	if f := nsMs(hs.Min); f < lo || f > hi {
		t.Errorf("%s: etcdscope peers' fastest handshake RTT %.2f ms, want %g to %g ms", to, f, lo, hi)
	}
	if m := nsMs(hs.P50); m > p50Max {
		t.Errorf("%s: etcdscope peers' p50 handshake RTT %.2f ms, want under %g ms", to, m, p50Max)
	}
	if d := dialFastest[to]; time.Duration(hs.Min) > d {
		t.Errorf("%s: etcdscope peers' fastest handshake RTT %.2f ms exceeds the fastest dial %.2f ms that encloses it", to, nsMs(hs.Min), ms(d))
	}
	if sa.Count != 7 {
		t.Errorf("%s: %d SYN-ACK RTTs of the accepting end folded into the link, want 7", to, sa.Count)
	} else if f, m := nsMs(sa.Min), nsMs(sa.P50); f < lo || f > hi || m > p50Max {
		t.Errorf("%s: accepting end's SYN-ACK RTT min %.2f ms p50 %.2f ms, want min %g to %g ms and p50 under %g ms", to, f, m, lo, hi, p50Max)
	}
}

// udpProbe sends n timestamped UDP probes from ns to addr:2380, one every
// gap, and returns the round trip of each echo received (lost ones are
// missing). The echo server runs in the other namespace.
//
// It also returns the longest interval between two sends: the guest's own
// view of how late its timers fired, which is how a stall of the emulated
// machine (its host is shared) shows.
func udpProbe(t *testing.T, from netip.AddrPort, src netns.NsHandle, to netip.AddrPort, n int, gap time.Duration) ([]time.Duration, time.Duration) {
	t.Helper()
	var conn *net.UDPConn
	inNS(t, src, func() {
		var err error
		conn, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(from), net.UDPAddrFromAddrPort(to))
		if err != nil {
			t.Fatal(err)
		}
	})
	defer conn.Close()
	base := time.Now()
	got := make(chan []time.Duration)
	go func() {
		var rtts []time.Duration
		buf := make([]byte, 64)
		for {
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			k, err := conn.Read(buf)
			if err != nil {
				got <- rtts
				return
			}
			if k >= 8 {
				sent := time.Duration(binary.LittleEndian.Uint64(buf))
				rtts = append(rtts, time.Since(base)-sent)
			}
		}
	}()
	msg := make([]byte, 16)
	var longest, last time.Duration
	for i := 0; i < n; i++ {
		now := time.Since(base)
		if i > 0 && now-last > longest {
			longest = now - last
		}
		last = now
		binary.LittleEndian.PutUint64(msg, uint64(now))
		if _, err := conn.Write(msg); err != nil {
			t.Fatal(err)
		}
		time.Sleep(gap)
	}
	return <-got, longest
}

func udpEcho(t *testing.T, ns netns.NsHandle, at netip.AddrPort) {
	t.Helper()
	var pc *net.UDPConn
	inNS(t, ns, func() {
		var err error
		pc, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(at))
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			k, a, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			pc.WriteToUDPAddrPort(buf[:k], a)
		}
	}()
}

func meanSD(d []time.Duration) (mean, sd float64) {
	for _, v := range d {
		mean += ms(v)
	}
	mean /= float64(len(d))
	for _, v := range d {
		sd += (ms(v) - mean) * (ms(v) - mean)
	}
	return mean, math.Sqrt(sd / float64(len(d)-1))
}

// quantile returns the q-quantile of d in ms (d need not be sorted).
func quantile(d []time.Duration, q float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return ms(s[int(q*float64(len(s)-1)+.5)])
}

// TestVMJitterAndLossStatistics is issue 4 test 2: netem on A only, 20 ms
// with 5 ms normal jitter and 10% loss, measured over 1000 UDP probes to
// :2380. A reference run with the same 20 ms and no jitter, just before,
// measures what the emulated machine adds (netem releases packets from an
// hrtimer whose wake-up under TCG is late by a varying amount, with rare
// long outliers), so the statistics are robust ones: the median shift
// against the reference and the interquartile range (1.349 sigma).
func TestVMJitterAndLossStatistics(t *testing.T) {
	p := newPair(t)
	ca := client(t, p.a, Options{})
	const (
		n      = 1000
		delay  = 20 * time.Millisecond
		jitter = 5 * time.Millisecond
		loss   = 10.0
	)
	udpEcho(t, p.b, netip.AddrPortFrom(p.addrB, 2380))
	udpEcho(t, p.b, netip.AddrPortFrom(p.addrB, 2379))
	// A stall of the emulated machine (its host is shared) delays every
	// probe in flight and says nothing about netem. When the statistics
	// miss and the sender saw such a stall (a gap between sends over
	// stallGap), the measurement is repeated, up to 3 times; a miss
	// without a stall fails at once.
	const stallGap = 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		spec := Spec{Dev: "vA", Peers: []netip.Addr{p.addrB}, Delay: delay}
		if _, err := ca.Apply(spec); err != nil {
			t.Fatal(err)
		}
		baseline, g1 := udpProbe(t, netip.AddrPortFrom(p.addrA, 40001), p.a, netip.AddrPortFrom(p.addrB, 2379), n, time.Millisecond)
		ref, g2 := udpProbe(t, netip.AddrPortFrom(p.addrA, 40002), p.a, netip.AddrPortFrom(p.addrB, 2380), n, time.Millisecond)
		spec.Jitter, spec.Distribution, spec.Loss = jitter, DistNormal, loss
		res, err := ca.Apply(spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v\n%s", res.Actions, res.Tree)
		probes, g3 := udpProbe(t, netip.AddrPortFrom(p.addrA, 40003), p.a, netip.AddrPortFrom(p.addrB, 2380), n, time.Millisecond)
		longest := max(g1, g2, g3)
		misses := jitterLossMisses(t, baseline, ref, probes, n, delay, jitter)
		t.Logf("attempt %d: longest gap between sends %s; %d misses", attempt, longest, len(misses))
		if len(misses) == 0 {
			return
		}
		if longest < stallGap || attempt == 3 {
			for _, m := range misses {
				t.Error(m)
			}
			return
		}
		t.Logf("attempt %d: the VM stalled for %s (> %s) and the statistics missed: measuring again", attempt, longest, stallGap)
	}
}

// jitterLossMisses evaluates one measurement of TestVMJitterAndLossStatistics
// and returns what is out of bounds, in words.
func jitterLossMisses(t *testing.T, baseline, ref, probes []time.Duration, n int, delay, jitter time.Duration) []string {
	var miss []string
	bm, bsd := meanSD(baseline)
	rm, rsd := meanSD(ref)
	m, sd := meanSD(probes)
	lost := n - len(probes)
	refMed := quantile(ref, .5)
	med := quantile(probes, .5)
	iqr := quantile(probes, .75) - quantile(probes, .25)
	t.Logf("baseline :2379: %d/%d echoes, mean %.3f ms sd %.3f ms, median %.3f ms", len(baseline), n, bm, bsd, quantile(baseline, .5))
	t.Logf("reference 20ms :2380: %d/%d echoes, mean %.3f ms sd %.3f ms, median %.3f ms", len(ref), n, rm, rsd, refMed)
	t.Logf("20ms ± 5ms normal, 10%% loss :2380: %d/%d echoes (%d lost), mean %.3f ms sd %.3f ms, median %.3f ms, IQR %.3f ms (sd from IQR %.3f ms)",
		len(probes), n, lost, m, sd, med, iqr, iqr/1.349)
	if len(baseline) < n*99/100 || len(ref) < n*99/100 {
		return append(miss, fmt.Sprintf("without loss asked, %d and %d of %d probes came back: the path itself is lossy", len(baseline), len(ref), n))
	}
	if d := refMed - quantile(baseline, .5); d < ms(delay)-0.3 || d > ms(delay)+3 {
		miss = append(miss, fmt.Sprintf("reference median is %.3f ms above the baseline, want 20 ms (+ at most 3 ms of timer lateness)", d))
	}
	// Loss: binomial(1000, 0.1) has sd 9.5; allow 4 sd.
	if lost < 62 || lost > 138 {
		miss = append(miss, fmt.Sprintf("%d of %d probes lost, want 100 ± 38 (binomial, 4 sd) for 10%% loss", lost, n))
	}
	// Median of ~900 normal draws: sd 1.2533*5/sqrt(900) = 0.21 ms; 4 sd.
	if d := med - refMed; math.Abs(d) > 0.85 {
		miss = append(miss, fmt.Sprintf("median moved by %.3f ms against the reference, want 0 ± 0.85 ms (normal jitter is symmetric)", d))
	}
	// IQR of a normal is 1.349 sigma = 6.745 ms; its sd over ~900 draws is
	// about 0.23 ms; allow 4 sd.
	if want := 1.349 * ms(jitter); math.Abs(iqr-want) > 0.95 {
		miss = append(miss, fmt.Sprintf("IQR %.3f ms, want %.3f ± 0.95 ms (normal with sigma 5 ms)", iqr, want))
	}
	return miss
}

// ourPrograms counts loaded BPF programs named like our classifier.
func ourPrograms(t *testing.T) int {
	n := 0
	id := ebpf.ProgramID(0)
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			return n
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		if info, err := p.Info(); err == nil && info.Name == bpfProgName {
			n++
		}
		p.Close()
	}
}

// TestVMApplyClearCyclesAndRestore is issue 4 test 3: 100 apply/clear
// cycles leave no qdisc, filter or BPF program behind, re-apply is
// idempotent, and a tbf root made by hand comes back after clear.
func TestVMApplyClearCyclesAndRestore(t *testing.T) {
	p := newPair(t)
	ca := client(t, p.a, Options{})
	before := run(t, "tc", "-n", p.nameA, "qdisc", "show", "dev", "vA")
	progsBefore := ourPrograms(t)
	spec := func(cls string) Spec {
		return Spec{Dev: "vA", Peers: []netip.Addr{p.addrB, p.b6}, Delay: 25 * time.Millisecond,
			Jitter: time.Millisecond, Distribution: DistNormal, Loss: 0.1, Classifier: cls}
	}
	start := time.Now()
	spent := map[string]time.Duration{}
	for i := 0; i < 100; i++ {
		cls := []string{ClassifierBPF, ClassifierU32}[i%2]
		t0 := time.Now()
		if _, err := ca.Apply(spec(cls)); err != nil {
			t.Fatalf("cycle %d apply: %v", i, err)
		}
		spent[cls+" apply"] += time.Since(t0)
		if i == 0 {
			res, err := ca.Apply(spec(cls))
			if err != nil {
				t.Fatalf("re-apply: %v", err)
			}
			if len(res.Actions) != 1 || !strings.HasPrefix(res.Actions[0], "nothing") {
				t.Errorf("re-apply with the same arguments did %v, want nothing", res.Actions)
			}
			s2 := spec(cls)
			s2.Delay = 30 * time.Millisecond
			s2.Peers = s2.Peers[:1]
			res, err = ca.Apply(s2)
			if err != nil {
				t.Fatalf("apply with new arguments: %v", err)
			}
			t.Logf("in-place change: %v", res.Actions)
			if q := run(t, "tc", "-n", p.nameA, "qdisc", "show", "dev", "vA"); !strings.Contains(q, "delay 30ms") {
				t.Errorf("after in-place change tc shows:\n%s", q)
			}
		}
		t0 = time.Now()
		if _, err := ca.Clear("vA"); err != nil {
			t.Fatalf("cycle %d clear: %v", i, err)
		}
		spent[cls+" clear"] += time.Since(t0)
	}
	t.Logf("100 cycles in %s: %v", time.Since(start), spent)
	after := run(t, "tc", "-n", p.nameA, "qdisc", "show", "dev", "vA")
	if after != before {
		t.Errorf("qdiscs after 100 cycles:\n%s\nbefore:\n%s", after, before)
	}
	if f := run(t, "tc", "-n", p.nameA, "filter", "show", "dev", "vA"); strings.TrimSpace(f) != "" {
		t.Errorf("filters left behind:\n%s", f)
	}
	time.Sleep(100 * time.Millisecond) // programs are freed after an RCU grace period
	if n := ourPrograms(t); n != progsBefore {
		t.Errorf("%d %s programs loaded after 100 cycles, %d before", n, bpfProgName, progsBefore)
	}

	run(t, "tc", "-n", p.nameA, "qdisc", "add", "dev", "vA", "root", "handle", "5:", "tbf", "rate", "100mbit", "burst", "32k", "latency", "50ms")
	tbf := run(t, "tc", "-n", p.nameA, "qdisc", "show", "dev", "vA")
	_, err := ca.Apply(spec(ClassifierBPF))
	if ue := (*UsageError)(nil); err == nil || !asUsage(err, &ue) || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("apply over a tbf root without --replace: err = %v, want a usage error naming --replace", err)
	}
	if q := run(t, "tc", "-n", p.nameA, "qdisc", "show", "dev", "vA"); q != tbf {
		t.Fatalf("refused apply changed the tree:\n%s", q)
	}
	cr := client(t, p.a, Options{Replace: true, StateDir: ca.opts.StateDir})
	if _, err := cr.Apply(spec(ClassifierU32)); err != nil {
		t.Fatal(err)
	}
	res, err := cr.Clear("vA")
	if err != nil {
		t.Fatal(err)
	}
	restored := run(t, "tc", "-n", p.nameA, "qdisc", "show", "dev", "vA")
	t.Logf("restored %s\n%s", res.Restored, restored)
	if restored != tbf {
		t.Errorf("after clear:\n%s\nwant the tbf as before:\n%s", restored, tbf)
	}
}

func asUsage(err error, ue **UsageError) bool { return errors.As(err, ue) }

// TestVMHoldHelper is the child process of TestVMForClearsOnExpirySignalAndKill,
// standing in for `etcdscope netem apply --for`: it skips unless run as one.
func TestVMHoldHelper(t *testing.T) {
	name := os.Getenv("ETCDSCOPE_NETEM_HELPER_NS")
	if name == "" {
		t.Skip("only runs as the child of TestVMForClearsOnExpirySignalAndKill")
	}
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	hold, err := time.ParseDuration(os.Getenv("ETCDSCOPE_NETEM_HELPER_HOLD"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(Options{NetNS: int(h), StateDir: os.Getenv("ETCDSCOPE_NETEM_HELPER_STATE")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(Spec{Dev: "vA", Peers: []netip.Addr{netip.MustParseAddr("10.99.0.2")}, Delay: 25 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("READY")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := c.HoldAndClear(ctx, "vA", hold)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("CLEARED", res.Restored)
}

// TestVMForClearsOnExpirySignalAndKill checks --for's life cycle in a
// child process: the tree goes away on expiry, SIGTERM and SIGINT; after
// SIGKILL it stays, and a Clear from another process restores the device
// from the state file.
func TestVMForClearsOnExpirySignalAndKill(t *testing.T) {
	p := newPair(t)
	before := run(t, "tc", "-n", p.nameA, "qdisc", "show", "dev", "vA")
	for _, tc := range []struct {
		name string
		hold string
		sig  os.Signal // nil: let it expire
	}{
		{"expiry", "1s", nil},
		{"SIGTERM", "1m", syscall.SIGTERM},
		{"SIGINT", "1m", os.Interrupt},
		{"SIGKILL", "1m", os.Kill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestVMHoldHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "ETCDSCOPE_NETEM_HELPER_NS="+p.nameA,
				"ETCDSCOPE_NETEM_HELPER_HOLD="+tc.hold, "ETCDSCOPE_NETEM_HELPER_STATE="+state)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = cmd.Stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			var log []string
			for sc.Scan() {
				log = append(log, sc.Text())
				if sc.Text() == "READY" {
					break
				}
			}
			held := run(t, "tc", "-n", p.nameA, "qdisc", "show", "dev", "vA")
			if !strings.Contains(held, "netem 40:") {
				t.Errorf("while held, tc shows:\n%s\nchild said:\n%s", held, strings.Join(log, "\n"))
			}
			if tc.sig != nil {
				cmd.Process.Signal(tc.sig)
			}
			for sc.Scan() {
				log = append(log, sc.Text())
			}
			werr := cmd.Wait()
			t.Logf("child (%v):\n%s", werr, strings.Join(log, "\n"))
			after := run(t, "tc", "-n", p.nameA, "qdisc", "show", "dev", "vA")
			if tc.sig == os.Kill {
				if !strings.Contains(after, "netem 40:") {
					t.Fatalf("after SIGKILL the tree is gone already:\n%s", after)
				}
				c := client(t, p.a, Options{StateDir: state})
				res, err := c.Clear("vA")
				if err != nil || res.Nothing {
					t.Fatalf("clear after SIGKILL: %+v, %v", res, err)
				}
				after = run(t, "tc", "-n", p.nameA, "qdisc", "show", "dev", "vA")
			} else if werr != nil {
				t.Errorf("child failed: %v", werr)
			}
			if after != before {
				t.Errorf("after %s tc shows:\n%s\nwant as before:\n%s", tc.name, after, before)
			}
			if ents, _ := os.ReadDir(state); len(ents) != 0 {
				t.Errorf("state left behind: %v", ents)
			}
		})
	}
}

// TestVMShowDecodesHandMadeTree builds a tree with iproute2's tc alone and
// checks that Tree decodes it in the same terms: netem in ns and on the
// u32 scale, the filter's keys in iproute2's words.
func TestVMShowDecodesHandMadeTree(t *testing.T) {
	p := newPair(t)
	for _, c := range [][]string{
		{"qdisc", "add", "dev", "vA", "root", "handle", "1:", "prio", "bands", "4"},
		{"qdisc", "add", "dev", "vA", "parent", "1:4", "handle", "40:", "netem", "limit", "5000", "delay", "10ms", "2ms", "25%", "loss", "random", "1%", "50%"},
		{"filter", "add", "dev", "vA", "parent", "1:", "protocol", "ip", "pref", "1", "u32",
			"match", "ip", "dst", "10.99.0.2/32", "match", "ip", "dport", "2380", "0xffff", "flowid", "1:4"},
	} {
		run(t, append([]string{"tc", "-n", p.nameA}, c...)...)
	}
	c := client(t, p.a, Options{})
	tr, err := c.Tree("vA")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("decoded:\n%s\ntc says:\n%s", tr, run(t, "tc", "-n", p.nameA, "qdisc", "show", "dev", "vA"))
	nq := tr.child(NetemParent)
	if nq == nil || nq.Netem == nil {
		t.Fatalf("no netem decoded on 1:4")
	}
	want := Params{LatencyNs: 10e6, JitterNs: 2e6, Limit: 5000, Loss: PercentToU32(1), DelayCorr: PercentToU32(25), LossCorr: PercentToU32(50)}
	if !reflect.DeepEqual(*nq.Netem, want) {
		t.Errorf("netem decoded as %+v, want %+v", *nq.Netem, want)
	}
	if len(tr.Filters) != 1 || tr.Filters[0].Describe() != "ip dst 10.99.0.2 and dport 2380" || tr.Filters[0].ClassID != NetemParent {
		t.Errorf("filters decoded as %+v", tr.Filters)
	}
	// Clear without state must not touch a hand-made tree.
	res, err := c.Clear("vA")
	if err != nil || !res.Nothing || res.Hint == "" {
		t.Errorf("clear of a hand-made tree: %+v, %v; want nothing done and a hint", res, err)
	}
}
