package otlp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// token is the bearer token the TLS receiver accepts.
const token = "Bearer etcdscope-test-token-0123456789"

// startTLSReceiver runs an OTLP gRPC receiver with TLS (a certificate of
// a CA the test makes) that takes an export only with the authorization
// header token; any other value is refused with an error that quotes it,
// as a careless collector might. With mutual, it also requires a client
// certificate of the CA. It returns the receiver, its address, the CA's
// pool, a client certificate of the CA and every authorization value it
// was sent.
func startTLSReceiver(t *testing.T, mutual bool) (*receiver, string, *x509.CertPool, tls.Certificate, func() []string) {
	t.Helper()
	caFile, certFile, keyFile, err := etcdtest.ServerCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	var mu sync.Mutex
	var seen []string
	auth := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		got := strings.Join(md.Get("authorization"), ",")
		mu.Lock()
		seen = append(seen, got)
		mu.Unlock()
		if got != token {
			return nil, status.Errorf(codes.Unauthenticated, "authorization %q refused", got)
		}
		return h(ctx, req)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := &tls.Config{Certificates: []tls.Certificate{pair}}
	if mutual {
		serverTLS.ClientAuth, serverTLS.ClientCAs = tls.RequireAndVerifyClientCert, pool
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(serverTLS)), grpc.UnaryInterceptor(auth))
	r := &receiver{}
	coltracepb.RegisterTraceServiceServer(srv, r)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return r, ln.Addr().String(), pool, pair, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// oneWrite runs a sink with cfg that exports one write (3 spans) and
// shuts down; it returns the sink and its log.
func oneWrite(t *testing.T, cfg Config) (*Sink, string) {
	t.Helper()
	log := &testenv.SyncBuffer{}
	cfg.Log = log
	cfg.Timeout = time.Second
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetCluster(1, 2, commit.Names{2: "m2"})
	s.Start()
	s.Write(&commit.Write{Index: 10, StartNs: 1000, EndNs: 5000, PartsNs: map[string]int64{commit.PartGRPC: 1000, commit.PartWALAppend: 3000},
		Entry: &commit.Entry{Term: 2, Index: 10}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = s.Shutdown(ctx)
	if err != nil && strings.Contains(err.Error(), "test-token") {
		t.Errorf("Shutdown's error shows the token: %v", err)
	}
	return s, log.String()
}

// TestSinkTLSHeaders: against a receiver with TLS by a private CA that
// checks a bearer token, spans arrive only when the CA is given (the
// system's roots do not know it) and the header is sent; the header
// arrives as given; and when the receiver refuses it quoting the value,
// the sink's log line says so without the value.
func TestSinkTLSHeaders(t *testing.T) {
	r, addr, pool, _, seen := startTLSReceiver(t, false)
	withCA := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	hdr := map[string]string{"authorization": token}

	s, log := oneWrite(t, Config{Endpoint: addr, TLS: withCA, Headers: hdr})
	if got := s.exp.exported.Load(); got != 3 || len(r.spans) != 3 {
		t.Errorf("with the CA and the token: %d spans exported, %d received, want 3 (log: %q)", got, len(r.spans), log)
	}
	if v := seen(); len(v) == 0 || v[0] != token {
		t.Errorf("the receiver was sent authorization %d times, first %.12q..., want the token", len(v), v)
	}

	n := len(seen())
	s, log = oneWrite(t, Config{Endpoint: addr, Headers: hdr}) // the system's roots
	if s.exp.exported.Load() != 0 || s.exp.failed.Load() != 3 || len(r.spans) != 3 || len(seen()) != n {
		t.Errorf("without the CA: %d exported, %d failed, %d received in all, %d calls: want none through TLS", s.exp.exported.Load(), s.exp.failed.Load(), len(r.spans), len(seen())-n)
	}
	if !strings.Contains(log, "3 spans not exported") || !strings.Contains(log, "certificate") {
		t.Errorf("without the CA, the log does not name the certificate: %q", log)
	}

	wrong := map[string]string{"authorization": "Bearer wrong-secret-abcdefgh"}
	s, log = oneWrite(t, Config{Endpoint: addr, TLS: withCA, Headers: wrong})
	if s.exp.failed.Load() != 3 || len(r.spans) != 3 {
		t.Errorf("wrong token: %d failed, %d received in all: want refused", s.exp.failed.Load(), len(r.spans))
	}
	if !strings.Contains(log, "Unauthenticated") || !strings.Contains(log, "[redacted]") || strings.Contains(log, "wrong-secret") {
		t.Errorf("wrong token: the log line should name the refusal with the value redacted: %q", log)
	}
}

// TestSinkMutualTLS: a receiver that requires a client certificate of
// its CA takes the spans only when the sink presents one (--otlp-cert).
func TestSinkMutualTLS(t *testing.T) {
	r, addr, pool, pair, _ := startTLSReceiver(t, true)
	hdr := map[string]string{"authorization": token}
	s, log := oneWrite(t, Config{Endpoint: addr, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, Headers: hdr})
	if s.exp.exported.Load() != 0 || len(r.spans) != 0 || !strings.Contains(log, "spans not exported") {
		t.Errorf("without a client certificate: %d exported, %d received: want refused (log: %q)", s.exp.exported.Load(), len(r.spans), log)
	}
	s, log = oneWrite(t, Config{Endpoint: addr, TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, Headers: hdr})
	if s.exp.exported.Load() != 3 || len(r.spans) != 3 {
		t.Errorf("with a client certificate: %d exported, %d received, want 3 (log: %q)", s.exp.exported.Load(), len(r.spans), log)
	}
}

// TestSinkClockStep: spans' wall times follow a step of the wall clock
// after the sink starts (NTP, settimeofday): each trace's spans are
// converted by the offset read when they are made, and their durations
// stay the monotonic records' differences.
func TestSinkClockStep(t *testing.T) {
	r, addr := startReceiver(t)
	s, err := New(Config{Endpoint: addr, Insecure: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var off atomic.Int64
	const base = int64(1_800_000_000_000_000_000) // 2027-01-15, wall minus monotonic
	off.Store(base)
	s.clock = func() (int64, uint64) { return off.Load() + 5_000_000_000, 5_000_000_000 }
	s.SetCluster(1, 2, commit.Names{2: "m2"})
	s.Start()
	write := func(i, startNs uint64) {
		s.Write(&commit.Write{Index: i, StartNs: startNs, EndNs: startNs + 4000, PartsNs: map[string]int64{commit.PartGRPC: 1000, commit.PartWALAppend: 3000},
			Entry: &commit.Entry{Term: 2, Index: i}})
		for deadline := time.Now().Add(2 * time.Second); s.spansEnded.Load() < 3*(i-9) && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	const step = int64(-3_600_000_000_000) // the wall clock set back an hour
	write(10, 1_000_000)
	off.Add(step)
	write(11, 2_000_000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if n, err := s.Shutdown(ctx); n != 0 || err != nil {
		t.Fatalf("shutdown: %d not exported, %v", n, err)
	}
	if len(r.spans) != 6 {
		t.Fatalf("%d spans, want 6", len(r.spans))
	}
	for _, g := range r.spans {
		sp := g.span
		var idx, durNs int64
		for _, a := range sp.Attributes {
			switch a.Key {
			case "etcd.raft.index":
				idx = a.GetValue().GetIntValue()
			case "etcdscope.duration_ns":
				durNs = a.GetValue().GetIntValue()
			}
		}
		want := base + 1_000_000
		if idx == 11 {
			want = base + step + 2_000_000
		}
		if sp.Name == "etcd write" && int64(sp.StartTimeUnixNano) != want {
			t.Errorf("write %d starts at %d, want %d (its monotonic start + the offset when it was exported)", idx, sp.StartTimeUnixNano, want)
		}
		if got := int64(sp.EndTimeUnixNano - sp.StartTimeUnixNano); got != durNs || durNs <= 0 {
			t.Errorf("write %d span %q: %d ns, the records %d", idx, sp.Name, got, durNs)
		}
	}
}

// TestParseHeader: a header's key is checked and lowercased; no error
// shows the value.
func TestParseHeader(t *testing.T) {
	const secret = "Bearer s3cret-value"
	for _, c := range []struct {
		in, key, fix string
	}{
		{"Authorization=" + secret, "authorization", ""},
		{"x-scope-orgid=team a=b", "x-scope-orgid", ""},
		{secret, "", "give key=value"},
		{"=" + secret, "", "give key=value"},
		{"authorization=", "", "empty value"},
		{"grpc-timeout=" + secret, "", "gRPC's own"},
		{"auth-bin=" + secret, "", "binary"},
		{"auth orization=" + secret, "", "only letters"},
		{"authorization=" + secret + "\n", "", "outside printable ASCII"},
		{"authorization=" + secret + strings.Repeat("x", MaxHeaderBytes), "", "give at most 4096"},
	} {
		k, v, err := ParseHeader(c.in)
		switch {
		case c.fix == "" && (err != nil || k != c.key || v != strings.SplitN(c.in, "=", 2)[1]):
			t.Errorf("%q: %q=%q, %v; want key %q", c.in, k, v, err, c.key)
		case c.fix != "" && (err == nil || !strings.Contains(err.Error(), c.fix)):
			t.Errorf("%q: error %v, want one naming %q", c.in, err, c.fix)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("%q: the error shows the value: %v", c.in, err)
		}
	}
}

// TestSinkTLSDespiteSDKEnv: the SDK reads its OTEL_EXPORTER_OTLP_*
// variables under the sink's options; OTEL_EXPORTER_OTLP_INSECURE=true
// (or an http:// OTEL_EXPORTER_OTLP_ENDPOINT) in serve's environment
// turned TLS off for a sink configured for TLS, sending the header in
// clear to a plaintext receiver. The sink's transport is its Config's
// alone: no span reaches a plaintext receiver without Insecure.
func TestSinkTLSDespiteSDKEnv(t *testing.T) {
	for _, env := range [][2]string{{"OTEL_EXPORTER_OTLP_INSECURE", "true"}, {"OTEL_EXPORTER_OTLP_TRACES_INSECURE", "true"}, {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1"}} {
		t.Run(env[0], func(t *testing.T) {
			t.Setenv(env[0], env[1])
			r, addr := startReceiver(t)
			s, _ := oneWrite(t, Config{Endpoint: addr, Headers: map[string]string{"authorization": token}})
			r.mu.Lock()
			got := len(r.spans)
			r.mu.Unlock()
			if got != 0 || s.exp.exported.Load() != 0 {
				t.Errorf("%s=%s: %d spans reached a plaintext receiver (%d exported): want TLS, as Config asks", env[0], env[1], got, s.exp.exported.Load())
			}
			s, log := oneWrite(t, Config{Endpoint: addr, Insecure: true})
			if s.exp.exported.Load() != 3 {
				t.Errorf("%s=%s with Insecure: %d spans exported, want 3 (log %q)", env[0], env[1], s.exp.exported.Load(), log)
			}
		})
	}
}
