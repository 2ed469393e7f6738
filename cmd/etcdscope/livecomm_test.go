package main

import (
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/exporter"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/render"
)

// fsyncerMain is this test binary as a process of another user
// (ETCDSCOPE_TEST_FSYNCER=FILE): as ETCDSCOPE_TEST_UID, one locked thread
// per comm of ETCDSCOPE_TEST_COMMS (hex, comma-separated) names itself
// with PR_SET_NAME and fdatasyncs FILE, in turn (once each, in order) or,
// with ETCDSCOPE_TEST_LOOP=1, every 20 ms each until killed; with
// ETCDSCOPE_TEST_WAIT=1, after reading a byte from stdin.
func fsyncerMain(file string) int {
	if uid, err := strconv.Atoi(os.Getenv("ETCDSCOPE_TEST_UID")); err == nil {
		if err := syscall.Setgid(uid); err != nil {
			fmt.Fprintln(os.Stderr, "setgid:", err)
			return 1
		}
		if err := syscall.Setuid(uid); err != nil {
			fmt.Fprintln(os.Stderr, "setuid:", err)
			return 1
		}
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var comms []string
	for _, h := range strings.Split(os.Getenv("ETCDSCOPE_TEST_COMMS"), ",") {
		b, err := hex.DecodeString(h)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		comms = append(comms, string(b))
	}
	loop := os.Getenv("ETCDSCOPE_TEST_LOOP") == "1"
	if os.Getenv("ETCDSCOPE_TEST_WAIT") == "1" {
		os.Stdin.Read(make([]byte, 1)) // the go from the test
	}
	fsyncAs := func(comm string) {
		unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(unsafeBytePtr(comm))), 0, 0, 0)
		f.Write([]byte{'x'})
		unix.Fdatasync(int(f.Fd()))
	}
	if !loop {
		runtime.LockOSThread() // never unlocked: the renamed thread exits with the process
		for _, c := range comms {
			fsyncAs(c)
		}
		return 0
	}
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			runtime.LockOSThread()
			for {
				fsyncAs(c)
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	wg.Wait() // forever: killed
	return 0
}

// fsyncer starts fsyncerMain with comms as uid, on a file in a directory
// every user can write; loop as fsyncerMain takes it.
func fsyncer(t *testing.T, self string, uid int, loop bool, comms ...string) *exec.Cmd {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "etcdscope-test-fsyncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(file, 0o666)
	var hx []string
	for _, c := range comms {
		hx = append(hx, hex.EncodeToString([]byte(c)))
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_FSYNCER="+file, "ETCDSCOPE_TEST_UID="+strconv.Itoa(uid), "ETCDSCOPE_TEST_COMMS="+strings.Join(hx, ","))
	if loop {
		cmd.Env = append(cmd.Env, "ETCDSCOPE_TEST_LOOP=1")
	}
	return cmd
}

// TestLiveCommsEscaped (issue 25): a process of another user (uid 65534)
// whose threads name themselves with each class of hostileStrings (cut to
// a comm's 15 bytes) and fdatasync, traced by the real `etcdscope fsync
// --pid`: the table shows each comm escaped (render.Escape), and nothing on
// stdout is a raw control or invalid UTF-8.
func TestLiveCommsEscaped(t *testing.T) {
	testenv.RequireRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var comms []string
	for _, class := range []string{"esc", "cr", "utf8", "c1", "bidi"} {
		c := hostileStrings[class] + "-" + class
		comms = append(comms, c[:min(len(c), 15)])
	}
	child := fsyncer(t, self, 65534, true, comms...)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	cmd := exec.Command(self, "fsync", "--pid", strconv.Itoa(child.Process.Pid), "--duration", "2s")
	cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("etcdscope fsync: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	if i := rawControl(out); i >= 0 {
		t.Errorf("%q raw on stdout at byte %d:\n%q", out[i], i, out)
	}
	for _, c := range comms {
		if !strings.Contains(out, render.Escape(c)) {
			t.Errorf("the table lacks comm %q escaped (%s):\n%s", c, render.Escape(c), out)
		}
	}
}

// TestServeKeepsOperatorsComm (issue 25): the real `etcdscope serve` (the
// operator watches etcd, its default) traces a process of another user
// (uid 65534, --pid: the host's own etcd stays out) whose threads first
// fill every comm slot (MaxComms + 24 comms, one fdatasync each), then name
// themselves etcd and fdatasync 3 times: those 3 are under comm="etcd", and
// the others' overflow under comm="other". Before, the slots were first
// come and held for 15 minutes: etcd's fsyncs went to "other". (The pod
// series' bound: exporter TestOperatorsCommKeepsItsSeries.)
func TestServeKeepsOperatorsComm(t *testing.T) {
	testenv.RequireRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var comms []string
	for i := range exporter.MaxComms + 24 {
		comms = append(comms, fmt.Sprintf("squat%03d", i))
	}
	comms = append(comms, "etcd", "etcd", "etcd")
	child := fsyncer(t, self, 65534, false, comms...)
	child.Env = append(child.Env, "ETCDSCOPE_TEST_WAIT=1")
	gate, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var childOut strings.Builder
	child.Stdout, child.Stderr = &childOut, &childOut
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	addr, _ := startServe(t, self, "--pid", strconv.Itoa(child.Process.Pid), "--listen", "127.0.0.1:0", "--port", "23818")
	gate.Write([]byte{1})
	if err := child.Wait(); err != nil {
		t.Fatalf("fsyncer: %v\n%s", err, childOut.String())
	}
	// Scrape until every fdatasync the child made (one per comm) is
	// counted, not after a fixed wait for the ring to drain.
	var count map[string]float64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		body, err := get("http://"+addr+"/metrics", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		count = map[string]float64{}
		total := 0.0
		for _, l := range strings.Split(body, "\n") {
			if !strings.HasPrefix(l, "etcdscope_fsync_duration_seconds_count{") {
				continue
			}
			i := strings.Index(l, `comm="`)
			v := l[i+6:]
			n, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			count[v[:strings.IndexByte(v, '"')]] += n
			total += n
		}
		if total >= float64(len(comms)) || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("fdatasync counts by comm: etcd %v, other %v, %d comms", count["etcd"], count[exporter.OtherLabel], len(count))
	if count["etcd"] != 3 {
		t.Errorf("comm=\"etcd\" counts %v fsyncs, want the 3 made after %d comms of another user:\n%v", count["etcd"], len(comms)-3, count)
	}
	if count[exporter.OtherLabel] == 0 {
		t.Errorf("no comm=%q: the %d comms did not fill the slots (the test did not test)", exporter.OtherLabel, len(comms)-3)
	}
}
