package capture

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/event"
)

func TestRoundTrip(t *testing.T) {
	evs := []event.Any{
		{Kind: event.KindFsyncEnter, Enter: event.FsyncEnter{TID: 7, StartNs: 100}},
		{Kind: event.KindBlock, Block: event.Block{Rq: 1 << 63, Dev: event.MkDev(7, 3), Op: event.OpWrite, Flags: event.ReqSync | event.ReqFUA,
			CmdFlags: 0x800, Sector: 12, Bytes: 4096, Error: -5, Final: true, InsertNs: 110, IssueNs: 120, CompleteNs: 130, PID: 1, TID: 2, Comm: "kworker/0:1"}},
		{Kind: event.KindJournal, Journal: event.Journal{Source: event.JournalJBD2Commit, Dev: event.MkDev(7, 3), TID: 9, Txn: 42, StartNs: 111, EndNs: 140}},
		{Kind: event.KindFlushBio, FlushBio: event.FlushBio{Dev: event.MkDev(7, 3), Op: event.OpFlush, Flags: event.ReqPreflush, PID: 1, TID: 2, QueueNs: 115}},
		{Kind: event.KindBioRemap, Remap: event.BioRemap{Dev: event.MkDev(253, 0), Target: event.MkDev(7, 3), Op: event.OpWrite, Flags: event.ReqPreflush, TID: 40, Sector: 8, RemapNs: 116}},
		{Kind: event.KindDMBio, DMBio: event.DMBio{Bio: 1 << 62, Dev: event.MkDev(253, 0), Op: event.OpWrite, Flags: event.ReqPreflush | event.ReqSync,
			Bytes: 0, Error: 0, PID: 1, TID: 2, Comm: "etcd", QueueNs: 114, CompleteNs: 118}},
		{Kind: event.KindKernelFsync, Fsync: event.Fsync{Syscall: event.SysKthread, PID: 3, TID: 3, Comm: "kworker", Dev: event.MkDev(254, 1), Ino: 5, FSType: "ext4", StartNs: 121, EndNs: 129}},
		{Kind: event.KindFsync, Fsync: event.Fsync{Syscall: event.SysFdatasync, PID: 7, TID: 7, Comm: "etcd", FD: 9, Dev: event.MkDev(7, 3), Ino: 12,
			FSType: "ext4", Names: []string{"0.wal", "wal", "/"}, CgroupID: 77, StartNs: 100, EndNs: 150, Ret: 0}},
		{Kind: event.KindSched, Sched: event.Sched{TID: 8, State: event.SchedBlocked, Ns: 170}},
		{Kind: event.KindSched, Sched: event.Sched{TID: 8, State: event.SchedRunning, Ns: 171}},
		{Kind: event.KindWrite, Write: event.Write{Call: event.Fsync{Syscall: event.SysPwrite64, PID: 7, TID: 8, Comm: "etcd", FD: 9,
			Dev: event.MkDev(7, 3), Ino: 12, FSType: "ext4", Names: []string{"0.wal", "wal", "/"}, CgroupID: 77, StartNs: 160, EndNs: 990, Ret: 2300},
			ThrottledNs: 600, Throttles: 2, WritebackWaitNs: 100, WritebackWaits: 1}},
	}
	var b bytes.Buffer
	w, err := NewWriter(&b, Header{Tracer: TracerFsync, Unavailable: []analysis.Unavailable{{Probe: "x", Dark: event.DarkIOUring, Reason: event.ReasonRefused, Err: "y", Optional: true}}, Disk: "7:3"})
	if err != nil {
		t.Fatal(err)
	}
	dev := Device{Dev: event.MkDev(7, 3), Name: "loop3", Disks: []event.Dev{event.MkDev(7, 3)}, DiskNames: []string{"loop3"}}
	bk := Backing{Disk: event.MkDev(7, 3), OK: true, Path: "/var/tmp/x.img", Dev: event.MkDev(254, 1), Ino: 5}
	for i := range evs {
		if i == 5 {
			if err := w.Device(dev); err != nil {
				t.Fatal(err)
			}
			if err := w.Backing(bk); err != nil {
				t.Fatal(err)
			}
			if err := w.Backing(Backing{Disk: event.MkDev(254, 0)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Event(&evs[i], "/d/member/wal/0.wal"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(End{LostEvents: 3, MissedEvents: 4}); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Header(); h.Schema != Schema || h.Tracer != TracerFsync || h.Disk != "7:3" || len(h.Unavailable) != 1 || h.Unavailable[0] != (analysis.Unavailable{Probe: "x", Dark: event.DarkIOUring, Reason: event.ReasonRefused, Err: "y", Optional: true}) {
		t.Fatalf("header %+v", h)
	}
	for i := range evs {
		var got event.Any
		if err := r.ReadEvent(&got); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, evs[i]) {
			t.Fatalf("event %d:\n got %+v\nwant %+v", i, got, evs[i])
		}
	}
	if r.Path() != "/d/member/wal/0.wal" {
		t.Errorf("path %q", r.Path())
	}
	if d, ok := r.Device(event.MkDev(7, 3)); !ok || !reflect.DeepEqual(d, dev) {
		t.Errorf("device %+v %v", d, ok)
	}
	if g, ok := r.Backing(event.MkDev(7, 3)); !ok || g != bk {
		t.Errorf("backing %+v %v", g, ok)
	}
	if g, ok := r.Backing(event.MkDev(254, 0)); !ok || g.OK {
		t.Errorf("not stacked: %+v %v", g, ok)
	}
	if _, ok := r.End(); ok {
		t.Error("end before EOF")
	}
	var ev event.Any
	if err := r.ReadEvent(&ev); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last event: %v", err)
	}
	if e, ok := r.End(); !ok || e.LostEvents != 3 || e.MissedEvents != 4 {
		t.Errorf("end %+v %v", e, ok)
	}
}

func TestPeersRoundTrip(t *testing.T) {
	var b bytes.Buffer
	w, _ := NewWriter(&b, Header{Tracer: TracerPeers, Port: 2380})
	e := event.Peer{Kind: event.PeerOpen, TimeNs: 5, Socket: 9, Direction: event.PeerActive, PID: 3, Comm: "etcd",
		Local: netip.MustParseAddrPort("10.0.0.1:40000"), Remote: netip.MustParseAddrPort("10.0.0.2:2380"), DurationNs: 1000}
	w.Peer(&e)
	if err := w.Close(End{WindowNs: 3e9}); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	var got event.Peer
	if err := r.ReadPeer(&got); err != nil || got != e {
		t.Fatalf("got %+v, %v", got, err)
	}
	var ev event.Any
	if err := r.ReadEvent(&ev); !errors.Is(err, io.EOF) {
		t.Fatalf("EOF: %v", err)
	}
	if end, ok := r.End(); !ok || end.WindowNs != 3e9 {
		t.Errorf("end %+v", end)
	}
}

func TestNotCapture(t *testing.T) {
	for _, in := range []string{"", `{"type":"fsync","v":1}` + "\n", "not json\n"} {
		if _, err := NewReader(strings.NewReader(in)); !errors.Is(err, ErrNotCapture) {
			t.Errorf("%q: %v", in, err)
		}
	}
	if _, err := NewReader(strings.NewReader(`{"type":"capture","v":3}` + "\n")); err == nil || errors.Is(err, ErrNotCapture) {
		t.Errorf("newer version: %v", err)
	}
	r, _ := NewReader(strings.NewReader(`{"type":"capture","v":1}` + "\n" + `{"type":"peer","peer":{"kind":"open"}}` + "\n"))
	var ev event.Any
	if err := r.ReadEvent(&ev); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("peer line in an fsync read: %v", err)
	}
}

// TestHeaderUnavailableVersions: a version 1 header's unavailable probes
// (strings, "probe: words") read as analysis.Unavailable's Probe and Text,
// a version 2 header's as their fields; version 1's strings in a version 2
// header are refused.
func TestHeaderUnavailableVersions(t *testing.T) {
	v1 := `{"type":"capture","v":1,"schema":"capture/v1","tracer":"fsync","unavailable":["fentry|kprobe/jbd2_log_wait_commit: optional, journal layer by overlap with jbd2 commits (fentry: EPERM)"]}` + "\n"
	r, err := NewReader(strings.NewReader(v1))
	if err != nil {
		t.Fatal(err)
	}
	want := analysis.Unavailable{Probe: "fentry|kprobe/jbd2_log_wait_commit", Text: "optional, journal layer by overlap with jbd2 commits (fentry: EPERM)", Optional: true}
	if u := r.Header().Unavailable; len(u) != 1 || u[0] != want {
		t.Errorf("version 1 unavailable read as %+v, want %+v", u, want)
	}
	v2 := `{"type":"capture","v":2,"schema":"capture/v2","tracer":"fsync","unavailable":[{"probe":"tp_btf/xfs_log_force","dark":"xfs_log_force","reason":"no_module_btf","module":"xfs"}]}` + "\n"
	if r, err = NewReader(strings.NewReader(v2)); err != nil {
		t.Fatal(err)
	}
	want = analysis.Unavailable{Probe: "tp_btf/xfs_log_force", Dark: event.DarkXFSLogForce, Reason: event.ReasonNoModuleBTF, Module: "xfs"}
	if u := r.Header().Unavailable; len(u) != 1 || u[0] != want {
		t.Errorf("version 2 unavailable read as %+v, want %+v", u, want)
	}
	if _, err := NewReader(strings.NewReader(strings.Replace(v1, `"v":1`, `"v":2`, 1))); err == nil {
		t.Errorf("a version 2 header with version 1's strings read")
	}
}

// TestReaderFactsBounded: a capture of more than MaxFacts device facts,
// or of one fact larger than MaxFactBytes, fails with ErrTooLarge where
// it passes the bound, and the facts before it are read.
func TestReaderFactsBounded(t *testing.T) {
	head := `{"type":"capture","v":1,"schema":"capture/v1","tracer":"fsync","command":"fsync"}` + "\n"
	var b strings.Builder
	b.WriteString(head)
	for i := range MaxFacts + 1 {
		fmt.Fprintf(&b, `{"type":"device","dev":%d,"name":"d%d"}`+"\n", i+1, i)
	}
	b.WriteString(`{"type":"device","dev":1,"name":"again"}` + "\n")
	r, err := NewReader(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Any
	if err := r.ReadEvent(&ev); !errors.Is(err, ErrTooLarge) {
		t.Errorf("%d device facts: %v, want ErrTooLarge", MaxFacts+1, err)
	}
	if d, ok := r.Device(event.Dev(MaxFacts)); !ok || d.Name != fmt.Sprintf("d%d", MaxFacts-1) {
		t.Errorf("the last fact held: %+v %v", d, ok)
	}
	big := head + `{"type":"backing","disk":1,"ok":true,"path":"/` + strings.Repeat("p", MaxFactBytes) + `"}` + "\n"
	if r, err = NewReader(strings.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadEvent(&ev); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a fact of %d bytes: %v, want ErrTooLarge", MaxFactBytes+1, err)
	}
}

// TestScrapeRoundTrip: a scrape of etcd's metric (its +Inf bucket, which
// JSON has no number for, included) comes back from a capture's end line
// as it went in.
func TestScrapeRoundTrip(t *testing.T) {
	f, err := os.Open("../analysis/etcdmetric/testdata/etcd-3.6.16-tls-loopback-end.prom")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want, err := etcdmetric.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(End{Etcd: &Etcd{To: FromScrape(want)}})
	if err != nil {
		t.Fatal(err)
	}
	var end End
	if err := json.Unmarshal(b, &end); err != nil {
		t.Fatal(err)
	}
	got, err := end.Etcd.To.Metric()
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Series {
		want.Series[i].FirstBound = 0 // not kept: 0 is the peer RTT's ladder
	}
	if !got.ProcessStart.Equal(want.ProcessStart) || !reflect.DeepEqual(got.Series, want.Series) || got.Leader != want.Leader || got.IsEtcd != want.IsEtcd {
		t.Errorf("round trip:\ngot  %+v\nwant %+v", got, want)
	}
	if len(got.Series) == 0 || !math.IsInf(got.Series[0].Buckets[len(got.Series[0].Buckets)-1].UpperBound, 1) {
		t.Errorf("no series, or the last bucket is not +Inf: %+v", got.Series)
	}
}
