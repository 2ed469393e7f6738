//go:build vmtest

package netem

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestVMCLINetnsBothEnds drives the built `etcdscope netem` from the
// rig's root namespace into two namespaces joined by a veth pair, with
// --netns by name on one end and by /proc/PID/ns/net-style path on the
// other: 25 ms each way makes a TCP connect to :2380 read 50 ms (the
// test's own dial timing), :2379 stays undelayed, `tc -n NAME` (the
// independent decoder) shows the tree, `netem show --netns` reads the
// same delay back, and `netem clear --netns` leaves the namespace's root
// qdisc as it was.
func TestVMCLINetnsBothEnds(t *testing.T) {
	p := newPair(t)
	bin := buildCLIVM(t)
	stateDir := t.TempDir()
	before := run(t, "tc", "-n", p.nameB, "qdisc", "show", "dev", "vB")
	for _, side := range []struct{ netns, dev, peer string }{
		{p.nameA, "vA", p.addrB.String()},
		{"/var/run/netns/" + p.nameB, "vB", p.addrA.String()},
	} {
		out, errOut, code := runCLI(t, bin, "netem", "apply", "--netns", side.netns, "--dev", side.dev, "--peer", side.peer, "--delay", "25ms", "--state-dir", stateDir)
		if code != 0 {
			t.Fatalf("apply --netns %s: exit %d\n%s%s", side.netns, code, out, errOut)
		}
		if strings.Contains(errOut, "loopback") {
			t.Errorf("apply on a veth warned about loopback: %s", errOut)
		}
	}
	if q := run(t, "tc", "-n", p.nameA, "qdisc", "show", "dev", "vA"); !strings.Contains(q, "qdisc netem 40: parent 1:4") || !strings.Contains(q, "delay 25ms") {
		t.Errorf("tc -n %s shows no netem 40: with 25ms:\n%s", p.nameA, q)
	}
	out, _, code := runCLI(t, bin, "netem", "show", "--netns", p.nameB, "--dev", "vB")
	if code != 0 || !strings.Contains(out, "25ms") {
		t.Errorf("show --netns %s: exit %d, want the 25ms netem:\n%s", p.nameB, code, out)
	}
	listenTCP(t, p.b, p.addrB, 2380)
	listenTCP(t, p.b, p.addrB, 2379)
	peer := dialTimes(t, p.a, netip.AddrPortFrom(p.addrB, 2380), 7)
	client := dialTimes(t, p.a, netip.AddrPortFrom(p.addrB, 2379), 7)
	t.Logf("connect :2380 fastest %.2f ms median %.2f ms; :2379 fastest %.2f ms median %.2f ms", ms(peer[0]), ms(peer[3]), ms(client[0]), ms(client[3]))
	// The guest's own connect costs what the undelayed :2379 one shows
	// (7.38 ms in a fresh-root run that read 55.09 ms here).
	if f, own := ms(peer[0]), ms(client[0]); f < 45 || f > 55+own {
		t.Errorf("fastest connect to :2380 took %.2f ms, want 50 ± 5 ms + the undelayed connect's %.2f ms", f, own)
	}
	if f, m := ms(client[0]), ms(client[3]); f > 20 || m > 25 {
		t.Errorf("connect to :2379 fastest %.2f ms median %.2f ms: the client port must not be delayed", f, m)
	}
	for _, side := range []struct{ netns, dev string }{{p.nameA, "vA"}, {p.nameB, "vB"}} {
		if _, errOut, code := runCLI(t, bin, "netem", "clear", "--netns", side.netns, "--dev", side.dev, "--state-dir", stateDir); code != 0 {
			t.Errorf("clear --netns %s: exit %d: %s", side.netns, code, errOut)
		}
	}
	if after := run(t, "tc", "-n", p.nameB, "qdisc", "show", "dev", "vB"); after != before {
		t.Errorf("vB after clear:\n%s\nbefore:\n%s", after, before)
	}
}

// TestVMLoopbackDelaysOneDirection proves what the loopback warning says:
// on lo inside a namespace, --peer 127.0.0.3 --delay 25ms makes a connect
// to 127.0.0.3:2380 read 25 ms, not 50 (the SYN-ACK is addressed to
// 127.0.0.1, not a peer), and apply says so on stderr.
func TestVMLoopbackDelaysOneDirection(t *testing.T) {
	p := newPair(t)
	bin := buildCLIVM(t)
	stateDir := t.TempDir()
	_, errOut, code := runCLI(t, bin, "netem", "apply", "--netns", p.nameA, "--dev", "lo", "--peer", "127.0.0.3", "--delay", "25ms", "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("apply on lo: exit %d: %s", code, errOut)
	}
	t.Cleanup(func() {
		exec.Command(bin, "netem", "clear", "--netns", p.nameA, "--dev", "lo", "--state-dir", stateDir).Run()
	})
	if !strings.Contains(errOut, "warning: lo is a loopback device") || !strings.Contains(errOut, "once, not twice") {
		t.Errorf("apply on lo gave no loopback warning; stderr: %s", errOut)
	}
	listenTCP(t, p.a, netip.MustParseAddr("127.0.0.3"), 2380)
	d := dialTimes(t, p.a, netip.MustParseAddrPort("127.0.0.3:2380"), 7)
	t.Logf("lo, --peer 127.0.0.3 --delay 25ms: connect to 127.0.0.3:2380 fastest %.2f ms median %.2f ms", ms(d[0]), ms(d[3]))
	if f := ms(d[0]); f < 22 || f > 35 {
		t.Errorf("fastest connect took %.2f ms, want 25 ms (+ under 10 ms): one direction delayed", f)
	}
}

// buildCLIVM is the rig's static etcdscope (vmtest/run.sh puts it at
// bin/etcdscope under the repository root).
func buildCLIVM(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(testenv.RepoRoot(t), "bin", "etcdscope")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no etcdscope binary at %s (vmtest/run.sh builds it; on a host: go build -o bin/etcdscope ./cmd/etcdscope)", bin)
	}
	return bin
}
