package tracer

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestFsyncNamesFollowRenames checks the programs' per-file name cache
// (bpf/fsync.bpf.c, files) against what etcd does to its first WAL
// segment: created as a .tmp in wal.tmp/, renamed, then the directory
// renamed to wal/, all with the file open. Every fdatasync must carry the
// names the file has at that moment, as the kernel's dentries say
// (os.Rename is the oracle), not the ones cached from the first call.
func TestFsyncNamesFollowRenames(t *testing.T) {
	testenv.RequireRoot(t)
	tr, err := NewFsync(FsyncConfig{PID: uint32(os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	base := t.TempDir()
	tmpDir := filepath.Join(base, "wal.tmp")
	if err := os.Mkdir(tmpDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(tmpDir, "0.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	leafOfBase := filepath.Base(base)
	steps := []struct {
		rename func() error
		want   []string // innermost first, as event.Fsync.Names
	}{
		{nil, []string{"0.tmp", "wal.tmp", leafOfBase}},
		{nil, []string{"0.tmp", "wal.tmp", leafOfBase}}, // cached
		{func() error {
			return os.Rename(filepath.Join(tmpDir, "0.tmp"), filepath.Join(tmpDir, "0000000000000000-0000000000000000.wal"))
		},
			[]string{"0000000000000000-0000000000000000.wal", "wal.tmp", leafOfBase}},
		{func() error { return os.Rename(tmpDir, filepath.Join(base, "wal")) },
			[]string{"0000000000000000-0000000000000000.wal", "wal", leafOfBase}},
		{nil, []string{"0000000000000000-0000000000000000.wal", "wal", leafOfBase}},
	}
	for i, s := range steps {
		if s.rename != nil {
			if err := s.rename(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.Write(make([]byte, 2300)); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			t.Fatal(err)
		}
		got := nextFsync(t, tr)
		if len(got.Names) < len(s.want) || !slices.Equal(got.Names[:len(s.want)], s.want) {
			t.Errorf("fdatasync %d: names %q, want them to start %q", i, got.Names, s.want)
		}
	}
}

// nextFsync reads events until the next event.Fsync.
func nextFsync(t *testing.T, tr *FsyncTracer) event.Fsync {
	t.Helper()
	for {
		var a event.Any
		if err := tr.Read(&a); err != nil {
			t.Fatal(err)
		}
		ev := a.Value()
		if e, ok := ev.(event.Fsync); ok {
			return e
		}
	}
}
