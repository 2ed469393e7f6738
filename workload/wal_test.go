package workload

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
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
