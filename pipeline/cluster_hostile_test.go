package pipeline

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/commit"
)

// TestFetchEntryWindowsObjectsBounded: a hostile agent (or a local user
// listening where the operator said an agent is) answers within the 8 MiB
// body bound with records that are nothing but "{}", or one record's acks,
// or a names map: each decoded into a struct of its own. The reply is
// refused before it is decoded when it holds more than jsonl.MaxObjects
// objects or arrays (a real window: at most commit.MaxEntries records of
// a few objects each), within 64 MiB allocated. Before: 2.8 M records,
// ~1 GiB allocated per member.
func TestFetchEntryWindowsObjectsBounded(t *testing.T) {
	n := (maxWindowBody - 64) / 3
	for _, c := range []struct{ name, body string }{
		{"records of {}", `{"v":2,"entries":[` + strings.Repeat(`{},`, n-1) + `{}],"more":false}`},
		{"one record's acks", `{"v":2,"entries":[{"acks":[` + strings.Repeat(`{},`, n-1) + `{}]}],"more":false}`},
		{"records of sync_cause", `{"v":2,"entries":[` + strings.Repeat(`{"sync_cause":{}},`, n/6-1) + `{}],"more":false}`},
		{"a names map", `{"v":2,"names":{` + strings.Repeat(`"1":"",`, n*3/7-1) + `"2":""},"entries":[],"more":false}`},
		{"4097 records", `{"v":2,"entries":[` + strings.Repeat(`{"term":1,"index":1},`, commit.MaxEntries) + `{}],"more":false}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte(c.body))
			}))
			defer srv.Close()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ws, err := FetchEntryWindows(context.Background(), []string{srv.URL}, 0, 5*time.Second)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			entries := 0
			if len(ws) > 0 {
				entries = len(ws[0].Entries)
			}
			t.Logf("%d bytes: %d records, %v, %d MiB allocated", len(c.body), entries, err, alloc>>20)
			if err == nil || alloc > 64<<20 {
				t.Errorf("%d MiB allocated, error %v: want refused within 64 MiB", alloc>>20, err)
			}
		})
	}
}

// TestFetchEntryWindowsPagesMoveOn: an agent whose every page says more
// and ends at the index asked past was asked again until 4,096 records
// (4,096 requests, each up to the timeout); now the second page that does
// not move on is refused.
func TestFetchEntryWindowsPagesMoveOn(t *testing.T) {
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		w.Write([]byte(`{"v":2,"entries":[{"term":1,"index":1}],"more":true}`))
	}))
	defer srv.Close()
	_, err := FetchEntryWindows(context.Background(), []string{srv.URL}, 0, 5*time.Second)
	if err == nil || requests > 2 {
		t.Errorf("%d requests, error %v: want refused by the second", requests, err)
	}
}
