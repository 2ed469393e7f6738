package netem

import (
	"fmt"
	"strings"
)

// Commands returns the iproute2 tc commands equivalent to applying s with
// kernel parameters p on a device whose root qdisc is the kernel default
// (replace says a foreign root is replaced instead). --dry-run prints them
// and touches nothing. For the bpf classifier, which tc cannot load with
// etcdscope's port and peer map, the filter line is a comment naming what
// etcdscope attaches, followed by the u32 equivalent.
func Commands(s *Spec, p Params, replace bool) []string {
	verb := "add"
	if replace {
		verb = "replace"
	}
	pm := make([]string, len(DefaultPriomap))
	for i, v := range DefaultPriomap {
		pm[i] = fmt.Sprint(v)
	}
	out := []string{
		fmt.Sprintf("tc qdisc %s dev %s root handle 1: prio bands %d priomap %s", verb, s.Dev, prioBands, strings.Join(pm, " ")),
		fmt.Sprintf("tc qdisc add dev %s parent 1:4 handle 40: %s", s.Dev, netemArgs(s, p)),
	}
	rules := u32Rules(s)
	if s.Classifier == ClassifierBPF {
		peers := make([]string, len(s.Peers))
		for i, a := range s.Peers {
			peers[i] = a.String()
		}
		out = append(out,
			fmt.Sprintf("# tc filter add dev %s parent 1: protocol all pref %d handle %d bpf obj classifier.o sec classifier classid 1:4   (etcdscope loads bpf/classifier.bpf.c itself: port %d, peers %s in map \"peers\")",
				s.Dev, bpfFilterPref, bpfFilterHandle, s.Port, strings.Join(peers, " ")),
			"# the same selection as u32 filters:")
		for _, r := range rules {
			out = append(out, "# "+u32Command(s.Dev, r))
		}
		return out
	}
	for _, r := range rules {
		out = append(out, u32Command(s.Dev, r))
	}
	return out
}

func u32Command(dev string, r u32Rule) string {
	proto := "ip"
	if r.Proto != 0x0800 {
		proto = "ipv6"
	}
	return fmt.Sprintf("tc filter add dev %s parent 1: protocol %s pref %d u32 %s flowid 1:4", dev, proto, u32Pref(r.Proto), r.Match)
}

// netemArgs prints p in tc-netem(8) syntax, exact to the nanosecond.
func netemArgs(s *Spec, p Params) string {
	var b strings.Builder
	fmt.Fprintf(&b, "netem limit %d", p.Limit)
	if p.LatencyNs != 0 {
		fmt.Fprintf(&b, " delay %s", FormatDuration(durationNs(p.LatencyNs)))
		if p.JitterNs != 0 {
			fmt.Fprintf(&b, " %s", FormatDuration(durationNs(p.JitterNs)))
			if p.DelayCorr != 0 {
				fmt.Fprintf(&b, " %s", FormatPercent(s.JitterCorrelation))
			}
			if s.Distribution != DistUniform {
				fmt.Fprintf(&b, " distribution %s", s.Distribution)
			}
		}
	}
	if p.Loss != 0 {
		fmt.Fprintf(&b, " loss random %s", FormatPercent(s.Loss))
		if p.LossCorr != 0 {
			fmt.Fprintf(&b, " %s", FormatPercent(s.LossCorrelation))
		}
	}
	return b.String()
}
