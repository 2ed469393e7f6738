package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
)

// children holds every process benchrun started and has not reaped, so an
// interrupt can end them (and only them) by pid.
var children = struct {
	sync.Mutex
	m map[int]*exec.Cmd
}{m: map[int]*exec.Cmd{}}

func startChild(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	children.Lock()
	children.m[cmd.Process.Pid] = cmd
	children.Unlock()
	return nil
}

func waitChild(cmd *exec.Cmd) error {
	err := cmd.Wait()
	children.Lock()
	delete(children.m, cmd.Process.Pid)
	children.Unlock()
	return err
}

// killChildren ends every child's process group (fio forks its job
// workers into the group), undoes what the run set up on the host and
// has not undone (runUndos: loop filesystems, cgroups), and removes every
// scratch directory still there: on SIGINT/SIGTERM as on a return.
func killChildren() {
	children.Lock()
	for pid, cmd := range children.m {
		syscall.Kill(-pid, syscall.SIGKILL)
		cmd.Process.Wait()
	}
	children.Unlock()
	runUndos()
	scratch.Lock()
	defer scratch.Unlock()
	for d := range scratch.m {
		os.RemoveAll(d)
	}
}

// undos holds what the run set up on the host and has not undone yet,
// for killChildren.
var undos = struct {
	sync.Mutex
	m map[*func()]bool
}{m: map[*func()]bool{}}

// onInterrupt registers undo, which undoes something the run set up on the
// host (a loop filesystem, a cgroup), and returns the function that runs
// it once and forgets it, for the run's defer; killChildren runs whatever
// is still registered when SIGINT or SIGTERM cuts the run short. A second
// caller waits for the first to finish.
func onInterrupt(undo func()) func() {
	var once sync.Once
	key := new(func())
	*key = func() {
		once.Do(func() {
			undos.Lock()
			delete(undos.m, key)
			undos.Unlock()
			undo()
		})
	}
	undos.Lock()
	undos.m[key] = true
	undos.Unlock()
	return *key
}

// runUndos runs every registered undo (onInterrupt).
func runUndos() {
	undos.Lock()
	var fs []func()
	for k := range undos.m {
		fs = append(fs, *k)
	}
	undos.Unlock()
	for _, f := range fs {
		f()
	}
}

// scratch holds the temporary directories in use, for killChildren.
var scratch = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

// mkScratch makes a temporary directory under parent that an interrupt
// also removes; the caller removes it with dropScratch.
func mkScratch(parent, pattern string) (string, error) {
	d, err := os.MkdirTemp(parent, pattern)
	if err == nil {
		scratch.Lock()
		scratch.m[d] = true
		scratch.Unlock()
	}
	return d, err
}

func dropScratch(d string) {
	os.RemoveAll(d)
	scratch.Lock()
	delete(scratch.m, d)
	scratch.Unlock()
}

// tracerProc is one running tracer: etcdscope, bpftrace or biolatency.
type tracerProc struct {
	kind    string
	cmd     *exec.Cmd
	dir     string
	stdout  string
	stderr  string
	started time.Time
	readyIn time.Duration // start until probes attached
	// bpftrace readiness: its program fd count and since when it held.
	lastProgs   int
	steadySince time.Time
	done        chan error
}

// startTracer starts a tracer of the fsyncs of comm and returns once its
// probes are attached: etcdscope's --ready-file; bpftrace's "Attaching N
// probes" line and then N programs open in the process; biolatency's
// "Tracing" line.
func startTracer(kind, comm, etcdscope, btScript string) (*tracerProc, error) {
	return startTracerIn("", kind, comm, etcdscope, btScript)
}

// startTracerIn is startTracer with the tracer started inside cgroup (a
// cgroup directory whose cgroup.procs it joins; "": benchrun's own).
func startTracerIn(cgroup, kind, comm, etcdscope, btScript string) (*tracerProc, error) {
	dir, err := mkScratch("/dev/shm", "etcdscope-bench-")
	if err != nil {
		return nil, fmt.Errorf("creating scratch directory: %w", err)
	}
	t := &tracerProc{kind: kind, dir: dir, stdout: filepath.Join(dir, "stdout"), stderr: filepath.Join(dir, "stderr"), done: make(chan error, 1)}
	ready := filepath.Join(dir, "ready")
	// "etcdscope+writes": etcdscope with an opt-in probe set (--writes).
	base, flag, _ := strings.Cut(kind, "+")
	switch base {
	case "etcdscope":
		t.cmd = exec.Command(etcdscope, "fsync", "--comm", comm, "--output", "json", "--interval", "0", "--ready-file", ready)
	case "etcdscope-table": // the default output: a report at exit, nothing per fsync
		t.cmd = exec.Command(etcdscope, "fsync", "--comm", comm, "--interval", "0", "--ready-file", ready)
	case "bpftrace", "bpftrace-fdatasync":
		// Line-buffered so "Attaching N probes..." reaches the file now.
		t.cmd = exec.Command("stdbuf", "-oL", "bpftrace", btScript, comm)
	case "biolatency":
		t.cmd = exec.Command("biolatency-bpfcc")
	case "etcdscope-peers": // comm is the port
		t.cmd = exec.Command(etcdscope, "peers", "--port", comm, "--ready-file", ready)
	case "etcdscope-peers-json": // comm is the port
		t.cmd = exec.Command(etcdscope, "peers", "--port", comm, "--output", "json", "--duration", "0", "--ready-file", ready)
	case "etcdscope-commit": // comm is etcd's pid
		t.cmd = exec.Command(etcdscope, "commit", "--pid", comm, "--duration", "0", "--ready-file", ready)
	case "etcdscope-serve": // comm is etcd's pid
		t.cmd = exec.Command(etcdscope, "serve", "--pid", comm, "--listen", "127.0.0.1:0", "--ready-file", ready)
	case "etcdscope-serve-commit": // comm is etcd's pid
		t.cmd = exec.Command(etcdscope, "serve", "--pid", comm, "--commit-pid", comm, "--etcd-endpoints", "http://"+commitClient,
			"--listen", "127.0.0.1:0", "--ready-file", ready)
	case "bpftrace-commit": // comm is etcd's pid, btScript the script with its binary filled in
		t.cmd = exec.Command("stdbuf", "-oL", "bpftrace", "-p", comm, btScript)
	default:
		return nil, fmt.Errorf("unknown tracer %q", kind)
	}
	out, err := os.Create(t.stdout)
	if err != nil {
		dropScratch(dir)
		return nil, err
	}
	defer out.Close()
	errf, err := os.Create(t.stderr)
	if err != nil {
		dropScratch(dir)
		return nil, err
	}
	defer errf.Close()
	for _, flag := range strings.Split(flag, "+") { // "etcdscope+dev+kernel-partition": each
		switch flag {
		case "":
		case "dev": // the disk under fio's directory
			t.cmd.Args = append(t.cmd.Args, "--dev", benchDisk)
		default:
			t.cmd.Args = append(t.cmd.Args, "--"+flag)
		}
	}
	if cgroup != "" {
		// The shell moves itself into the cgroup, then becomes the tracer.
		t.cmd = exec.Command("sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cgroup}, t.cmd.Args...)...)
	}
	t.cmd.Stdout, t.cmd.Stderr = out, errf
	t.started = time.Now()
	if err := startChild(t.cmd); err != nil {
		dropScratch(dir)
		return nil, fmt.Errorf("starting %s: %w", kind, err)
	}
	go func() { t.done <- waitChild(t.cmd) }()

	deadline := t.started.Add(30 * time.Second)
	for {
		select {
		case err := <-t.done:
			msg := head(t.stderr, 2)
			dropScratch(dir)
			return nil, fmt.Errorf("%s exited before it was ready (%v): %s", kind, err, msg)
		default:
		}
		if time.Now().After(deadline) {
			t.stop()
			return nil, fmt.Errorf("%s not ready after 30 s: %s", kind, tail(t.stderr, 3))
		}
		if t.isReady(ready) {
			t.readyIn = time.Since(t.started)
			return t, nil
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (t *tracerProc) isReady(readyFile string) bool {
	switch base, _, _ := strings.Cut(t.kind, "+"); base {
	case "etcdscope", "etcdscope-table", "etcdscope-commit", "etcdscope-peers", "etcdscope-peers-json", "etcdscope-serve", "etcdscope-serve-commit":
		_, err := os.Stat(readyFile)
		return err == nil
	case "bpftrace", "bpftrace-fdatasync", "bpftrace-commit":
		// bpftrace prints "Attaching N probes..." and then attaches; it
		// says nothing when done, so wait until its program fds have been
		// steady for 300 ms after the line.
		b, _ := os.ReadFile(t.stdout)
		if !bytes.Contains(b, []byte("Attaching ")) {
			return false
		}
		n := len(progFDs(t.cmd.Process.Pid))
		if n == 0 || n != t.lastProgs {
			t.lastProgs, t.steadySince = n, time.Now()
			return false
		}
		return time.Since(t.steadySince) >= 300*time.Millisecond
	case "biolatency":
		b, _ := os.ReadFile(t.stdout)
		return bytes.Contains(b, []byte("Tracing"))
	}
	return false
}

// stop interrupts the tracer (SIGINT: each prints its summary and exits),
// waits for it and removes its scratch directory; it returns the tracer's
// stdout.
func (t *tracerProc) stop() ([]byte, error) {
	defer dropScratch(t.dir)
	t.cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-t.done:
	case <-time.After(60 * time.Second):
		syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
		<-t.done
		if !strings.HasPrefix(t.kind, "etcdscope") {
			// Seen with bpftrace under load: detaching waits for RCU
			// grace periods. Its numbers were sampled before stop and it
			// has no summary to read: note it and go on.
			logf("%s did not exit 60 s after SIGINT: killed", t.kind)
			return nil, nil
		}
		return nil, fmt.Errorf("%s did not exit 60 s after SIGINT", t.kind)
	}
	out, rerr := os.ReadFile(t.stdout)
	if err != nil {
		var ee *exec.ExitError
		// bpftrace and bcc exit non-zero on SIGINT on some versions.
		if !errors.As(err, &ee) || strings.HasPrefix(t.kind, "etcdscope") {
			return out, fmt.Errorf("%s: %w: %s", t.kind, err, tail(t.stderr, 3))
		}
	}
	return out, rerr
}

// head returns the first n lines of a file that say something (bcc's
// reason comes before its traceback).
func head(path string, n int) string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && len(out) < n {
			out = append(out, l)
		}
	}
	return strings.Join(out, " | ")
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// procSample is a process's CPU time and peak RSS (VmHWM from
// /proc/PID/status). CPU time is the sum of its threads' sum_exec_runtime
// (/proc/PID/task/*/schedstat, ns): utime+stime of /proc/PID/stat are
// scaled from 10 ms tick samples and read about half the real figure for a
// process that runs in bursts of well under a tick, as a polling tracer
// does. Threads that exit between two samples are not counted; Go's are
// kept for the process's life.
type procSample struct {
	cpuNs     int64
	vmHWMKiB  int64
	vmRSSKiB  int64
	sampledAt time.Time
}

func sampleProc(pid int) (procSample, error) {
	s := procSample{sampledAt: time.Now()}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return s, fmt.Errorf("no threads of pid %d in /proc", pid)
	}
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		// schedstat: time on CPU (ns), time waiting to run (ns), timeslices
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			s.cpuNs += ns
		}
	}
	status, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	defer status.Close()
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			s.vmHWMKiB, _ = strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			s.vmRSSKiB, _ = strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return s, nil
}

// progStat is one BPF program's cumulative cost while
// kernel.bpf_stats_enabled=1, from /proc/PID/fdinfo of a prog fd.
type progStat struct {
	ID              uint32
	Name            string
	RunTimeNs       uint64
	RunCnt          uint64
	RecursionMisses uint64
}

// progFDs lists the fds of pid that are BPF programs.
func progFDs(pid int) []string {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	var fds []string
	for _, e := range ents {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if err == nil && l == "anon_inode:bpf-prog" {
			fds = append(fds, e.Name())
		}
	}
	return fds
}

// progStats reads every BPF program pid holds, deduplicated by id. The
// name comes from bpf_prog_info (15 bytes, as bpftool shows it).
func progStats(pid int) []progStat {
	seen := map[uint32]bool{}
	var out []progStat
	for _, fd := range progFDs(pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd))
		if err != nil {
			continue
		}
		var p progStat
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			switch k {
			case "prog_id":
				p.ID = uint32(n)
			case "run_time_ns":
				p.RunTimeNs = n
			case "run_cnt":
				p.RunCnt = n
			case "recursion_misses":
				p.RecursionMisses = n
			}
		}
		if p.ID == 0 || seen[p.ID] {
			continue
		}
		seen[p.ID] = true
		p.Name = fmt.Sprintf("id %d", p.ID)
		if prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(p.ID)); err == nil {
			if info, err := prog.Info(); err == nil && info.Name != "" {
				p.Name = info.Name
			}
			prog.Close()
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func sumRunTime(ps []progStat) (ns, cnt uint64) {
	for _, p := range ps {
		ns += p.RunTimeNs
		cnt += p.RunCnt
	}
	return
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// for a churn section's tracer and fsyncgen -churn (which listens on it):
// a fixed port collided when two sessions ran benchrun at once.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("picking a free port: %w", err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}
