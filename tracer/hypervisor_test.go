package tracer

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestHypervisorTracerSyscalls makes the calls QEMU's aio modes make, on an
// O_DIRECT file and a buffered one, and checks the tracer saw exactly those
// (counts, byte counts from the calls' own return values, fd, file name,
// O_DIRECT) and nothing was lost.
func TestHypervisorTracerSyscalls(t *testing.T) {
	testenv.RequireRoot(t)
	hypervisorSyscalls(t, "/var/tmp")
}

// hypervisorSyscalls is TestHypervisorTracerSyscalls with its files in a
// directory under parent, which must take O_DIRECT (not tmpfs before 6.6).
func hypervisorSyscalls(t *testing.T, parent string) {
	dir, err := os.MkdirTemp(parent, "etcdscope-hv-")
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
			t.Logf("probe %s not attached: %+v", p.Name, p)
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
	var ev event.HypervisorIO
	for {
		err := tr.Read(&ev)
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
		if ev.Op != event.HVIOSubmit {
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

// TestHypervisorTracerIOUring submits one IORING_OP_FSYNC (what QEMU's
// aio=io_uring does for a guest flush) through a ring set up by hand, and
// checks the tracer saw the io_uring_enter call and the request, on the
// right file, with the result the completion queue reported.
func TestHypervisorTracerIOUring(t *testing.T) {
	testenv.RequireRoot(t)
	if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil && len(b) > 0 && b[0] != '0' {
		testenv.Missing(t, "io_uring is disabled on this host (sysctl kernel.io_uring_disabled=0)")
	}
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
			t.Fatalf("probe %s not attached: %+v", p.Name, p)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "uring.img"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write(make([]byte, 4096))

	// struct io_uring_params: 10 u32, then io_sqring_offsets and
	// io_cqring_offsets (8 u32 + u64 each).
	var p struct {
		sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
		resv                                                                   [3]uint32
		sqOff                                                                  struct {
			head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
			userAddr                                                        uint64
		}
		cqOff struct {
			head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
			userAddr                                                        uint64
		}
	}
	ringFd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		t.Fatalf("io_uring_setup: %v", e)
	}
	defer unix.Close(int(ringFd))
	sq, err := unix.Mmap(int(ringFd), 0, int(p.sqOff.array+p.sqEntries*4), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(sq)
	cq, err := unix.Mmap(int(ringFd), 0x8000000, int(p.cqOff.cqes+p.cqEntries*16), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(cq)
	sqes, err := unix.Mmap(int(ringFd), 0x10000000, int(p.sqEntries*64), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(sqes)
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	tail := *u32(sq, p.sqOff.tail)
	idx := tail & *u32(sq, p.sqOff.ringMask)
	sqe := sqes[idx*64 : idx*64+64]
	clear(sqe)
	sqe[0] = 3                                         // IORING_OP_FSYNC
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(f.Fd()) // fd
	*(*uint64)(unsafe.Pointer(&sqe[32])) = 0xe7cd5c09e // user_data
	*u32(sq, p.sqOff.array+idx*4) = idx
	*u32(sq, p.sqOff.tail) = tail + 1 // the kernel reads it in io_uring_enter
	n, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, ringFd, 1, 1, 1 /* IORING_ENTER_GETEVENTS */, 0, 0)
	if e != 0 || n != 1 {
		t.Fatalf("io_uring_enter: %d %v", n, e)
	}
	head := *u32(cq, p.cqOff.head)
	if *u32(cq, p.cqOff.tail) == head {
		t.Fatal("no completion")
	}
	cqe := p.cqOff.cqes + (head&*u32(cq, p.cqOff.ringMask))*16
	res := *(*int32)(unsafe.Pointer(&cq[cqe+8]))
	time.Sleep(100 * time.Millisecond)
	tr.Drain()

	var enters, reqs int
	var ev event.HypervisorIO
	for {
		err := tr.Read(&ev)
		if errors.Is(err, ErrDrained) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Op == event.HVIOUringEnter && ev.FD == int32(ringFd):
			enters++
			if ev.Nr != 1 || ev.Ret != 1 {
				t.Errorf("io_uring_enter: to_submit %d ret %d, want 1 and 1", ev.Nr, ev.Ret)
			}
		case ev.Op == event.HVIOUringReq:
			reqs++
			if ev.Opcode != 3 || ev.FD != int32(f.Fd()) || len(ev.Names) == 0 || ev.Names[0] != "uring.img" || ev.Ret != int64(res) || ev.EndNs < ev.StartNs {
				t.Errorf("io_uring request %+v; want IORING_OP_FSYNC (3) on fd %d uring.img, res %d", ev, f.Fd(), res)
			}
		}
	}
	t.Logf("%d io_uring_enter, %d io_uring requests (cqe res %d)", enters, reqs, res)
	if enters != 1 || reqs != 1 {
		t.Errorf("saw %d io_uring_enter and %d requests, made 1 and 1", enters, reqs)
	}
}
