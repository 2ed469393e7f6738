package tracer

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestHypervisorTracerSyscalls makes the calls QEMU's aio modes make, on an
// O_DIRECT file and a buffered one, and checks the tracer saw exactly those
// (counts, byte counts from the calls' own return values, fd, file name,
// O_DIRECT) and nothing was lost.
func TestHypervisorTracerSyscalls(t *testing.T) {
	testenv.RequireRoot(t)
	dir, err := os.MkdirTemp("/var/tmp", "etcdscope-hv-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tr, err := NewHypervisor(HypervisorConfig{PID: uint32(os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, p := range tr.Probes() {
		if !p.Attached {
			t.Logf("probe %s not attached: %s", p.Name, p.Why)
		}
	}
	direct, err := os.OpenFile(filepath.Join(dir, "direct.img"), os.O_CREATE|os.O_RDWR|unix.O_DIRECT, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	buffered, err := os.OpenFile(filepath.Join(dir, "buffered.qcow2"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer buffered.Close()
	// O_DIRECT wants aligned buffers.
	mem, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	want := map[string]int{}
	var wantBytes int64
	for i := 0; i < 5; i++ {
		n, err := unix.Pwrite(int(direct.Fd()), mem[:4096], int64(i)*4096)
		if err != nil {
			t.Fatal(err)
		}
		wantBytes += int64(n)
		want["pwrite64 direct.img"]++
		n, err = unix.Pwritev(int(buffered.Fd()), [][]byte{mem[:512], mem[512:1024]}, int64(i)*1024)
		if err != nil {
			t.Fatal(err)
		}
		wantBytes += int64(n)
		want["pwritev buffered.qcow2"]++
	}
	for i := 0; i < 3; i++ {
		n, err := unix.Pread(int(direct.Fd()), mem[:4096], 0)
		if err != nil {
			t.Fatal(err)
		}
		wantBytes += int64(n)
		want["pread64 direct.img"]++
	}
	// aio=native: io_setup + io_submit of one IOCB_CMD_PWRITE.
	var aioCtx uint64
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, 8, uintptr(unsafe.Pointer(&aioCtx)), 0); e != 0 {
		t.Fatalf("io_setup: %v", e)
	}
	defer unix.Syscall(unix.SYS_IO_DESTROY, uintptr(aioCtx), 0, 0)
	type iocb struct {
		data         uint64
		key, rwFlags uint32
		opcode       uint16
		reqprio      int16
		fildes       uint32
		buf, nbytes  uint64
		offset       int64
		reserved2    uint64
		flags, resfd uint32
	}
	cb := iocb{opcode: 1 /* IOCB_CMD_PWRITE */, fildes: uint32(direct.Fd()), buf: uint64(uintptr(unsafe.Pointer(&mem[0]))), nbytes: 4096, offset: 8192}
	cbs := []*iocb{&cb}
	r, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, uintptr(aioCtx), 1, uintptr(unsafe.Pointer(&cbs[0])))
	if e != 0 || r != 1 {
		t.Fatalf("io_submit: %d %v", r, e)
	}
	want["io_submit direct.img"]++
	time.Sleep(100 * time.Millisecond)
	tr.Drain()

	got := map[string]int{}
	var gotBytes int64
	for {
		ev, err := tr.Read()
		if errors.Is(err, ErrDrained) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Names) == 0 || (ev.Names[0] != "direct.img" && ev.Names[0] != "buffered.qcow2") {
			continue
		}
		key := ev.Op.String() + " " + ev.Names[0]
		got[key]++
		if ev.Op != HVIOSubmit {
			gotBytes += ev.Ret
		} else if ev.Nr != 1 || ev.Opcode != 1 || ev.Ret != 1 {
			t.Errorf("io_submit event: nr %d opcode %d ret %d, want 1, 1 (IOCB_CMD_PWRITE), 1", ev.Nr, ev.Opcode, ev.Ret)
		}
		if wantDirect := ev.Names[0] == "direct.img"; ev.ODirect != wantDirect {
			t.Errorf("%s: O_DIRECT %v, want %v", key, ev.ODirect, wantDirect)
		}
		if ev.EndNs < ev.StartNs || ev.PID != uint32(os.Getpid()) {
			t.Errorf("%s: start %d end %d pid %d", key, ev.StartNs, ev.EndNs, ev.PID)
		}
	}
	t.Logf("traced %v, %d bytes", got, gotBytes)
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: traced %d calls, made %d", k, got[k], n)
		}
	}
	if gotBytes != wantBytes {
		t.Errorf("traced %d bytes, the calls returned %d", gotBytes, wantBytes)
	}
	if lost, err := tr.Lost(); err != nil || lost != 0 {
		t.Errorf("lost %d events (%v)", lost, err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
