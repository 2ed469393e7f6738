package netem

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProbeModules: without CAP_SYS_ADMIN the probe reads the kernel's
// module lists. A module listed as built in or loadable (compressed or
// not, dashes or underscores) is there; one in neither list is named with
// its config option and modprobe; no lists at all is "cannot tell", left
// to Apply's rollback.
func TestProbeModules(t *testing.T) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	old := modulesDir
	t.Cleanup(func() { modulesDir = old })
	modulesDir = t.TempDir()
	if err := probeModules(ClassifierBPF); err != nil {
		t.Fatalf("no module lists: %v, want nil (the kernel decides at Apply)", err)
	}
	dir := filepath.Join(modulesDir, unix.ByteSliceToString(uts.Release[:]))
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/net/sched/sch_prio.ko\nkernel/net/sched/cls_u32.ko\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "modules.dep"), []byte("kernel/net/sched/sch_netem.ko.xz:\nkernel/net/sched/sch-fq.ko.zst:\n"), 0o644)
	if err := probeModules(ClassifierU32); err != nil {
		t.Errorf("u32 with netem loadable, prio and u32 built in: %v", err)
	}
	err := probeModules(ClassifierBPF)
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, "no bpf classifier (CONFIG_NET_CLS_BPF)") ||
		!strings.Contains(ue.Msg, "modprobe cls_bpf") || strings.Contains(ue.Msg, "sch_netem") {
		t.Errorf("bpf without cls_bpf listed: %v, want a usage error naming cls_bpf only", err)
	}
	var missing []string
	for _, m := range NeededModules(ClassifierBPF) {
		if m.Known && !m.Present {
			missing = append(missing, m.Module+" "+m.Config)
		}
	}
	if !slices.Equal(missing, []string{"cls_bpf CONFIG_NET_CLS_BPF"}) {
		t.Errorf("NeededModules(bpf) missing %v, want cls_bpf alone (apply --dry-run's hint)", missing)
	}
	if !listsModule([]string{"kernel/net/sched/sch-fq.ko.zst:\n"}, "sch_fq") || listsModule([]string{"kernel/net/sched/sch_netem2.ko\n"}, "sch_netem") {
		t.Error("listsModule: want dashes read as underscores and no prefix matches")
	}
}
