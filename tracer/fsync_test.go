package tracer

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestFsyncTracerSeesOwnFdatasync checks the raw event stream: every
// fdatasync this test makes arrives with its file's inode and device, and
// flush requests of the file's disk arrive too (this machine's vda has a
// volatile write cache; tmpfs would show none).
func TestFsyncTracerSeesOwnFdatasync(t *testing.T) {
	testenv.RequireRoot(t)
	tr, err := NewFsync(FsyncConfig{PID: uint32(os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	f, err := os.CreateTemp("/var/tmp", "etcdscope-tracer-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	const n = 20
	go func() {
		buf := make([]byte, 2300)
		for i := 0; i < n; i++ {
			f.Write(buf)
			unix.Fdatasync(int(f.Fd()))
		}
		time.Sleep(200 * time.Millisecond)
		tr.Close()
	}()
	var fsyncs, blocks, flushes int
	enters := map[uint32]int{} // kernel threads' fsyncs (loop workers) enter too
	mine := map[uint32]bool{}
	for {
		var a event.Any
		if err := tr.Read(&a); err != nil {
			break
		}
		ev := a.Value()
		switch e := ev.(type) {
		case event.Fsync:
			if e.Syscall != event.SysFdatasync || e.Ino != st.Ino || e.Dev != event.DevFromUnix(st.Dev) {
				t.Errorf("unexpected fsync event %+v (want ino %d dev %v)", e, st.Ino, event.DevFromUnix(st.Dev))
				continue
			}
			if e.EndNs <= e.StartNs || e.Ret != 0 || e.FSType == "" || len(e.Names) == 0 {
				t.Errorf("bad fsync event %+v", e)
			}
			fsyncs++
			mine[e.TID] = true
		case event.FsyncEnter:
			enters[e.TID]++
		case event.Block:
			blocks++
			if e.IsFlush() {
				flushes++
			}
		}
	}
	myEnters := 0
	for tid := range mine {
		myEnters += enters[tid]
	}
	if fsyncs != n || myEnters != n {
		t.Fatalf("traced %d fdatasync exits and %d entries, made %d", fsyncs, myEnters, n)
	}
	if blocks == 0 || flushes == 0 {
		t.Fatalf("saw %d block requests, %d flushes; want some of each", blocks, flushes)
	}
	lost, err := tr.Lost()
	if err == nil && lost != 0 {
		t.Fatalf("lost %d events", lost)
	}
	t.Logf("%d fdatasync, %d block requests, %d flushes; probes %+v", fsyncs, blocks, flushes, tr.Probes())
}
