package etcdinfo

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// TestScrapeBodyCapped: a /metrics body larger than MaxScrapeBytes (the
// issue's 50 MB page cost peers 576 MB) fails with ErrScrapeTooLarge
// and a line naming the fix, after reading at most the cap.
func TestScrapeBodyCapped(t *testing.T) {
	srv, written := hugeMetrics(t)
	_, err := Scrape(context.Background(), srv.URL+"/metrics", nil)
	// Its short samples reach etcdmetric.MaxSampleLines (1.8 MB) before
	// the byte cap: either bound refuses it, with the same fix.
	if !(errors.Is(err, ErrScrapeTooLarge) || errors.Is(err, etcdmetric.ErrTooManySamples)) || !strings.Contains(err.Error(), "give the URL of etcd's own /metrics") {
		t.Fatalf("50 MB body: %v", err)
	}
	if n := written(); n > 2*MaxScrapeBytes {
		t.Errorf("server wrote %d bytes before the reader gave up; want about the cap (%d)", n, MaxScrapeBytes)
	}
}

// TestFamiliesBodyCapped: Families (commit's and the tests' metrics
// reader) has the same cap, and fails instead of parsing a cut page.
func TestFamiliesBodyCapped(t *testing.T) {
	srv, written := hugeMetrics(t)
	_, err := Families(context.Background(), srv.URL+"/metrics", nil)
	if !errors.Is(err, ErrScrapeTooLarge) || !strings.Contains(err.Error(), "give the URL of etcd's own /metrics") {
		t.Fatalf("50 MB body: %v", err)
	}
	if n := written(); n > 2*MaxScrapeBytes {
		t.Errorf("server wrote %d bytes before the reader gave up; want about the cap (%d)", n, MaxScrapeBytes)
	}
}

// hugeMetrics serves a 50 MB well-formed exposition and reports how much
// of it was written before the client hung up.
func hugeMetrics(t *testing.T) (*httptest.Server, func() int64) {
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; written.Load() < 50<<20; i++ {
			n, err := fmt.Fprintf(w, "etcd_x{i=\"%d\"} 1\n", i)
			if err != nil {
				return
			}
			written.Add(int64(n))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, written.Load
}

// TestMembersRefusedAtOnce: endpoints where nothing listens are named as
// refused within a second (a port just closed on loopback), not after
// MembersTimeout of the client's retries; still ErrUnreachable.
func TestMembersRefusedAtOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	_, _, err = Members(context.Background(), []string{"http://" + addr, addr}, nil)
	took := time.Since(start)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "connection refused by "+addr) {
		t.Errorf("err %v: want ErrUnreachable naming the refusal by %s", err, addr)
	}
	if took > time.Second {
		t.Errorf("took %v, want within a second", took)
	}
}

// TestRefusedCheckCompletesTLS: the refusal check on an https endpoint
// completes its TLS handshake before closing, so the server logs no
// handshake error (etcd logs a connect closed before it as a rejected
// connection: one a start, in the logs diagnose reads). A plain connect
// and close to the same server logs one, which shows the server would.
func TestRefusedCheckCompletesTLS(t *testing.T) {
	var logged bytes.Buffer
	var mu sync.Mutex
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), "", 0)
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	if err := allRefused(context.Background(), []string{srv.URL}, &tls.Config{RootCAs: roots}); err != nil {
		t.Fatalf("a listening endpoint: %v", err)
	}
	read := func() string {
		time.Sleep(200 * time.Millisecond) // the server's handshake and its log, on its goroutine
		mu.Lock()
		defer mu.Unlock()
		return logged.String()
	}
	if s := read(); strings.Contains(s, "handshake error") {
		t.Errorf("the server logged %q after the check", s)
	}
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if s := read(); !strings.Contains(s, "handshake error") {
		t.Errorf("a bare connect and close logged %q: want a handshake error (the control)", s)
	}
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestTimeouts reads a real process's command line and environment as
// etcd's flag parsing takes them: --flag=N and --flag N, the flag over the
// environment, the default where neither gives one.
func TestTimeouts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  []string
		want etcdmetric.Timeouts
	}{
		{nil, nil, etcdmetric.DefaultTimeouts},
		{[]string{"--heartbeat-interval=250", "--election-timeout", "2500"}, nil, etcdmetric.Timeouts{Heartbeat: 250 * time.Millisecond, Election: 2500 * time.Millisecond, FromFlags: true}},
		{[]string{"-election-timeout=3000"}, []string{"ETCD_HEARTBEAT_INTERVAL=300", "ETCD_ELECTION_TIMEOUT=9000"}, etcdmetric.Timeouts{Heartbeat: 300 * time.Millisecond, Election: 3 * time.Second, FromFlags: true}},
	} {
		// sh takes the arguments after the script as $0..., and sleeps
		// with them on its command line ("; :" so that it does not exec
		// sleep in its place, as dash does a -c script's last command).
		cmd := exec.Command("sh", append([]string{"-c", "sleep 30; :", "etcd"}, tc.args...)...)
		cmd.Env = append(os.Environ(), tc.env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Until the child has exec'd sh, its command line is this test's.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			if args := readNulList("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline"); len(args) > 1 && args[1] == "-c" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the child did not exec sh within 5 s")
			}
		}
		got := Timeouts(cmd.Process.Pid)
		cmd.Process.Kill()
		cmd.Wait()
		if got != tc.want {
			t.Errorf("%v %v: %+v, want %+v", tc.args, tc.env, got, tc.want)
		}
	}
	if got := Timeouts(0); got != etcdmetric.DefaultTimeouts {
		t.Errorf("no pid: %+v", got)
	}
}
