package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis/peers"
)

// TestReportPeersRecordingWallClock: a peers --record file keeps the
// run's wall-clock offset in its header (mono_to_wall_ns), and report
// --html sets it against the fsync recording's on the wall clock. The
// testdata's two recordings are of one run on CLOCK_MONOTONIC; given
// headers an hour apart on the wall clock (two boots whose monotonic
// clocks happen to overlap) the page says they are an hour apart, by
// their wall clocks; without the peers header's offset it could compare
// only CLOCK_MONOTONIC, and said nothing (the last session's note: a
// peers/v1 recording kept no wall-clock offset).
func TestReportPeersRecordingWallClock(t *testing.T) {
	dir := t.TempDir()
	const fsyncWall = int64(1_780_000_000_000_000_000) // a wall offset of 2026
	fsyncIn, err := os.ReadFile("../../report/testdata/etcd-fsync.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// The summary (the last line) with the run's offset.
	lines := bytes.Split(bytes.TrimSpace(fsyncIn), []byte("\n"))
	last := lines[len(lines)-1]
	if !bytes.HasPrefix(last, []byte(`{"type":"summary"`)) || bytes.Contains(last, []byte("mono_to_wall_ns")) {
		t.Fatalf("testdata's last line is not a summary without mono_to_wall_ns: %.80s", last)
	}
	lines[len(lines)-1] = append([]byte(fmt.Sprintf(`{"mono_to_wall_ns":%d,`, fsyncWall)), last[1:]...)
	fsyncPath := filepath.Join(dir, "fsync.jsonl")
	if err := os.WriteFile(fsyncPath, append(bytes.Join(lines, []byte("\n")), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}

	events, err := os.ReadFile("../../report/testdata/peers.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	page := func(peersWall int64) string {
		var b bytes.Buffer
		if err := peers.WriteHeader(&b, peersWall); err != nil {
			t.Fatal(err)
		}
		b.Write(events)
		rec := filepath.Join(dir, fmt.Sprintf("peers-%d.jsonl", peersWall))
		if err := os.WriteFile(rec, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, fmt.Sprintf("page-%d.html", peersWall))
		reportOutput(t, "--html", out, "--peers", rec, fsyncPath)
		html, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return string(html)
	}
	if html := page(fsyncWall); strings.Contains(html, "from different runs") {
		t.Errorf("recordings of one run, the same wall offset: said apart")
	}
	// An hour later on the wall clock, less the recordings' own spans
	// (the gap is from the fsync run's last call to the peers run's first
	// event: 59m52.514s).
	if html := page(fsyncWall + 3600e9); !strings.Contains(html, "are 59m52.514s apart (by their wall clocks)") {
		i := strings.Index(html, "Raft peers")
		t.Errorf("a peers recording an hour later on the wall clock: the page does not say so:\n%s", html[max(0, i):min(len(html), i+400)])
	}
	// A recording made before the header kept the offset (0): compared on
	// CLOCK_MONOTONIC, on which these two overlap.
	if html := page(0); strings.Contains(html, "from different runs") {
		t.Errorf("a peers recording without a wall offset, overlapping on CLOCK_MONOTONIC: said apart")
	}
}
