// Package e2e runs the etcdscope binary as a user would (as root), against
// real workloads (fio, etcd, filesystems on loop devices), and checks its
// numbers against independent oracles: fio's JSON, etcd's metrics and the
// kernel's own block tracepoints read through ftrace.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// etcdscope builds the binary once per test run and returns its path.
func etcdscope(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "etcdscope-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "etcdscope")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/etcdscope").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// trace is a running etcdscope command (`fsync --output json` unless
// started otherwise through startIn).
type trace struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
}

// startFsync starts `etcdscope fsync --output json <args>` and waits until
// its probes are attached (--ready-file).
func startFsync(t *testing.T, args ...string) *trace {
	t.Helper()
	return startFsyncIn(t, "", args...)
}

// startFsyncIn is startFsync with etcdscope started inside cgroup v2
// directory cgroup ("": this process's).
func startFsyncIn(t *testing.T, cgroup string, args ...string) *trace {
	t.Helper()
	return startIn(t, cgroup, "fsync", append([]string{"--output", "json", "--interval", "0"}, args...)...)
}

// etcdscopeIn is the command `etcdscope args...` run inside cgroup ("":
// this process's; else a directory whose cgroup.procs it joins: a shell
// moves itself there, then becomes etcdscope, so every thread starts in it).
func etcdscopeIn(t *testing.T, cgroup string, args ...string) *exec.Cmd {
	t.Helper()
	if cgroup == "" {
		return exec.Command(etcdscope(t), args...)
	}
	return exec.Command("sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cgroup, etcdscope(t)}, args...)...)
}

// startIn starts `etcdscope cmd --ready-file F <args>` inside cgroup
// ("": this process's; else a directory whose cgroup.procs it joins) and
// waits until its probes are attached.
func startIn(t *testing.T, cgroup, cmd string, args ...string) *trace {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	tr := &trace{t: t}
	all := append([]string{cmd, "--ready-file", ready}, args...)
	tr.cmd = etcdscopeIn(t, cgroup, all...)
	tr.cmd.Stdout, tr.cmd.Stderr = &tr.stdout, &tr.stderr
	if err := tr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if tr.cmd.ProcessState == nil {
			tr.cmd.Process.Kill()
			tr.cmd.Wait()
		}
	})
	// 90 s: under the VM rig's software emulation loading and verifying
	// the programs takes tens of seconds (dm_vm_test.go).
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			return tr
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcdscope not ready after 90 s; stderr:\n%s", tr.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGINT (what Ctrl-C does), waits, and parses the output.
func (tr *trace) stop() ([]analysis.FsyncRecord, analysis.Report) {
	tr.t.Helper()
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		tr.t.Fatalf("etcdscope: %v; stderr:\n%s", err, tr.stderr.String())
	}
	return parseOutput(tr.t, tr.stdout.Bytes())
}

func parseOutput(t *testing.T, out []byte) ([]analysis.FsyncRecord, analysis.Report) {
	t.Helper()
	recs, _, err := analysis.ReadJSONL(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("parsing output: %v", err)
	}
	var rep analysis.Report
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &rep); err != nil || rep.Type != "summary" {
		t.Fatalf("last line is not a summary: %s", lines[len(lines)-1])
	}
	return recs, rep
}

// checkPartition asserts the invariant every record must hold: the layers
// sum exactly to the wall time.
func checkPartition(t *testing.T, recs []analysis.FsyncRecord) {
	t.Helper()
	for _, r := range recs {
		if r.Layers.Sum() != r.TotalNs || r.TotalNs != int64(r.EndNs-r.StartNs) {
			t.Fatalf("layers %+v sum to %d, total %d, end-start %d", r.Layers, r.Layers.Sum(), r.TotalNs, r.EndNs-r.StartNs)
		}
	}
}

// run runs a command and fails the test with its output on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// loopDevice attaches a sparse backing file of size bytes under dir to a
// free loop device and returns its path (/dev/loopN); it is detached at
// cleanup.
func loopDevice(t *testing.T, dir string, size int64) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "etcdscope-loop-*.img")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { os.Remove(f.Name()) })
	return loopDeviceOf(t, f.Name())
}

// loopDeviceOf attaches img to a free loop device (detached at cleanup).
func loopDeviceOf(t *testing.T, img string) string {
	t.Helper()
	testenv.LookPath(t, "losetup", "util-linux")
	dev := run(t, "losetup", "--find", "--show", img)
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// mountFS makes filesystem fstype on dev and mounts it on a temp dir.
func mountFS(t *testing.T, dev, fstype string, mkfsArgs ...string) string {
	t.Helper()
	mkfs := "mkfs." + fstype
	pkg := map[string]string{"ext4": "e2fsprogs", "xfs": "xfsprogs", "btrfs": "btrfs-progs"}[fstype]
	testenv.LookPath(t, mkfs, pkg)
	args := append(append([]string{}, mkfsArgs...), dev)
	run(t, mkfs, args...)
	mnt := t.TempDir()
	run(t, "mount", "-t", fstype, dev, mnt)
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	return mnt
}

// kernelDev returns the kernel dev_t (major<<20|minor) of a block device
// node, as ftrace filters and prints it.
func kernelDev(t *testing.T, path string) (uint32, string) {
	t.Helper()
	name := filepath.Base(path)
	b, err := os.ReadFile("/sys/class/block/" + name + "/dev")
	if err != nil {
		t.Fatal(err)
	}
	var maj, min uint32
	fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &maj, &min)
	return maj<<20 | min, fmt.Sprintf("%d,%d", maj, min)
}

// ftraceFlushes is the independent oracle for flush counts: an ftrace
// instance of its own recording block_rq_complete on one disk with the
// CLOCK_MONOTONIC clock, decoded from the kernel's rwbs text.
type ftraceFlushes struct {
	t   *testing.T
	dir string
}

func startFtrace(t *testing.T, dev uint32) *ftraceFlushes {
	t.Helper()
	dir := ftraceInstance(t, "etcdscope-e2e", [][2]string{{"buffer_size_kb", "16384"}, {"trace_clock", "mono"},
		{"events/block/block_rq_complete/filter", fmt.Sprintf("dev == %d", dev)},
		{"events/block/block_rq_complete/enable", "1"}})
	return &ftraceFlushes{t: t, dir: dir}
}

// ftraceInstance makes an ftrace instance of this process's own (name-pid),
// removed at cleanup, and writes each {file, value} into it in order.
func ftraceInstance(t *testing.T, name string, settings [][2]string) string {
	t.Helper()
	root := "/sys/kernel/tracing"
	if _, err := os.Stat(root + "/instances"); err != nil {
		run(t, "mount", "-t", "tracefs", "nodev", root)
	}
	dir := filepath.Join(root, "instances", fmt.Sprintf("%s-%d", name, os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	for _, kv := range settings {
		if err := os.WriteFile(filepath.Join(dir, kv[0]), []byte(kv[1]), 0o644); err != nil {
			t.Fatalf("ftrace %s: %v", kv[0], err)
		}
	}
	return dir
}

// flushTimes stops tracing and returns the completion time (µs, mono) of
// every request whose rwbs shows a flush (REQ_PREFLUSH, REQ_OP_FLUSH or
// REQ_FUA: any F in blk_fill_rwbs' output).
func (f *ftraceFlushes) flushTimes() ([]uint64, []string) {
	f.t.Helper()
	var out []uint64
	var lines []string
	for _, c := range (&ftraceAll{t: f.t, dir: f.dir}).completions() {
		if strings.Contains(c.rwbs, "F") {
			out = append(out, c.us)
			lines = append(lines, c.line)
		}
	}
	return out, lines
}

// inWindows counts the times (µs, as ftrace prints them) that lie inside
// a record's [start, end] (ns): sure counts those whose whole microsecond
// lies inside, edge those whose microsecond straddles a window's start or
// end, where ftrace's resolution cannot decide.
func inWindows(timesUs []uint64, recs []analysis.FsyncRecord) (sure, edge int) {
	for _, us := range timesUs {
		lo, hi := us*1000, us*1000+999
		for _, r := range recs {
			if lo >= r.StartNs && hi <= r.EndNs {
				sure++
				break
			}
			if hi >= r.StartNs && lo <= r.EndNs {
				edge++
				break
			}
		}
	}
	return sure, edge
}

// bpfObjectIDs returns the ids of the BPF programs and links that process
// pid holds open, read from the "prog_id:" and "link_id:" lines of its
// /proc/PID/fdinfo entries.
func bpfObjectIDs(t *testing.T, pid int) (progs, links []uint32) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil {
				continue
			}
			switch k {
			case "prog_id":
				progs = append(progs, uint32(n))
			case "link_id":
				links = append(links, uint32(n))
			}
		}
	}
	return progs, links
}
