package host

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestListenerPID finds this test's own listener, over IPv4 and IPv6.
func TestListenerPID(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s: %v", addr, err)
			continue
		}
		ap := netip.MustParseAddrPort(ln.Addr().String())
		pid, err := ListenerPID(ap)
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		if pid != os.Getpid() {
			t.Errorf("%s: pid %d, want %d", ap, pid, os.Getpid())
		}
	}
	if _, err := ListenerPID(netip.MustParseAddrPort("127.0.0.1:1")); err == nil {
		t.Error("found a listener on port 1")
	}
}

// listenHelperEnv makes the test binary a listener helper (see
// TestListenerHelper): it listens on the address in the variable, prints
// "ready" and holds the socket until its stdin closes.
const listenHelperEnv = "ETCDSCOPE_TEST_LISTEN"

// TestListenerHelper is not a test: run with listenHelperEnv set, it is
// the process TestListenerPIDOtherNetns starts inside a namespace.
func TestListenerHelper(t *testing.T) {
	addr := os.Getenv(listenHelperEnv)
	if addr == "" {
		t.Skip("helper process for TestListenerPIDOtherNetns")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Stdout.WriteString("ready\n")
	io.Copy(io.Discard, os.Stdin)
}

// TestListenerPIDOtherNetns is issue 14's "member pid 0": the etcd behind
// --etcd-metrics listens in another network namespace (a container, `ip
// netns exec`). A helper process listening on an address only that
// namespace holds must be found, by its pid (`ip netns exec` execs in
// place); two namespaces listening on the same address are an error, not
// a guess.
func TestListenerPIDOtherNetns(t *testing.T) {
	testenv.RequireRoot(t)
	ip := testenv.LookPath(t, "ip", "iproute2")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const addr = "10.95.0.1:23801"
	start := func(ns string) int {
		t.Helper()
		if out, err := exec.Command(ip, "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add: %v\n%s", err, out)
		}
		t.Cleanup(func() { exec.Command(ip, "netns", "del", ns).Run() })
		for _, a := range [][]string{{"-n", ns, "link", "set", "lo", "up"}, {"-n", ns, "addr", "add", "10.95.0.1/32", "dev", "lo"}} {
			if out, err := exec.Command(ip, a...).CombinedOutput(); err != nil {
				t.Fatalf("ip %v: %v\n%s", a, err, out)
			}
		}
		cmd := exec.Command(ip, "netns", "exec", ns, self, "-test.run=^TestListenerHelper$")
		cmd.Env = append(os.Environ(), listenHelperEnv+"="+addr)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close(); cmd.Wait() })
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "ready\n" {
			t.Fatalf("helper in %s: %q %v", ns, line, err)
		}
		return cmd.Process.Pid
	}
	suffix := fmt.Sprint(os.Getpid() % 100000)
	pid := start("eslisten1-" + suffix)
	got, err := ListenerPID(netip.MustParseAddrPort(addr))
	if err != nil || got != pid {
		t.Fatalf("ListenerPID(%s) = %d, %v; want the helper's pid %d in the other namespace", addr, got, err, pid)
	}
	start("eslisten2-" + suffix)
	if got, err := ListenerPID(netip.MustParseAddrPort(addr)); err == nil || !strings.Contains(err.Error(), "2 network namespaces") {
		t.Errorf("two namespaces listening on %s: got pid %d, err %v; want an error naming both", addr, got, err)
	}
}

// hostFDs counts the processes and the fds of every process in /proc.
func hostFDs() (procs, fds int) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		f, err := os.ReadDir("/proc/" + e.Name() + "/fd")
		if err != nil {
			continue
		}
		procs++
		fds += len(f)
	}
	return procs, fds
}

// BenchmarkSocketOwners is one scan of /proc/*/fd (what
// SocketOwnerCache.Owner did inline in the peers reader, at most once a
// second) as a function of the processes and sockets on the host: this
// host as it is, then with procs x perProc more sockets held by sleeps.
func BenchmarkSocketOwners(b *testing.B) {
	for _, c := range []struct{ procs, perProc int }{{0, 0}, {50, 50}, {200, 50}, {200, 200}} {
		b.Run(fmt.Sprintf("procs=%d/sockets=%d", c.procs, c.perProc), func(b *testing.B) {
			testenv.HoldSockets(b, c.procs, c.perProc)
			procs, fds := hostFDs()
			b.ResetTimer()
			for b.Loop() {
				SocketOwners()
			}
			b.ReportMetric(float64(procs), "host_procs")
			b.ReportMetric(float64(fds), "host_fds")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/scan")
		})
	}
}
