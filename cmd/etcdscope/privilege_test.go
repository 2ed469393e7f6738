package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/netem"
)

// leastPrivilege is one row of the README's capability table: the
// subcommand run with exactly caps (and uid), which must succeed; then
// once per capability in caps with that one dropped, which must exit 2
// with one line naming it.
type leastPrivilege struct {
	args []string
	uid  int
	caps []string // setpriv names: bpf, perfmon, net_admin
	// ready: a long-running command, stopped with SIGTERM once this file
	// (the --ready-file in args, $D replaced) exists.
	ready string
}

// setprivArgs runs a command as uid with exactly caps: inheritable,
// ambient and bounding sets all set to caps, so nothing else can be
// regained (the DaemonSet's drop ALL + add).
func setprivArgs(uid int, caps []string) []string {
	set := "-all"
	for _, c := range caps {
		set += ",+" + c
	}
	args := []string{"--reuid", itoa(uid), "--regid", itoa(uid), "--clear-groups", "--inh-caps", set, "--bounding-set", set}
	if len(caps) > 0 {
		args = append(args, "--ambient-caps", set)
	}
	return args
}

func itoa(n int) string { return strconv.Itoa(n) }

// withTracefs is unshare's arguments to run a command (appended) in a
// private mount namespace where tracefs is mounted, by root before any
// capability is dropped, whether or not the host has it mounted.
func withTracefs() []string {
	return []string{"-m", "--propagation", "private", "sh", "-c",
		`grep -q ' /sys/kernel/tracing .* - tracefs ' /proc/self/mountinfo || mount -t tracefs nodev /sys/kernel/tracing; exec "$@"`, "sh"}
}

// TestLeastPrivilege runs every subcommand with the smallest capability
// set the README's table gives it (uid 0 with the rest dropped, as the
// DaemonSet runs; uid 65534 for the ones that need none) and RLIMIT_MEMLOCK
// 0 (CAP_SYS_RESOURCE is not in the DaemonSets: this kernel charges BPF
// memory to the memory cgroup), and checks that with any one of those
// capabilities missing it exits 2 naming it.
func TestLeastPrivilege(t *testing.T) {
	testenv.RequireRoot(t)
	setpriv := testenv.LookPath(t, "setpriv", "util-linux")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755) // t.TempDir's parent: uid 65534 reads the recordings
	prepareBadInputDir(t, dir)
	wl := filepath.Join(dir, "wl")
	os.Mkdir(wl, 0o700)
	tracing := []string{"bpf", "perfmon"}
	rows := []leastPrivilege{
		{args: []string{"fsync", "--workload", "wal", "--duration", "1s", "--interval", "0", "--dir", wl}, caps: tracing},
		{args: []string{"hypervisor", "--comm", "no-such-qemu", "--duration", "1s"}, caps: tracing},
		{args: []string{"peers", "--duration", "1s", "--port", "23827"}, caps: tracing},
		{args: []string{"serve", "--listen", "127.0.0.1:0", "--port", "23828", "--comm", "etcd", "--ready-file", "$D/serve.ready"}, caps: tracing, ready: "$D/serve.ready"},
		{args: []string{"report", "$D/good.jsonl"}, uid: 65534},
		{args: []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--delay", "1ms", "--dry-run"}, uid: 65534},
		{args: []string{"netem", "show", "--dev", "lo"}, uid: 65534},
		{args: []string{"check"}, caps: tracing},
		// A root etcd's /proc/PID/exe needs ptrace read access.
		{args: []string{"commit", "--pid", "$ETCD", "--duration", "1s"}, caps: []string{"bpf", "perfmon", "sys_ptrace"}},
	}
	etcdPID := strconv.Itoa(etcdtest.Start(t, etcdtest.Options{}).Members[0].PID)
	unshare := testenv.LookPath(t, "unshare", "util-linux")
	prlimit := testenv.LookPath(t, "prlimit", "util-linux")
	run := func(r leastPrivilege, caps []string) (int, string, string) {
		// In a private mount namespace that has tracefs mounted (by root,
		// before the capabilities are dropped), whether or not the host
		// has: the capabilities, not the host's mounts, are under test.
		// RLIMIT_MEMLOCK is 0 (soft and hard): no CAP_SYS_RESOURCE, no
		// locked memory, as the DaemonSets run; kernels 5.11+ charge BPF
		// memory to the memory cgroup instead.
		args := append(withTracefs(), prlimit, "--memlock=0:0", setpriv)
		args = append(append(args, setprivArgs(r.uid, caps)...), self)
		for _, a := range r.args {
			args = append(args, strings.ReplaceAll(strings.ReplaceAll(a, "$D", dir), "$ETCD", etcdPID))
		}
		cmd := exec.Command(unshare, args...)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if r.ready != "" {
			ready := strings.ReplaceAll(r.ready, "$D", dir)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					if _, err := os.Stat(ready); err == nil {
						cmd.Process.Signal(syscall.SIGTERM)
						return
					}
					if cmd.ProcessState != nil {
						return
					}
				}
				cmd.Process.Kill()
			}()
			cmd.Wait()
			<-done
		} else {
			cmd.Wait()
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	for _, r := range rows {
		t.Run(strings.Join(r.args[:1], " ")+" "+strings.Join(r.caps, "+"), func(t *testing.T) {
			rc, out, errOut := run(r, r.caps)
			want := 0
			if r.args[0] == "check" {
				want = 1 // sch_netem and NET_ADMIN are missing here: check says so
			}
			if rc != want {
				t.Fatalf("with uid %d caps %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.uid, r.caps, rc, want, out, errOut)
			}
			if r.args[0] == "fsync" && !strings.Contains(out, "etcdscope fsync report: ") {
				t.Errorf("fsync printed no report:\n%s", out)
			}
			for i, c := range r.caps {
				less := append(append([]string(nil), r.caps[:i]...), r.caps[i+1:]...)
				if r.args[0] == "check" {
					continue
				}
				rc, _, errOut := run(r, less)
				name := "CAP_" + strings.ToUpper(c)
				lines := strings.Split(strings.TrimSpace(errOut), "\n")
				if rc != 2 || len(lines) != 1 || !strings.Contains(lines[0], name) {
					t.Errorf("without %s: exit %d, stderr %q; want exit 2 and one line naming %s", name, rc, errOut, name)
				}
			}
		})
	}
}

// TestNonRootWithReadableTracefs: uid 65534 with only CAP_BPF and
// CAP_PERFMON traces fsyncs where the kernel allows it, i.e. where tracefs
// is readable. This machine's tracefs is mode 0700, so the test gives the
// run (in a private mount namespace: the host's tracefs is untouched) a
// readable copy of the tracepoint ids, all cilium/ebpf reads from it; the
// attach itself (perf_event_open, BPF_LINK_CREATE) is the kernel's, with
// exactly those capabilities. peers needs no tracefs at all.
func TestNonRootWithReadableTracefs(t *testing.T) {
	testenv.RequireRoot(t)
	setpriv := testenv.LookPath(t, "setpriv", "util-linux")
	unshare := testenv.LookPath(t, "unshare", "util-linux")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	tfs := filepath.Join(dir, "tracefs")
	src := "/sys/kernel/tracing"
	// Copied on a thread of its own in a private mount namespace with
	// tracefs mounted: the host may have none mounted, and must not get one.
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with its namespace
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- err
			return
		}
		unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
		if _, err := os.Stat(src + "/events"); err != nil {
			if err := unix.Mount("nodev", src, "tracefs", 0, ""); err != nil {
				errc <- fmt.Errorf("mounting tracefs in a private namespace: %w", err)
				return
			}
		}
		errc <- filepath.WalkDir(src+"/events", func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(src, p)
			if depth := strings.Count(rel, "/"); d.IsDir() && depth > 2 {
				return filepath.SkipDir
			}
			if d.IsDir() {
				return os.MkdirAll(filepath.Join(tfs, rel), 0o755)
			}
			if d.Name() == "id" {
				b, err := os.ReadFile(p)
				if err == nil {
					return os.WriteFile(filepath.Join(tfs, rel), b, 0o644)
				}
			}
			return nil
		})
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if ids, _ := filepath.Glob(filepath.Join(tfs, "events", "syscalls", "*", "id")); len(ids) == 0 {
		t.Fatalf("no syscall tracepoint ids copied into %s", tfs)
	}
	wl := filepath.Join(dir, "wl")
	os.Mkdir(wl, 0o700)
	os.Chown(wl, 65534, 65534)
	caps := setprivArgs(65534, []string{"bpf", "perfmon"})
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"fsync", []string{"fsync", "--workload", "wal", "--duration", "1s", "--interval", "0", "--dir", wl}, "etcdscope fsync report: "},
		{"peers", []string{"peers", "--duration", "1s", "--port", "23837"}, "etcdscope peers: "},
	} {
		// cilium/ebpf finds tracefs in mountinfo (mounted here by root if
		// the host has none) and reads the ids through the path, where
		// the readable copy is bound over it.
		script := "{ grep -q ' " + src + " .* - tracefs ' /proc/self/mountinfo || mount -t tracefs nodev " + src + "; } && mount --bind " + tfs + " " + src + " && exec " + setpriv + " " + strings.Join(caps, " ") + " " + self + " " + strings.Join(c.args, " ")
		cmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c", script)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%s as uid 65534 with CAP_BPF+CAP_PERFMON: %v\n%s", c.name, err, out)
		}
	}
}

// TestTracefsMountAfterSIGKILL: a run that had to mount tracefs and was
// killed with SIGKILL leaves the mount and its record
// (/run/etcdscope/tracefs.mount); the next run must find the record, remove
// the stale mount instead of taking it for the host's, and leave no mount
// at its own exit. In a private mount namespace with tracefs unmounted and
// a tmpfs /run, so the host is untouched.
func TestTracefsMountAfterSIGKILL(t *testing.T) {
	testenv.RequireRoot(t)
	unshare := testenv.LookPath(t, "unshare", "util-linux")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	script := `set -e
umount -l /sys/kernel/tracing 2>/dev/null || true # the host may have none
mount -t tmpfs none /run
mounts() { grep -c ' /sys/kernel/tracing .* - tracefs ' /proc/self/mountinfo || true; }
echo "before: $(mounts)"
"$ETCDSCOPE" fsync --duration 60s --interval 0 --ready-file "$READY" >/dev/null 2>&1 &
pid=$!
for i in $(seq 300); do [ -e "$READY" ] && break; sleep 0.1; done
kill -9 $pid; wait $pid 2>/dev/null || true
echo "after kill: $(mounts) record: $(cat /run/etcdscope/tracefs.mount 2>/dev/null | wc -l)"
"$ETCDSCOPE" fsync --duration 1s --interval 0 >/dev/null
echo "after next run: $(mounts) record: $(ls /run/etcdscope/tracefs.mount 2>/dev/null | wc -l)"
`
	cmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1", "ETCDSCOPE="+self, "READY="+ready)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("%v", err)
	}
	for _, want := range []string{"before: 0", "after kill: 1 record: 1", "after next run: 0 record: 0"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("want %q in the log", want)
		}
	}
}

// TestTracefsUnmountedWithoutSysAdmin: on a node without tracefs, a run
// with only CAP_BPF+CAP_PERFMON (the DaemonSet's set) cannot mount it; each
// tracefs user exits 2 with one line naming CAP_SYS_ADMIN and the mount
// command, and nothing is mounted. In a private mount namespace with
// tracefs unmounted there, so the host is untouched.
func TestTracefsUnmountedWithoutSysAdmin(t *testing.T) {
	testenv.RequireRoot(t)
	setpriv := testenv.LookPath(t, "setpriv", "util-linux")
	unshare := testenv.LookPath(t, "unshare", "util-linux")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	caps := strings.Join(setprivArgs(0, []string{"bpf", "perfmon"}), " ")
	for _, args := range []string{
		"fsync --duration 1s --interval 0",
		"hypervisor --comm no-such-qemu --duration 1s",
		"serve --listen 127.0.0.1:0 --comm etcd",
	} {
		// The tracefs mounts left after the umounts are counted before and
		// after the run: another root's view of /sys (a chroot's rbind of
		// it, say) may hold one elsewhere, and the run must add none.
		script := `umount -l /sys/kernel/tracing 2>/dev/null; umount -l /sys/kernel/debug/tracing 2>/dev/null
before=$(grep -c ' - tracefs ' /proc/self/mountinfo)
` + setpriv + " " + caps + " " + self + " " + args + ` 2>&1
echo "rc=$?"
echo "mounts added=$(( $(grep -c ' - tracefs ' /proc/self/mountinfo) - before ))"
`
		cmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c", script)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		out, _ := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 3 || lines[1] != "rc=2" || lines[2] != "mounts added=0" ||
			!strings.Contains(lines[0], "CAP_SYS_ADMIN") || !strings.Contains(lines[0], "mount -t tracefs") {
			t.Errorf("%s without tracefs or CAP_SYS_ADMIN: want one line naming CAP_SYS_ADMIN and the mount, rc=2, no mount added; got\n%s", args, out)
		}
	}
}

// TestNetemCapabilities: netem needs CAP_NET_ADMIN and no CAP_SYS_ADMIN
// (its feature probe falls back to the kernel's module lists, and Apply
// rolls back what the kernel refuses); --classifier bpf needs CAP_BPF
// besides and --netns CAP_SYS_ADMIN. Each run with one missing exits 2
// with one line naming it; lo's qdiscs are the same after every run.
// This kernel has no sch_netem: with CAP_NET_ADMIN the run gets as far as
// the kernel's refusal, which must be rolled back and named.
func TestNetemCapabilities(t *testing.T) {
	testenv.RequireRoot(t)
	setpriv := testenv.LookPath(t, "setpriv", "util-linux")
	ip := testenv.LookPath(t, "ip", "iproute2")
	tc := testenv.LookPath(t, "tc", "iproute2")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ns := "etcdscope-caps-" + itoa(os.Getpid())
	if out, err := exec.Command(ip, "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command(ip, "netns", "del", ns).Run() })
	qdiscs := func() string {
		out, _ := exec.Command(tc, "qdisc", "show", "dev", "lo").CombinedOutput()
		return string(out)
	}
	before := qdiscs()
	kernelHasNetem := netem.Probe(netem.ClassifierU32) == nil
	apply := []string{"netem", "apply", "--dev", "lo", "--peer", "10.0.0.2", "--delay", "1ms", "--state-dir", t.TempDir()}
	for _, c := range []struct {
		caps []string
		args []string
		want string // in the one line
	}{
		{nil, apply, "CAP_NET_ADMIN"},
		{[]string{"bpf"}, apply, "CAP_NET_ADMIN"},
		{[]string{"net_admin"}, apply, "CAP_BPF"},
		{[]string{"net_admin"}, append(apply, "--classifier", "u32"), "this kernel refused the tree"},
		{[]string{"net_admin", "bpf"}, apply, "this kernel refused the tree"},
		{[]string{"net_admin"}, []string{"netem", "show", "--netns", ns}, "CAP_SYS_ADMIN"},
		{[]string{"net_admin"}, []string{"netem", "show", "--netns", "/proc/1/ns/net"}, "CAP_SYS_PTRACE"},
	} {
		if strings.HasPrefix(c.want, "this kernel") && kernelHasNetem {
			t.Logf("%v with %v: not run, this kernel has the qdiscs (the row is for one without)", c.args, c.caps)
			continue
		}
		cmd := exec.Command(setpriv, append(append(setprivArgs(0, c.caps), self), c.args...)...)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Run()
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if rc := cmd.ProcessState.ExitCode(); rc != 2 || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%v with %v: exit %d, stderr %q; want exit 2 and one line with %q", c.args, c.caps, rc, stderr.String(), c.want)
		}
		if now := qdiscs(); now != before {
			t.Fatalf("%v with %v changed lo's qdiscs:\n%s\nwas:\n%s", c.args, c.caps, now, before)
		}
	}
}
