package etcdinfo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestScrapeBodyCapped: a /metrics body larger than MaxScrapeBytes (the
// issue's 50 MB page cost peers 576 MB) fails with ErrScrapeTooLarge
// and a line naming the fix, after reading at most the cap.
func TestScrapeBodyCapped(t *testing.T) {
	var written int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; written < 50<<20; i++ {
			n, err := fmt.Fprintf(w, "etcd_x{i=\"%d\"} 1\n", i)
			if err != nil {
				return
			}
			written += n
		}
	}))
	defer srv.Close()
	_, err := Scrape(context.Background(), srv.URL+"/metrics", nil)
	if !errors.Is(err, ErrScrapeTooLarge) || !strings.Contains(err.Error(), "give the URL of etcd's own /metrics") {
		t.Fatalf("50 MB body: %v", err)
	}
}
