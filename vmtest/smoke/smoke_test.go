//go:build vmtest

package smoke

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// inVM skips unless the rig's /init started the test: it exports the
// kernel it booted, which these tests check against.
func inVM(t *testing.T) (release, version string) {
	t.Helper()
	release, version = os.Getenv("VMTEST_KERNEL_RELEASE"), os.Getenv("VMTEST_KERNEL_VERSION")
	if release == "" || version == "" {
		t.Skip("only inside the VM rig (make vmtest): VMTEST_KERNEL_RELEASE/VERSION unset")
	}
	testenv.RequireRoot(t)
	return release, version
}

// TestKernelIsDebian checks the guest runs the kernel package run.sh
// resolved: uname's release and the Debian version in /proc/version.
func TestKernelIsDebian(t *testing.T) {
	release, version := inVM(t)
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	if got := unix.ByteSliceToString(u.Release[:]); got != release {
		t.Errorf("uname -r = %q, want %q", got, release)
	}
	pv, err := os.ReadFile("/proc/version")
	if err != nil {
		t.Fatal(err)
	}
	// Debian's kernels end /proc/version with "Debian <package version>".
	if !strings.Contains(string(pv), "Debian "+version) {
		t.Errorf("/proc/version = %q, want it to name Debian %s", pv, version)
	}
	t.Logf("kernel: %s", strings.TrimSpace(string(pv)))
}

// TestModulesLoaded checks /proc/modules lists what the netem tests need.
func TestModulesLoaded(t *testing.T) {
	inVM(t)
	b, err := os.ReadFile("/proc/modules")
	if err != nil {
		t.Fatal(err)
	}
	var loaded []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			loaded = append(loaded, f[0])
		}
	}
	for _, m := range []string{"sch_netem", "sch_prio", "cls_u32", "cls_bpf", "veth"} {
		if !slices.Contains(loaded, m) {
			t.Errorf("module %s not in /proc/modules (loaded: %v)", m, loaded)
		}
	}
}

// tcShow runs `tc -s qdisc show dev lo` and returns its output.
func tcShow(t *testing.T, tc string) string {
	t.Helper()
	out, err := exec.Command(tc, "-s", "qdisc", "show", "dev", "lo").CombinedOutput()
	if err != nil {
		t.Fatalf("tc -s qdisc show dev lo: %v\n%s", err, out)
	}
	return string(out)
}

// netemLine matches the root netem qdisc as iproute2 prints it, and the
// packet counter of its statistics line.
var (
	netemLine = regexp.MustCompile(`qdisc netem [0-9a-f]+: root refcnt \d+ limit \d+ delay 10ms`)
	sentPkts  = regexp.MustCompile(`Sent \d+ bytes (\d+) pkt`)
)

// connectTimes returns how long each of n TCP connects to addr took.
func connectTimes(t *testing.T, addr string, n int) []time.Duration {
	t.Helper()
	var d []time.Duration
	for range n {
		start := time.Now()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		d = append(d, time.Since(start))
		c.Close()
	}
	slices.Sort(d)
	return d
}

// TestNetemRoundTrip applies netem delay 10ms on lo with iproute2's tc,
// reads it back with `tc -s qdisc show`, and checks TCP connects over lo
// slow down by the two delayed packets of the handshake (SYN, SYN-ACK).
func TestNetemRoundTrip(t *testing.T) {
	inVM(t)
	tc := testenv.LookPath(t, "tc", "iproute2")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	before := connectTimes(t, addr, 5)

	if out, err := exec.Command(tc, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "10ms").CombinedOutput(); err != nil {
		t.Fatalf("tc qdisc add dev lo root netem delay 10ms: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(tc, "qdisc", "del", "dev", "lo", "root").CombinedOutput(); err != nil {
			t.Errorf("tc qdisc del dev lo root: %v\n%s", err, out)
		}
		if s := tcShow(t, tc); strings.Contains(s, "netem") {
			t.Errorf("netem still on lo after del:\n%s", s)
		}
	})
	shown := tcShow(t, tc)
	if !netemLine.MatchString(shown) {
		t.Fatalf("tc -s qdisc show dev lo does not show netem delay 10ms at root:\n%s", shown)
	}
	pkts0 := sentPackets(t, shown)

	const dials = 10
	after := connectTimes(t, addr, dials)
	shown = tcShow(t, tc)
	pkts1 := sentPackets(t, shown)
	t.Logf("connect over lo: fastest %v median %v without netem; fastest %v median %v with delay 10ms; netem sent %d pkt",
		before[0], before[len(before)/2], after[0], after[len(after)/2], pkts1-pkts0)
	t.Logf("tc -s qdisc show dev lo:\n%s", shown)

	// Every connect waits for its SYN and SYN-ACK, each held 10 ms.
	if after[0] < 20*time.Millisecond {
		t.Errorf("fastest connect with netem delay 10ms on lo took %v, want >= 20ms", after[0])
	}
	// TCG is slow, but not 40 ms per handshake slow.
	if med := after[len(after)/2]; med > 60*time.Millisecond {
		t.Errorf("median connect with netem delay 10ms on lo took %v, want < 60ms", med)
	}
	// Each connect sends at least SYN and SYN-ACK through the qdisc.
	if got := pkts1 - pkts0; got < 2*dials {
		t.Errorf("netem counted %d packets over %d connects, want >= %d", got, dials, 2*dials)
	}
}

func sentPackets(t *testing.T, show string) int {
	t.Helper()
	m := sentPkts.FindStringSubmatch(show)
	if m == nil {
		t.Fatalf("no \"Sent N bytes M pkt\" in:\n%s", show)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBPFTracepoint loads a tracepoint program written in cilium/ebpf's asm
// (no clang, no bpf2go) on syscalls/sys_enter_getppid that counts this
// process's calls in an array map, attaches it, makes a known number of
// getppid calls and reads the count back: it must match exactly.
func TestBPFTracepoint(t *testing.T) {
	inVM(t)
	// /init mounts tracefs; cilium/ebpf reads the tracepoint's id there.
	// (Not host.Tracefs: the rig's smoke test stays independent of the
	// packages it exists to test.)
	if _, err := os.Stat("/sys/kernel/tracing/events/syscalls/sys_enter_getppid/id"); err != nil {
		t.Fatalf("tracefs not mounted by /init: %v", err)
	}

	counts, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatalf("creating array map: %v", err)
	}
	defer counts.Close()

	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:    "count_getppid",
		Type:    ebpf.TracePoint,
		License: "GPL",
		Instructions: asm.Instructions{
			// Only this process: tgid is the upper half of pid_tgid.
			asm.FnGetCurrentPidTgid.Call(),
			asm.RSh.Imm(asm.R0, 32),
			asm.JNE.Imm(asm.R0, int32(os.Getpid()), "exit"),
			// counts[0] += 1
			asm.StoreImm(asm.RFP, -4, 0, asm.Word),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -4),
			asm.LoadMapPtr(asm.R1, counts.FD()),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "exit"),
			asm.Mov.Imm(asm.R1, 1),
			asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatalf("loading tracepoint program: %v", err)
	}
	defer prog.Close()

	l, err := link.Tracepoint("syscalls", "sys_enter_getppid", prog, nil)
	if err != nil {
		t.Fatalf("attaching to syscalls/sys_enter_getppid: %v", err)
	}
	const calls = 1000
	for range calls {
		unix.Getppid()
	}
	// Detach before reading so no later call is counted.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var got uint64
	if err := counts.Lookup(uint32(0), &got); err != nil {
		t.Fatal(err)
	}
	if got != calls {
		t.Errorf("tracepoint counted %d getppid calls, made %d", got, calls)
	}
	t.Logf("sys_enter_getppid fired %d times for %d getppid calls", got, calls)
}

// TestFio runs fio (dynamically linked on the host; the rig copies the
// libraries ldd names) on tmpfs and checks its JSON report counts the
// writes and fdatasyncs the job asked for: proof the guest's fio works.
func TestFio(t *testing.T) {
	inVM(t)
	fio := testenv.LookPath(t, "fio", "fio")
	const size, bs = 1 << 20, 4096
	out, err := exec.Command(fio, "--name=smoke", "--filename="+t.TempDir()+"/fio.dat",
		"--rw=write", "--bs="+strconv.Itoa(bs), "--size="+strconv.Itoa(size),
		"--ioengine=psync", "--fdatasync=1", "--output-format=json").Output()
	if err != nil {
		t.Fatalf("fio: %v\n%s", err, out)
	}
	var report struct {
		Jobs []struct {
			Write struct {
				IOBytes  int64 `json:"io_bytes"`
				TotalIOs int64 `json:"total_ios"`
			} `json:"write"`
			// fio 3.33 leaves sync.total_ios at 0 and counts the
			// fdatasyncs it timed in lat_ns.N.
			Sync struct {
				LatNs struct {
					N int64 `json:"N"`
				} `json:"lat_ns"`
			} `json:"sync"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("decoding fio JSON: %v\n%s", err, out)
	}
	if len(report.Jobs) != 1 {
		t.Fatalf("fio reported %d jobs, want 1", len(report.Jobs))
	}
	j := report.Jobs[0]
	if j.Write.IOBytes != size || j.Write.TotalIOs != size/bs {
		t.Errorf("fio wrote %d bytes in %d ios, want %d in %d", j.Write.IOBytes, j.Write.TotalIOs, size, size/bs)
	}
	// One fdatasync per write; fio 3.33 times all but the last.
	if j.Sync.LatNs.N < size/bs-1 {
		t.Errorf("fio timed %d fdatasyncs, want >= %d (one per write)", j.Sync.LatNs.N, size/bs-1)
	}
	t.Logf("fio: %d bytes in %d writes, %d fdatasyncs timed", j.Write.IOBytes, j.Write.TotalIOs, j.Sync.LatNs.N)
}

// TestNetnsVeth builds what the netem tests stand on: a named network
// namespace (iproute2 keeps it under /var/run/netns) joined to the root
// namespace by a veth pair, and pings across it.
func TestNetnsVeth(t *testing.T) {
	inVM(t)
	ipCmd := testenv.LookPath(t, "ip", "iproute2")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(ipCmd, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	const ns = "vmtest-smoke"
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command(ipCmd, "netns", "del", ns).Run() })
	run("link", "add", "vsmoke0", "type", "veth", "peer", "name", "vsmoke1", "netns", ns)
	t.Cleanup(func() { _ = exec.Command(ipCmd, "link", "del", "vsmoke0").Run() })
	run("addr", "add", "10.99.0.1/24", "dev", "vsmoke0")
	run("link", "set", "vsmoke0", "up")
	run("-n", ns, "addr", "add", "10.99.0.2/24", "dev", "vsmoke1")
	run("-n", ns, "link", "set", "vsmoke1", "up")
	run("-n", ns, "link", "set", "lo", "up")
	// ping from inside the namespace: proves setns through `ip netns exec`.
	out := run("netns", "exec", ns, "ping", "-c", "3", "-W", "2", "10.99.0.1")
	if !strings.Contains(out, "3 packets received") {
		t.Errorf("ping across veth from %s lost packets:\n%s", ns, out)
	}
	t.Logf("%s", out)
}
