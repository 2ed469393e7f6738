package render

import (
	"fmt"
	"strings"
)

// CheckItem is one thing `etcdscope check` judged on the node: a
// capability, a kernel feature, a qdisc.
type CheckItem struct {
	What string // e.g. "CAP_BPF", "kernel BTF"
	OK   bool
	// Required: the subcommands that need it, space-separated ("" when
	// optional).
	Required string
	Detail   string // what was found, or the fix
	// Unknown: this process cannot tell whether the node has it (neither
	// MISSING nor absent); UnknownFor: the subcommands that would need it.
	Unknown    bool
	UnknownFor string
}

// CheckHeader is check's first table line: the uid it ran as (what an
// unprivileged check can and cannot probe depends on it).
func CheckHeader(uid int) string {
	return fmt.Sprintf("etcdscope check: uid %d", uid)
}

// CheckLine is one table line of check: the mark (ok, MISSING when a
// subcommand needs it, unknown, absent when optional), what, who needs it
// and the detail.
func CheckLine(it CheckItem) string {
	mark := "ok     "
	switch {
	case !it.OK && it.Required != "":
		mark = "MISSING"
	case !it.OK && it.Unknown:
		mark = "unknown"
	case !it.OK:
		mark = "absent "
	}
	need := "optional"
	switch {
	case it.Required != "":
		need = "for " + it.Required
	case it.Unknown && it.UnknownFor != "":
		need = "for " + it.UnknownFor
	}
	return fmt.Sprintf("%s %-17s %-40s %s", mark, it.What, need, it.Detail)
}

// CheckFailed is check's error when a subcommand cannot run on the node:
// the subcommands stopped, where the output shows why (the table's
// MISSING marks, or the JSON items with "ok":false), and those that can
// run.
func CheckFailed(stopped, runs []string, asJSON bool) string {
	where := "see MISSING above"
	if asJSON {
		where = `see the items with "ok":false and a "required" above`
	}
	msg := strings.Join(stopped, ", ") + " cannot run here (" + where + ")"
	if len(runs) > 0 {
		msg += "; " + strings.Join(runs, ", ") + " can"
	}
	return msg
}
