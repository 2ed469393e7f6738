package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/tracer"
)

// TestPeersBadInput: bad flags exit 2 before anything is loaded (no root
// needed: validation runs first).
func TestPeersBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"--port", "0"},
		{"--port", "65536"},
		{"--port", "-1"},
		{"--peer", "etcd-1"},
		{"--peer", "10.0.0.1/24"},
		{"--peer", "10.0.0.300"},
		{"--peer", "fe80::1%eth0"},
		{"--duration", "-5s"},
		{"--duration", "soon"},
		{"--output", "xml"},
		{"--cert", "c.pem"},
		{"--cacert", "ca.pem"},
		{"--etcd-metrics", "127.0.0.1:2381/metrics"},
		{"--etcd-metrics", "ftp://127.0.0.1/metrics"},
		{"--etcd-metrics", "http://127.0.0.1:2381/metrics", "--cacert", "/nonexistent/ca.pem"},
		{"--etcd-endpoints", "127.0.0.1:2379"},
		{"--record", "/nonexistent/dir/events.jsonl"},
		{"extra-arg"},
	} {
		if rc := run(append([]string{"peers"}, args...)); rc != 2 {
			t.Errorf("peers %v: exit %d, want 2", args, rc)
		}
	}
	if rc := run([]string{"peers", "--help"}); rc != 0 {
		t.Errorf("--help: exit %d", rc)
	}
}

// TestPeersFlagsIPv6: IPv6 peers parse, bracketed or not, and IPv4-mapped
// ones become IPv4 (the kernel side keys them so).
func TestPeersFlagsIPv6(t *testing.T) {
	f := peersFlags{port: 2380, output: "table", ringBytes: tracer.DefaultPeerRingBytes, peerArgs: []string{"fd00::2", "[2001:db8::7]", "::ffff:10.0.0.3", "10.0.0.4"}}
	cfg, _, err := f.validate()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range cfg.Peers {
		got = append(got, p.String())
	}
	if want := "fd00::2 2001:db8::7 10.0.0.3 10.0.0.4"; strings.Join(got, " ") != want {
		t.Errorf("peers %v, want %s", got, want)
	}
}

// TestPeersMetricsErrors: an unreachable, a non-etcd and a wrong-CA
// metrics URL each give a clear error, and the tracing part still comes
// out (a connection made during the run is in it).
func TestPeersMetricsErrors(t *testing.T) {
	testenv.RequireRoot(t)
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html><body>hello</body></html>\n")
	}))
	defer html.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "etcd_server_has_leader 1\n")
	}))
	defer tlsSrv.Close()
	otherCA := filepath.Join(t.TempDir(), "other-ca.pem")
	writeSelfSignedCA(t, otherCA)

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unreachable", []string{"--etcd-metrics", "http://127.0.0.1:1/metrics"}, "connection refused"},
		{"not etcd", []string{"--etcd-metrics", html.URL + "/metrics"}, "not etcd metrics"},
		{"wrong CA", []string{"--etcd-metrics", tlsSrv.URL + "/metrics", "--cacert", otherCA}, "not signed by --cacert"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					conn, err := ln.Accept()
					if err != nil {
						return
					}
					conn.Close()
				}
			}()
			port := ln.Addr().(*net.TCPAddr).Port
			ready := filepath.Join(t.TempDir(), "ready")
			record := filepath.Join(t.TempDir(), "events.jsonl")
			var out bytes.Buffer
			peersStdout = &out
			defer func() { peersStdout = os.Stdout }()
			done := make(chan int, 1)
			go func() {
				done <- run(append([]string{"peers", "--port", strconv.Itoa(port), "--duration", "2s", "--output", "json", "--ready-file", ready, "--record", record}, c.args...))
			}()
			waitFile(t, ready, done)
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			conn.Close()
			if rc := <-done; rc != 0 {
				t.Fatalf("exit %d, want 0 (metrics errors must not fail the trace)", rc)
			}
			var rep etcdmetric.PeersReport
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if !strings.Contains(rep.MetricsError, c.want) {
				t.Errorf("metrics error %q, want it to say %q", rep.MetricsError, c.want)
			}
			opened := 0
			for _, l := range rep.Links {
				opened += l.Opened
			}
			if opened < 1 {
				t.Errorf("tracing part missing: links %+v", rep.Links)
			}
			fh, err := os.Open(record)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			evs, err := peers.ReadEvents(fh)
			if err != nil || len(evs) != rep.Events {
				t.Errorf("--record: %d events read back (err %v), report says %d", len(evs), err, rep.Events)
			}
			t.Logf("metrics error: %s; links: %d", rep.MetricsError, len(rep.Links))
		})
	}
}

func writeSelfSignedCA(t *testing.T, path string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the server's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}
