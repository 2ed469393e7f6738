package etcdinfo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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
