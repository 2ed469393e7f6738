package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/analysis/jsonl"
)

// Bounds of FetchEntryWindows: one reply's body (EntriesMaxLimit records
// of at most ~600 bytes each, with room to spare) and the records kept
// per member (one EntryLog's window).
const (
	maxWindowBody    = 8 << 20
	maxWindowEntries = commit.MaxEntries
	// maxWindowFields bounds a reply's members (its ':' bytes, counted
	// before it is decoded, as jsonl.MaxObjects bounds its objects and
	// arrays): a real window's maxWindowEntries records have 10-40 fields
	// each (a leader's acks, 2 each; sync_cause's ns map, one a cause).
	// 8 MiB of "{}" records decoded into 2.8 M structs, 2.2 GiB
	// allocated, and a names or ns map into a key each.
	maxWindowFields = 64 * maxWindowEntries
)

// Why an agent's window could not be read: nothing answered at its URL
// (or not in time), or what answered is not a serve --commit-pid agent.
// FetchEntryWindows wraps one of them when it is the cause.
var (
	ErrAgentUnreachable = errors.New("no answer")
	ErrNotAgent         = errors.New("not an etcdscope serve --commit-pid agent")
)

// FetchEntryWindows reads each member agent's per-entry records (serve
// --commit-pid's GET /commit/entries at base URL u) with an index above
// since, page by page, at most maxWindowEntries per member; every request
// ends within timeout. The error names the agent that failed.
func FetchEntryWindows(ctx context.Context, urls []string, since uint64, timeout time.Duration) ([]commit.EntryWindow, error) {
	cl := &http.Client{Timeout: timeout}
	var out []commit.EntryWindow
	for _, u := range urls {
		w, err := fetchWindow(ctx, cl, strings.TrimSuffix(u, "/"), since)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u, err)
		}
		out = append(out, w)
	}
	return out, nil
}

// fetchWindow pages through one agent's window.
func fetchWindow(ctx context.Context, cl *http.Client, base string, since uint64) (commit.EntryWindow, error) {
	var all commit.EntryWindow
	for first := true; ; first = false {
		w, err := fetchPage(ctx, cl, base+"/commit/entries?since_index="+strconv.FormatUint(since, 10)+"&limit="+strconv.Itoa(maxWindowEntries))
		if err != nil {
			return all, err
		}
		if first {
			all = w
		} else {
			all.Entries = append(all.Entries, w.Entries...)
		}
		if !w.More || len(w.Entries) == 0 || len(all.Entries) >= maxWindowEntries {
			all.More = w.More
			return all, nil
		}
		last := w.Entries[len(w.Entries)-1].Index
		if last <= since {
			// A page that does not move on would be asked for again
			// until maxWindowEntries: 4,096 requests of one record.
			return all, fmt.Errorf("%w (a page past index %d ends at index %d)", ErrNotAgent, since, last)
		}
		since = last
	}
}

// fetchPage GETs one page, its body bounded.
func fetchPage(ctx context.Context, cl *http.Client, u string) (commit.EntryWindow, error) {
	var w commit.EntryWindow
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return w, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			return w, fmt.Errorf("%w (%v)", ErrAgentUnreachable, err)
		}
		return w, err
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxWindowBody+1)
	if resp.StatusCode == http.StatusNotFound {
		return w, fmt.Errorf("%w (GET /commit/entries: %s)", ErrNotAgent, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(body, 200))
		return w, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return w, err
	}
	if len(b) > maxWindowBody {
		return w, fmt.Errorf("reply over %d bytes", maxWindowBody)
	}
	if jsonl.TooManyObjects(b, jsonl.MaxObjects) || bytes.Count(b, []byte(":")) > maxWindowFields {
		return w, fmt.Errorf("%w (a reply of more than %d objects, arrays or %d fields: no window of %d records has as many)", ErrNotAgent, jsonl.MaxObjects, maxWindowFields, maxWindowEntries)
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return w, fmt.Errorf("%w (%v)", ErrNotAgent, err)
	}
	if len(w.Entries) > maxWindowEntries {
		return w, fmt.Errorf("%w (%d records, more than the %d asked for)", ErrNotAgent, len(w.Entries), maxWindowEntries)
	}
	if w.V < commit.EntryWindowOldest || w.V > commit.EntryWindowVersion {
		return w, errors.New("entry window version " + strconv.Itoa(w.V) + ", want " + strconv.Itoa(commit.EntryWindowOldest) + " to " + strconv.Itoa(commit.EntryWindowVersion))
	}
	return w, nil
}
