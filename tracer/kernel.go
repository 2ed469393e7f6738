package tracer

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/etcdscope/etcdscope/host"
	"golang.org/x/sys/unix"
)

// ErrNoPrivilege is wrapped by New when the process may not load BPF.
var ErrNoPrivilege = errors.New("loading BPF needs root or CAP_BPF+CAP_PERFMON (run with sudo)")

// ErrNoBTF is wrapped by New when the kernel exposes no BTF.
var ErrNoBTF = errors.New("kernel BTF missing at /sys/kernel/btf/vmlinux (needs CONFIG_DEBUG_INFO_BTF=y)")

// btfPath is where the kernel exposes its BTF; a variable so that tests
// can point it elsewhere.
var btfPath = "/sys/kernel/btf/vmlinux"

// CheckPrerequisites returns ErrNoBTF or ErrNoPrivilege when BPF tracing
// cannot work here, before anything is loaded or mounted. A missing
// capability is named (MissingCapabilities), whatever the uid: a uid 0
// container with its capabilities dropped is as unprivileged as any user.
func CheckPrerequisites() error {
	if _, err := os.Stat(btfPath); err != nil {
		return ErrNoBTF
	}
	if missing := MissingCapabilities(); len(missing) > 0 {
		return fmt.Errorf("%w: this process lacks %s", ErrNoPrivilege, strings.Join(missing, " and "))
	}
	// The capabilities are there; the kernel may still refuse (a seccomp
	// profile, kernel.unprivileged_bpf_disabled for a non-root uid, a
	// security module). A tiny map shows it.
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if errors.Is(err, unix.EPERM) {
		// cilium/ebpf adds a MEMLOCK hint to EPERM; with the capabilities
		// present and memcg accounting (5.11+) that is not the cause.
		return fmt.Errorf("%w: creating a BPF map was refused with CAP_BPF present (seccomp or a security module?)", ErrNoPrivilege)
	}
	if err != nil {
		return fmt.Errorf("%w: creating a BPF map: %v", ErrNoPrivilege, err)
	}
	m.Close()
	return nil
}

// MissingCapabilities names the capabilities this process lacks to load
// and attach the tracers: CAP_BPF (maps, programs, BTF) and CAP_PERFMON
// (tracepoints, tp_btf, uprobes), each also granted by CAP_SYS_ADMIN. It
// reads CapEff from /proc/self/status; nil when it cannot tell.
func MissingCapabilities() []string {
	eff, ok := host.EffectiveCaps()
	if !ok || eff&(1<<unix.CAP_SYS_ADMIN) != 0 {
		return nil
	}
	var missing []string
	if eff&(1<<unix.CAP_BPF) == 0 {
		missing = append(missing, "CAP_BPF")
	}
	if eff&(1<<unix.CAP_PERFMON) == 0 {
		missing = append(missing, "CAP_PERFMON")
	}
	return missing
}

// HasCapability reports whether this process holds capability number c
// in its effective set (false when it cannot tell); host.HasCapability.
func HasCapability(c int) bool { return host.HasCapability(c) }

// explainLoad turns a load error into one that says what to fix: it keeps
// the tail of a verifier log and names missing privilege.
func explainLoad(what string, err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		lines := ve.Log
		if len(lines) > 8 {
			lines = lines[len(lines)-8:]
		}
		return fmt.Errorf("loading %s: verifier rejected it:\n%s", what, strings.Join(lines, "\n"))
	}
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("loading %s: %w", what, ErrNoPrivilege)
	}
	return fmt.Errorf("loading %s: %w", what, err)
}

// prepare checks what every tracer needs before it loads anything: a comm
// filter the kernel can hold, BTF, privilege, and no memlock limit.
func prepare(comm string) error {
	if len(comm) > 15 {
		return fmt.Errorf("comm %q is longer than the kernel's 15 bytes", comm)
	}
	if err := CheckPrerequisites(); err != nil {
		return err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		// Only kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK
		// (RemoveMemlock does nothing on later ones).
		return fmt.Errorf("%w: this kernel charges BPF memory to RLIMIT_MEMLOCK and raising it needs CAP_SYS_RESOURCE (or ulimit -l unlimited): %v", ErrNoPrivilege, err)
	}
	return haveRingBuf()
}

// BPFMemory says how this kernel charges BPF maps and programs, for
// `etcdscope check`: to the memory cgroup (5.11+, CAP_SYS_RESOURCE not
// needed), or to RLIMIT_MEMLOCK (before 5.11), which it then lifts when
// this process may (CAP_SYS_RESOURCE). ok is false when a run would fail
// for it; known is false without CAP_BPF (the probe creates a map: the
// same one cilium/ebpf's rlimit package creates with the limit at 0).
func BPFMemory() (ok, known bool, detail string) {
	if !HasCapability(unix.CAP_BPF) && !HasCapability(unix.CAP_SYS_ADMIN) {
		return false, false, "cannot tell without CAP_BPF"
	}
	var before, after unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_MEMLOCK, &before)
	err := rlimit.RemoveMemlock()
	unix.Getrlimit(unix.RLIMIT_MEMLOCK, &after)
	switch {
	case err != nil:
		return false, true, "this kernel (before 5.11) charges BPF memory to RLIMIT_MEMLOCK and raising it needs CAP_SYS_RESOURCE: add it (docs/deploy.md) or ulimit -l unlimited"
	case before != after:
		return true, true, "charged to RLIMIT_MEMLOCK (kernel before 5.11), lifted with CAP_SYS_RESOURCE: keep that capability"
	case before.Cur == unix.RLIM_INFINITY:
		return true, true, "RLIMIT_MEMLOCK is unlimited"
	}
	return true, true, "charged to the memory cgroup (kernel 5.11+): CAP_SYS_RESOURCE not needed"
}

// commBytes lays comm out as the programs' `const volatile char[16]`.
func commBytes(comm string) [16]int8 {
	var b [16]int8
	for i := 0; i < len(comm) && i < len(b); i++ {
		b[i] = int8(comm[i])
	}
	return b
}

// setVariables sets the programs' `const volatile` configuration before
// load.
func setVariables(spec *ebpf.CollectionSpec, vars map[string]any) error {
	for name, v := range vars {
		vs, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("setting %s: no such variable in the object", name)
		}
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
	}
	return nil
}

// shortErr keeps the first line of an error (verifier logs are long).
func shortErr(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// tracepointHasBTF reports whether the kernel (or a loaded module) has
// tracepoint name and the btf_trace_<name> typedef a tp_btf program
// attaches through. It asks tracefs (mounted by then) and /sys rather
// than parsing the kernel's BTF once more: the loader parses it anyway,
// and a second parse cost start-up time (docs/performance.md). A
// tracepoint of a loadable module (xfs) has that typedef only in the
// module's own BTF (/sys/kernel/btf/<module>), which kernels before 5.11
// and those built without CONFIG_DEBUG_INFO_BTF_MODULES lack.
func tracepointHasBTF(name string) bool {
	sys := tracepointSystem(name)
	if !host.TracepointExists(sys, name) {
		return false
	}
	return tracepointModuleHasBTF(sys)
}

// tracepointModuleHasBTF reports whether the tracepoints of system sys (a
// module's name) have BTF: built into the kernel (no
// /sys/module/<sys>/initstate, which only loadable modules have), or a
// loadable module with BTF of its own.
func tracepointModuleHasBTF(sys string) bool {
	if _, err := os.Stat("/sys/module/" + sys + "/initstate"); err != nil {
		return true
	}
	_, err := os.Stat("/sys/kernel/btf/" + sys)
	return err == nil
}

func tracepointSystem(name string) string {
	switch {
	case len(name) > 5 && name[:5] == "jbd2_":
		return "jbd2"
	case len(name) > 4 && name[:4] == "xfs_":
		return "xfs"
	case len(name) > 5 && name[:5] == "ext4_":
		return "ext4"
	}
	return ""
}
