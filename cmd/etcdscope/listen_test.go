package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/exporter"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"gopkg.in/yaml.v3"
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

// TestDaemonSetListenBothFamilies takes the arguments of both DaemonSets,
// expands $(NODE_IP) as the kubelet does (a $(VAR) reference anywhere in
// an argument is replaced by its value) with an IPv4 and an IPv6 node
// address, parses them with serve's own flag set and checks that its
// validation accepts them and that the --listen result listens (on
// loopback, port 0, so the test needs no node address). Parsing the whole
// list, defaults included, catches a flag whose zero value validation
// refuses (--commit-sample 0 did, in a hand-built serveFlags). Two
// kinds of argument name host state, and are pointed at this test's:
// --commit-comm=etcd (validation refuses two such processes) becomes
// --commit-pid of this test, and the --cacert/--cert/--key paths
// (validation reads them) a throwaway CA and pair.
func TestDaemonSetListenBothFamilies(t *testing.T) {
	ca, cert, key, err := etcdtest.ServerCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	local := map[string]string{"--commit-comm": "--commit-pid=" + strconv.Itoa(os.Getpid()), "--cacert": "--cacert=" + ca, "--cert": "--cert=" + cert, "--key": "--key=" + key}
	for _, file := range []string{"daemonset.yaml", "daemonset-netem.yaml"} {
		b, err := os.ReadFile("../../deploy/" + file)
		if err != nil {
			t.Fatal(err)
		}
		var args []string
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var m struct {
				Kind string
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct{ Args []string }
						}
					}
				}
			}
			if err := dec.Decode(&m); err != nil {
				break
			}
			if m.Kind == "DaemonSet" && len(m.Spec.Template.Spec.Containers) > 0 {
				args = m.Spec.Template.Spec.Containers[0].Args
			}
		}
		if len(args) < 2 || args[0] != "serve" {
			t.Fatalf("%s: args %q, want serve ...", file, args)
		}
		for _, ip := range []string{"127.0.0.1", "::1"} {
			var f serveFlags
			fs := f.flagSet()
			var expanded []string
			for _, a := range args[1:] {
				if name, _, ok := strings.Cut(a, "="); ok && local[name] != "" {
					a = local[name]
				}
				expanded = append(expanded, strings.ReplaceAll(a, "$(NODE_IP)", ip))
			}
			if err := fs.Parse(expanded); err != nil {
				t.Errorf("%s NODE_IP=%s: %v", file, ip, err)
				continue
			}
			if _, _, err := f.validate(); err != nil {
				t.Errorf("%s NODE_IP=%s: %q: %v", file, ip, expanded, err)
				continue
			}
			host, port, err := net.SplitHostPort(f.listen)
			if err != nil || port != strconv.Itoa(exporter.DefaultPort) {
				t.Errorf("%s NODE_IP=%s: normalized to %q (%v), want port %d", file, ip, f.listen, err, exporter.DefaultPort)
				continue
			}
			ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
			if err != nil {
				t.Errorf("%s NODE_IP=%s: listen on %s: %v", file, ip, host, err)
				continue
			}
			t.Logf("%s NODE_IP=%s: --listen -> %s, listened on %s", file, ip, f.listen, ln.Addr())
			ln.Close()
		}
	}
}
