package main

import (
	"errors"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/exporter"
	"github.com/etcdscope/etcdscope/tracer"
)

func TestNormalizeListen(t *testing.T) {
	def := strconv.Itoa(exporter.DefaultPort)
	for _, c := range []struct{ in, want string }{
		{"127.0.0.1:10380", "127.0.0.1:10380"},
		{"[127.0.0.1]:10380", "127.0.0.1:10380"},
		{"[fd00::1]:10380", "[fd00::1]:10380"},
		{"fd00::1", "[fd00::1]:" + def},
		{"[fd00::1]", "[fd00::1]:" + def},
		{"10.0.0.1", "10.0.0.1:" + def},
		{"localhost:0", "localhost:0"},
	} {
		h, p, err := normalizeListen(c.in)
		if err != nil || net.JoinHostPort(h, p) != c.want {
			t.Errorf("normalizeListen(%q) = %q, %q, %v; want %s", c.in, h, p, err, c.want)
		}
	}
	for _, in := range []string{"", "fd00::1::x:1", "host", "fe80::1%eth0"} {
		_, _, err := normalizeListen(in)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "[IPv6]:port") {
			t.Errorf("normalizeListen(%q): %v, want a usage error naming [IPv6]:port", in, err)
		}
	}
}

// TestDaemonSetListenBothFamilies takes the --listen argument of
// deploy/daemonset.yaml, expands $(NODE_IP) as the kubelet does (a
// $(VAR) reference anywhere in an argument is replaced by its value) with
// an IPv4 and an IPv6 node address, and checks that serve's flag
// validation accepts it and that the result listens (on loopback, port 0,
// so the test needs no node address).
func TestDaemonSetListenBothFamilies(t *testing.T) {
	b, err := os.ReadFile("../../deploy/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`- (--listen=\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no --listen argument in deploy/daemonset.yaml")
	}
	arg := strings.TrimPrefix(string(m[1]), "--listen=")
	for _, ip := range []string{"127.0.0.1", "::1"} {
		expanded := strings.ReplaceAll(arg, "$(NODE_IP)", ip)
		f := serveFlags{listen: expanded, public: true, port: tracer.DefaultPeerPort,
			compareWindow: exporter.DefaultCompareWindow, ringBytes: tracer.DefaultRingBytes}
		if _, _, err := f.validate(); err != nil {
			t.Errorf("NODE_IP=%s: --listen=%s: %v", ip, expanded, err)
			continue
		}
		host, port, err := net.SplitHostPort(f.listen)
		if err != nil || port != strconv.Itoa(exporter.DefaultPort) {
			t.Errorf("NODE_IP=%s: normalized to %q (%v), want port %d", ip, f.listen, err, exporter.DefaultPort)
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Errorf("NODE_IP=%s: listen on %s: %v", ip, host, err)
			continue
		}
		t.Logf("NODE_IP=%s: --listen=%s -> %s, listened on %s", ip, expanded, f.listen, ln.Addr())
		ln.Close()
	}
}
