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
		{[]netem.NeededModule{missing, prio}, "# not on this kernel: sch_netem (CONFIG_NET_SCH_NETEM): the apply needs it: modprobe -a sch_netem, or a kernel built with it"},
		{[]netem.NeededModule{netemM, prio}, "# not loaded: sch_netem (CONFIG_NET_SCH_NETEM), and no /lib/modules to tell if this kernel has it: the apply needs it (modprobe -a sch_netem)"},
	} {
		if got := netemModulesNote(c.ms); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}
