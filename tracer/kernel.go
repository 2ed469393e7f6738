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
// cannot work here, before anything is loaded or mounted.
func CheckPrerequisites() error {
	if _, err := os.Stat(btfPath); err != nil {
		return ErrNoBTF
	}
	if os.Geteuid() != 0 {
		// Without root the capability set decides; a cheap probe is to
		// create a tiny map, which needs CAP_BPF.
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNoPrivilege, err)
		}
		m.Close()
	}
	return nil
}

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
		return fmt.Errorf("removing memlock limit: %w", err)
	}
	return nil
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
// tracepoint name, which is when it also has the btf_trace_<name> typedef
// a tp_btf program attaches through. It asks tracefs (mounted by then)
// rather than parsing the kernel's BTF once more: the loader parses it
// anyway, and a second parse cost start-up time (docs/performance.md).
func tracepointHasBTF(name string) bool {
	return host.TracepointExists(tracepointSystem(name), name)
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
