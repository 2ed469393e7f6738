package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/render"
)

// TestServeSwitchLaterBeforeEtcd: serve --comm of a comm no process has
// yet, without --data-dir, starts its fsync tracer not knowing etcd's
// filesystem and able to move to ext4's tracepoints later
// (watchFSTypes); every process traced (no --comm, no --pid) or
// --data-dir given, it decides at the start as before.
func TestServeSwitchLaterBeforeEtcd(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"--comm", "no-such-comm-x"}, true},
		{[]string{"--comm", "no-such-comm-x", "--commit-comm", "no-such-comm-x"}, true},
		{nil, false},
		{[]string{"--comm", "no-such-comm-x", "--data-dir", t.TempDir()}, false},
	} {
		var f serveFlags
		fs := f.flagSet()
		if err := fs.Parse(append([]string{"--listen", "127.0.0.1:0"}, c.args...)); err != nil {
			t.Fatal(err)
		}
		_, tcfg, err := f.validate()
		if err != nil {
			t.Fatalf("serve %v: %v", c.args, err)
		}
		if tcfg.fsync.SwitchLater != c.want {
			t.Errorf("serve %v: SwitchLater %v (FSTypes %v); want %v", c.args, tcfg.fsync.SwitchLater, tcfg.fsync.FSTypes, c.want)
		}
	}
}

// fakeSwitcher counts SwitchToExt4 calls.
type fakeSwitcher struct {
	mu       sync.Mutex
	switches int
}

func (f *fakeSwitcher) SwitchToExt4(context.Context) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.switches++
	return 0, nil
}

// TestWatchFSTypes: serve keeps looking while etcd's filesystem is not
// known (nil), moves the fsync tracer once when it is ext4 and says so in
// one line; on another filesystem it leaves the syscall tracepoints (one
// line too); it stops at ctx's end without moving. Each line names the
// process as the flags gave it (the new-user walk: "etcd's files" for
// any --comm).
func TestWatchFSTypes(t *testing.T) {
	run := func(answers [][]string, ctx context.Context) (int, int, string) {
		t.Helper()
		ft := &fakeSwitcher{}
		var log bytes.Buffer
		looks := 0
		watchFSTypes(ctx, ft, render.ServeTraced(0, "etcd35"), func() []string {
			looks++
			a := answers[min(looks, len(answers))-1]
			return a
		}, time.Millisecond, &log)
		return ft.switches, looks, log.String()
	}
	sw, looks, log := run([][]string{nil, nil, {"ext4"}}, context.Background())
	if sw != 1 || looks != 3 || strings.Count(log, "\n") != 1 || !strings.Contains(log, "fsync: etcd35's files are on ext4: traced on ext4's tracepoints now") {
		t.Errorf("etcd on ext4 at the third look: %d switches after %d looks, log %q; want 1 after 3, one line", sw, looks, log)
	}
	sw, looks, log = run([][]string{nil, {"ext4", "xfs"}}, context.Background())
	if sw != 0 || looks != 2 || !strings.Contains(log, "fsync: etcd35's files are on ext4, xfs: its fsyncs stay traced on the syscall tracepoints") {
		t.Errorf("etcd's files on ext4 and xfs: %d switches after %d looks, log %q; want none, the syscall tracepoints kept", sw, looks, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	sw, _, log = run([][]string{nil}, ctx)
	if sw != 0 || log != "" {
		t.Errorf("etcd never seen: %d switches, log %q; want none, nothing said", sw, log)
	}
}

// TestTracedFSTypes: serve (at its start and at each later look) and commit know a process's filesystem
// only once it holds both a WAL segment and the bbolt file open (etcd
// opens them apart as it starts, and --wal-dir may put them elsewhere):
// this test's own process, with files laid out as etcd's in a directory
// of the test's filesystem.
func TestTracedFSTypes(t *testing.T) {
	dir := t.TempDir()
	want, err := host.FSTypeOf(dir)
	if err != nil {
		t.Skipf("filesystem of %s: %v", dir, err)
	}
	for _, d := range []string{"member/wal", "member/snap"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	open := func(p string) {
		f, err := os.Create(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
	}
	if ts := tracedFSTypes(os.Getpid(), ""); ts != nil {
		t.Errorf("no etcd file open: %v; want nil (not known)", ts)
	}
	open("member/wal/0000000000000000-0000000000000000.wal")
	if ts := tracedFSTypes(os.Getpid(), ""); ts != nil {
		t.Errorf("a WAL segment open, no bbolt file: %v; want nil (not known yet)", ts)
	}
	open("member/snap/db")
	if ts := tracedFSTypes(os.Getpid(), ""); !slices.Equal(ts, []string{want}) {
		t.Errorf("both open: %v; want [%s]", ts, want)
	}
	if ts := tracedFSTypes(0, "no-such-comm-x"); ts != nil {
		t.Errorf("no process of the comm: %v; want nil", ts)
	}
}
