package main

import (
	"testing"

	"github.com/etcdscope/etcdscope/netem"
)

// TestNetemModulesNote: apply --dry-run names a module the apply will
// need that this kernel lacks (or may lack), and says nothing when all
// are there.
func TestNetemModulesNote(t *testing.T) {
	netemM := netem.NeededModule{Module: "sch_netem", Config: "CONFIG_NET_SCH_NETEM"}
	prio := netem.NeededModule{Module: "sch_prio", Config: "CONFIG_NET_SCH_PRIO", Present: true, Known: true}
	missing := netemM
	missing.Known = true
	for _, c := range []struct {
		ms   []netem.NeededModule
		want string
	}{
		{[]netem.NeededModule{prio}, ""},
		{[]netem.NeededModule{missing, prio}, "# the apply needs sch_netem (CONFIG_NET_SCH_NETEM), not on this kernel: modprobe -a sch_netem"},
		{[]netem.NeededModule{netemM, prio}, "# the apply needs sch_netem (CONFIG_NET_SCH_NETEM): not loaded, and no /lib/modules to tell if this kernel has it"},
	} {
		if got := netemModulesNote(c.ms); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
	// All three, the longest: still one line a terminal shows whole.
	for _, known := range []bool{true, false} {
		all := []netem.NeededModule{{Module: "sch_netem", Config: "CONFIG_NET_SCH_NETEM"}, {Module: "sch_prio", Config: "CONFIG_NET_SCH_PRIO"}, {Module: "cls_bpf", Config: "CONFIG_NET_CLS_BPF"}}
		for i := range all {
			all[i].Known = known
		}
		if got := netemModulesNote(all); len(got) > 180 {
			t.Errorf("%d characters: %s", len(got), got)
		}
	}
}
