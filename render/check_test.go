package render

import "testing"

// TestCheckLines pins check's table lines and its failure message as
// cmd/etcdscope wrote them before they moved to render (the lines of a
// root run on a kernel without sch_netem).
func TestCheckLines(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{CheckHeader(0), "etcdscope check: uid 0"},
		{CheckLine(CheckItem{What: "CAP_BPF", OK: true, Required: "fsync serve peers commit hypervisor", Detail: "held"}),
			"ok      CAP_BPF           for fsync serve peers commit hypervisor  held"},
		{CheckLine(CheckItem{What: "CAP_SYS_ADMIN", OK: true, Detail: "held"}),
			"ok      CAP_SYS_ADMIN     optional                                 held"},
		{CheckLine(CheckItem{What: "kprobes", Detail: "no kprobe PMU (CONFIG_KPROBES off)"}),
			"absent  kprobes           optional                                 no kprobe PMU (CONFIG_KPROBES off)"},
		{CheckLine(CheckItem{What: "sch_netem", Required: "netem", Detail: "no netem qdisc"}),
			"MISSING sch_netem         for netem                                no netem qdisc"},
		{CheckLine(CheckItem{What: "BPF ring buffer", Unknown: true, UnknownFor: "fsync serve", Detail: "needs privilege to probe"}),
			"unknown BPF ring buffer   for fsync serve                          needs privilege to probe"},
		{CheckLine(CheckItem{What: "task storage", Unknown: true, Detail: "?"}),
			"unknown task storage      optional                                 ?"},
		{CheckFailed([]string{"netem"}, []string{"fsync", "serve", "peers", "commit", "hypervisor"}, false),
			"netem cannot run here (see MISSING above); fsync, serve, peers, commit, hypervisor can"},
		{CheckFailed([]string{"netem"}, []string{"fsync", "serve", "peers", "commit", "hypervisor"}, true),
			`netem cannot run here (see the items with "ok":false and a "required" above); fsync, serve, peers, commit, hypervisor can`},
		{CheckFailed([]string{"fsync", "serve", "peers", "commit", "hypervisor", "netem"}, nil, false),
			"fsync, serve, peers, commit, hypervisor, netem cannot run here (see MISSING above)"},
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
}
