package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/render"
)

// TestCheckAgainstOracles: every line `etcdscope check --output json`
// prints, for two capability sets (the DaemonSet's BPF+PERFMON as uid 0,
// and none as uid 65534), both with RLIMIT_MEMLOCK 0, against an
// independent look at the same fact:
//   - capabilities: CapEff of /proc/self/status read by `grep` run with
//     the same setpriv;
//   - BPF memory and map creation: a one-entry array map this (root) test
//     creates with its own RLIMIT_MEMLOCK lowered to 0;
//   - kernel BTF, uprobes, kprobes: the sysfs files;
//   - sch_netem: `tc qdisc add dev lo root netem` in a throwaway network
//     namespace (`unshare -n`);
//   - BPF ring buffer, task storage: `bpftool feature probe kernel` run
//     by this (root) test: map type ringbuf available, bpf_task_storage_get
//     among the tracepoint programs' helpers (unknown, so not ok, without
//     CAP_BPF).
func TestCheckAgainstOracles(t *testing.T) {
	testenv.RequireRoot(t)
	setpriv := testenv.LookPath(t, "setpriv", "util-linux")
	unshare := testenv.LookPath(t, "unshare", "util-linux")
	prlimit := testenv.LookPath(t, "prlimit", "util-linux")
	tc := testenv.LookPath(t, "tc", "iproute2")
	bpftool := testenv.LookPath(t, "bpftool", "bpftool")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	netem := exec.Command(unshare, "-n", tc, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").Run() == nil
	memcg := mapWithNoMemlock(t)
	probe, err := exec.Command(bpftool, "feature", "probe", "kernel").Output()
	if err != nil {
		t.Fatalf("bpftool feature probe kernel: %v", err)
	}
	ringbuf, taskStorage := bpftoolFeatures(string(probe))

	for _, c := range []struct {
		uid  int
		caps []string
	}{{0, []string{"bpf", "perfmon"}}, {65534, nil}} {
		priv := append([]string{prlimit, "--memlock=0:0", setpriv}, setprivArgs(c.uid, c.caps)...)
		status, err := exec.Command(priv[0], append(priv[1:], "grep", "CapEff:", "/proc/self/status")...).Output()
		if err != nil {
			t.Fatal(err)
		}
		eff, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(string(status), "CapEff:")), 16, 64)
		if err != nil {
			t.Fatalf("CapEff %q: %v", status, err)
		}
		// tracefs as the node would have it: mounted (in a private mount
		// namespace, so the host's is untouched).
		cmd := exec.Command(unshare, append(withTracefs(), append(priv, self, "check", "--output", "json")...)...)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		cmd.Run()
		got, unknown := map[string]bool{}, map[string]bool{}
		dec := json.NewDecoder(&stdout)
		for dec.More() {
			var it struct {
				What    string `json:"what"`
				OK      bool   `json:"ok"`
				Detail  string `json:"detail"`
				Unknown bool   `json:"unknown"`
			}
			if err := dec.Decode(&it); err != nil {
				t.Fatal(err)
			}
			got[it.What] = it.OK
			unknown[it.What] = it.Unknown
			// Without kprobes, check says what fsync's report says of the
			// jbd2 wait probe: nothing is wrong, and what is used instead.
			if it.What == "kprobes" && !it.OK && !strings.Contains(it.Detail, render.JBD2WaitFallback) {
				t.Errorf("kprobes: detail %q lacks %q", it.Detail, render.JBD2WaitFallback)
			}
		}
		hasCap := func(n int) bool { return eff&(1<<n) != 0 }
		bpfOK := hasCap(unix.CAP_BPF) || hasCap(unix.CAP_SYS_ADMIN)
		want := map[string]bool{
			"CAP_BPF":          bpfOK,
			"CAP_PERFMON":      hasCap(unix.CAP_PERFMON) || hasCap(unix.CAP_SYS_ADMIN),
			"CAP_NET_ADMIN":    hasCap(unix.CAP_NET_ADMIN),
			"CAP_SYS_PTRACE":   hasCap(unix.CAP_SYS_PTRACE),
			"CAP_SYS_ADMIN":    hasCap(unix.CAP_SYS_ADMIN),
			"kernel BTF":       exists("/sys/kernel/btf/vmlinux"),
			"BPF memory":       bpfOK && memcg,
			"BPF map creation": bpfOK && memcg,
			"tracefs":          c.uid == 0,
			"uprobes":          exists("/sys/bus/event_source/devices/uprobe/type"),
			"kprobes":          exists("/sys/bus/event_source/devices/kprobe/type"),
			"sch_netem":        netem,
			"BPF ring buffer":  bpfOK && ringbuf,
			"task storage":     bpfOK && taskStorage,
			// Informational: how many Ps and why (TestDescribeProcs; the
			// e2e TestGOMAXPROCSFitsCPUQuota reads the runtime's figure).
			"GOMAXPROCS": true,
		}
		// Without CAP_BPF the BPF feature probes cannot tell: check says
		// unknown, neither MISSING nor absent.
		for _, what := range []string{"BPF memory", "BPF ring buffer", "task storage"} {
			if unknown[what] == bpfOK {
				t.Errorf("uid %d caps %v: %s unknown=%v with CAP_BPF %v", c.uid, c.caps, what, unknown[what], bpfOK)
			}
		}
		for what, w := range want {
			g, ok := got[what]
			if !ok || g != w {
				t.Errorf("uid %d caps %v: check says %s ok=%v (printed: %v), the oracle says %v\n%s", c.uid, c.caps, what, g, ok, w, stdout.String())
			}
		}
		if len(got) != len(want) {
			t.Errorf("check printed %d items, the test knows %d: a new item needs its oracle here", len(got), len(want))
		}
	}
}

// mapWithNoMemlock reports whether this kernel creates a BPF map for a
// process whose RLIMIT_MEMLOCK is 0 (memory cgroup accounting, 5.11+).
func mapWithNoMemlock(t *testing.T) bool {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 0, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old)
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		return false
	}
	m.Close()
	return true
}

// bpftoolFeatures reads `bpftool feature probe kernel`'s plain output:
// whether map type ringbuf is available and whether tracepoint programs
// may call bpf_task_storage_get.
func bpftoolFeatures(out string) (ringbuf, taskStorage bool) {
	section := ""
	for _, line := range strings.Split(out, "\n") {
		switch {
		case line == "eBPF map_type ringbuf is available":
			ringbuf = true
		case strings.HasPrefix(line, "eBPF helpers supported for program type "):
			section = strings.TrimSuffix(strings.TrimPrefix(line, "eBPF helpers supported for program type "), ":")
		case section == "tracepoint" && strings.TrimSpace(line) == "- bpf_task_storage_get":
			taskStorage = true
		}
	}
	return ringbuf, taskStorage
}

// TestDescribeProcs: check's GOMAXPROCS line names the reason for every
// outcome of fitGOMAXPROCS (environment, unreadable cgroup, no limit,
// lowered to the limit, limit at or over the default).
func TestDescribeProcs(t *testing.T) {
	for _, c := range []struct {
		now, before int
		quota       float64
		env         string
		err         error
		want        string
	}{
		{2, 2, -1, "2", nil, "2, as GOMAXPROCS=2 in the environment says"},
		{2, 2, -1, "", errors.New("open cpu.max: permission denied"), "2 (Go's default): the cgroup CPU limit could not be read: open cpu.max: permission denied"},
		{2, 2, -1, "", nil, "2 (Go's default): no cgroup CPU limit"},
		{1, 2, 0.1, "", nil, "1: the cgroup CPU limit (0.10 CPUs) rounded up, down from Go's default 2"},
		{2, 2, 4, "", nil, "2 (Go's default): the cgroup CPU limit is 4.00 CPUs"},
	} {
		if got := describeProcs(c.now, c.before, c.quota, c.env, c.err); !strings.HasPrefix(got, c.want) {
			t.Errorf("describeProcs(%d, %d, %v, %q, %v) = %q, want prefix %q", c.now, c.before, c.quota, c.env, c.err, got, c.want)
		}
	}
}

// TestCheckFailedNamesWhereToLook: check's closing error points at what
// the output shows: the MISSING marks of the table, the items with "ok":
// false of the JSON (which has no MISSING mark), and names the subcommands
// stopped and the ones that can run.
func TestCheckFailedNamesWhereToLook(t *testing.T) {
	items := []checkItem{{what: "sch_netem", required: "netem"}, {what: "kernel BTF", ok: true, required: "fsync"}}
	for _, c := range []struct {
		asJSON bool
		want   string
	}{
		{false, "netem cannot run here (see MISSING above); fsync, serve, peers, commit, hypervisor can"},
		{true, `netem cannot run here (see the items with "ok":false and a "required" above); fsync, serve, peers, commit, hypervisor can`},
	} {
		if err := checkFailed(items, c.asJSON); err == nil || err.Error() != c.want {
			t.Errorf("json %v: %v, want %q", c.asJSON, err, c.want)
		}
	}
}

// TestCheckStopsOnlyWhatIsNamed: `check fsync` exits 1 only for what fsync
// needs: a node without sch_netem (this one) made `check && fsync` fail.
func TestCheckStopsOnlyWhatIsNamed(t *testing.T) {
	netem := checkItem{what: "sch_netem", required: "netem"}
	for _, c := range []struct {
		only []string
		want bool
	}{{nil, true}, {[]string{"fsync"}, false}, {[]string{"fsync", "netem"}, true}, {[]string{"commit"}, false}} {
		if got := netem.stops(c.only); got != c.want {
			t.Errorf("sch_netem missing, check %v: stops %v, want %v", c.only, got, c.want)
		}
	}
	if (checkItem{what: "x", ok: true, required: "fsync"}).stops(nil) || (checkItem{what: "y"}).stops(nil) {
		t.Error("an item present, or optional, stops a subcommand")
	}
}
