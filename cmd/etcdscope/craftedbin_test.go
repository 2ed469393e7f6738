package main

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestCommitCraftedBinary: a local user runs a process named etcd from a
// binary whose Go function table is forged, and root points commit and
// serve at it. The binary runs (the loader ignores section headers): its
// .gopclntab section header points at a copy of the table appended to the
// file, whose function count is 2^32-1. Both refuse it within 10 s, exit
// 2, one line naming the fix, under a 16 GiB address-space limit (this
// host's overcommit would let a 412 GB reservation through: the limit makes
// it fail as a node's memory would). Before: debug/gosym made a 412 GB slice
// of the forged count, a fatal "out of memory" (exit 2 with a runtime
// stack, no line), or with serve an exit 1. The limit was 2 GiB until serve
// failed under it in a clean-clone run (pthread_create: EAGAIN at 369 ms:
// serve maps its BPF rings into its address space); 16 GiB is 25 times
// below the forged reservation.
func TestCommitCraftedBinary(t *testing.T) {
	testenv.RequireRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := forgeFuncCount(t, self)
	child := exec.Command(bin)
	child.Env = append(os.Environ(), "ETCDSCOPE_TEST_SLEEP=1")
	gate, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { gate.Close(); child.Wait() }()
	pid := strconv.Itoa(child.Process.Pid)
	for _, args := range [][]string{
		{"commit", "--pid", pid, "--duration", "1s"},
		{"serve", "--commit-pid", pid, "--listen", "127.0.0.1:0", "--port", "23819"},
	} {
		cmd := exec.Command("prlimit", append([]string{"--as=" + strconv.Itoa(16<<30), self}, args...)...)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		timer := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
		cmd.Wait()
		timer.Stop()
		took := time.Since(start)
		rc := cmd.ProcessState.ExitCode()
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		t.Logf("%s: exit %d in %v: %s", args[0], rc, took.Round(time.Millisecond), stderr.String())
		if rc != 2 || len(lines) != 1 || !strings.Contains(lines[0], "not an etcd this etcdscope can probe") || stdout.Len() != 0 {
			t.Errorf("%s on a forged binary: exit %d, %d lines, stdout %q: want exit 2 and one line naming the fix", args, rc, len(lines), stdout.String())
		}
	}
}

// forgeFuncCount writes a copy of exe whose .gopclntab section header
// points at a copy of the table, appended, that lists 2^32-1 functions.
func forgeFuncCount(t *testing.T, exe string) string {
	t.Helper()
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pcln := f.Section(".gopclntab")
	shoff := binary.LittleEndian.Uint64(data[0x28:])
	var shdr uint64
	for i, s := range f.Sections {
		if s == pcln {
			shdr = shoff + uint64(i)*64
		}
	}
	forged := append([]byte(nil), data[pcln.Offset:pcln.Offset+pcln.Size]...)
	binary.LittleEndian.PutUint64(forged[8:], 1<<32-1)
	binary.LittleEndian.PutUint64(data[shdr+24:], uint64(len(data))) // sh_offset
	data = append(data, forged...)
	dir, err := os.MkdirTemp("/var/tmp", "etcdscope-test-crafted-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "etcd")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
