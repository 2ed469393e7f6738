package workload

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/safefile"
)

// TestRunWALCutsSegments: with a segment of ten records the writer cuts
// new segments as etcd's WAL does, keeps at most two on disk, and each
// segment is preallocated to its full size.
func TestRunWALCutsSegments(t *testing.T) {
	dir := t.TempDir()
	var observed int
	st, err := RunWAL(context.Background(), WALOptions{
		Dir: dir, WriteBytes: 100, SegmentBytes: 1000, Duration: 300 * time.Millisecond,
		Observe: func(time.Duration) { observed++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Appends < 25 || int64(observed) != st.Appends {
		t.Fatalf("%d appends, %d observed", st.Appends, observed)
	}
	if want := int(st.Appends/10) + 1; st.Segments < want-1 || st.Segments > want {
		t.Fatalf("%d segments for %d appends of 10 per segment", st.Segments, st.Appends)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "member", "wal", "*.wal"))
	if len(files) != 1 {
		t.Fatalf("segments left on disk: %v", files)
	}
	fi, err := os.Stat(files[0])
	if err != nil || fi.Size() != 1000 {
		t.Fatalf("segment %v: size %d, want the preallocated 1000", err, fi.Size())
	}
}

func TestRunWALRate(t *testing.T) {
	st, err := RunWAL(context.Background(), WALOptions{Dir: t.TempDir(), Rate: 50, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// 50/s for 0.5 s: 25 ticks at most (the first after 20 ms).
	if st.Appends > 25 || st.Appends < 15 {
		t.Fatalf("%d appends at 50/s in 0.5 s", st.Appends)
	}
}

// TestRunWALInSwappedScratch is issue 25's planted workload directory: the
// owner of --dir renames root's fresh scratch away and puts a look-alike
// in its place whose member/wal is a symbolic link to a directory of
// root's. The writer given the scratch (its Root, opened by fd and
// checked) writes inside the scratch it made, wherever it now is; the
// writer given only the path fails rather than following the link out.
// The link's target stays empty either way, and Remove empties the real
// scratch and leaves the look-alike alone.
func TestRunWALInSwappedScratch(t *testing.T) {
	parent := t.TempDir()
	target := t.TempDir() // the directory the planted link points at
	s, _, err := safefile.NewScratch(parent, "etcdscope-wal-")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	moved := filepath.Join(parent, "moved-away")
	if err := os.Rename(s.Path, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.Path, "member"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(s.Path, "member", "wal")); err != nil {
		t.Fatal(err)
	}
	opts := WALOptions{Dir: s.Path, WriteBytes: 100, SegmentBytes: 1000, Duration: 100 * time.Millisecond}
	if _, err := RunWAL(context.Background(), opts); err == nil {
		t.Errorf("RunWAL by path wrote through the look-alike's member/wal link")
	}
	opts.Root = s.Root
	st, err := RunWAL(context.Background(), opts)
	if err != nil || st.Appends == 0 {
		t.Fatalf("RunWAL in its own scratch: %d appends, %v", st.Appends, err)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Fatalf("the link's target got %d entries: %v", len(ents), ents)
	}
	if segs, _ := filepath.Glob(filepath.Join(moved, "member", "wal", "*.wal")); len(segs) != 1 {
		t.Errorf("segments in the real (moved) scratch: %v, want 1", segs)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(moved); len(ents) != 0 {
		t.Errorf("Remove left %v in the real scratch", ents)
	}
	if _, err := os.Lstat(filepath.Join(s.Path, "member", "wal")); err != nil {
		t.Errorf("Remove touched the look-alike: %v", err)
	}
}
