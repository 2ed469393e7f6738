package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/render"
)

// helpText is what a subcommand's --help says besides its flags.
type helpText struct {
	usage    string   // the synopsis after "usage: "
	examples []string // one command line each, with a "# what it does" comment
}

// helps holds the --help text of every subcommand (and netem verb), by
// flag-set name. A subcommand without an entry still gets its summary and
// flags.
// verbSummaries: the one-line purpose of a subcommand's verb, where the
// subcommand's own summary (which lists its verbs) would not say it.
var verbSummaries = map[string]string{
	"netem apply": "delay/lose etcd peer traffic (port 2380) to the chosen peers only (both directions when both ends apply it)",
	"netem show":  "show the qdiscs and filters etcdscope applied, with their packet counters",
	"netem clear": "remove what etcdscope applied and restore the interface's own qdisc",
}

var helps = map[string]helpText{
	"fsync": {"etcdscope fsync [--comm NAME | --pid N | --cgroup DIR] [--dev DISK] [--duration D] [--output table|json] [--workload wal]", []string{
		"sudo etcdscope fsync --comm etcd --duration 60s                    # etcd's fsyncs for a minute, by layer",
		"sudo etcdscope fsync --workload wal --dir /var/lib/etcd-test      # qualify a disk before etcd goes on it",
		"sudo etcdscope fsync --comm etcd --output json > trace.jsonl       # record, then: etcdscope report trace.jsonl",
		"sudo etcdscope fsync --workload wal --fail-over-budget || echo slow # exit 3 when the WAL p99 is over 10 ms",
	}},
	"peers": {"etcdscope peers [--port 2380] [--peer IP ...] [--duration D] [--etcd-metrics URL] [--record FILE]", []string{
		"sudo etcdscope peers --duration 2m --etcd-metrics http://127.0.0.1:2381/metrics # RTT per peer against etcd's metric",
		"sudo etcdscope peers --record peers.jsonl                                   # keep the events for report --html",
	}},
	"serve": {"etcdscope serve [--listen HOST:PORT] [--listen-public] [--comm etcd] [--etcd-metrics URL ...] [--commit-pid N --etcd-endpoints URL,...] [--otlp-endpoint HOST:PORT]", []string{
		"sudo etcdscope serve --comm etcd --etcd-metrics http://127.0.0.1:2381/metrics # Prometheus metrics on 127.0.0.1:10380",
		"sudo etcdscope serve --listen '[fd00::1]:10380' --listen-public              # on a node's IPv6 address",
		"sudo etcdscope serve --commit-pid $(pgrep -x etcd) --etcd-endpoints http://127.0.0.1:2379 # + each write's split, /commit/entries for etcdscope cluster",
	}},
	"report": {"etcdscope report [--output table|json | --html OUT.html [--peers PEERS.jsonl] [--merge MERGED.jsonl]] [--fail-over-budget] RECORDING.jsonl|CAPTURE.jsonl (- for stdin)", []string{
		"etcdscope report trace.jsonl                                   # the table again, from a recording",
		"etcdscope report --html page.html --peers peers.jsonl trace.jsonl # one page to share: trace fsync's, --peers peers' (a recording or --capture)",
		"etcdscope report --fail-over-budget trace.jsonl                # exit 3 if a WAL (or other files') group's p99 is over 10 ms",
	}},
	"check": {"etcdscope check [--output table|json] [SUBCOMMAND...]  (exit 1 when something a subcommand needs is missing; naming subcommands judges only theirs)", []string{
		"etcdscope check fsync commit && sudo etcdscope commit --pid $(pgrep -x etcd)   # exit 0 when those two can run here",
		"etcdscope check                                              # what this node and this process lack, before a run",
		"sudo setpriv --reuid 65534 --inh-caps -all,+bpf,+perfmon --ambient-caps -all,+bpf,+perfmon --bounding-set -all,+bpf,+perfmon etcdscope check",
	}},
	"diagnose": {"etcdscope diagnose [--since T] [--until T] [--output table|json] [--window 30s] [--timeout 10s] [--one-member] [--fail-over-budget] FILE|URL|- ...\n" +
		"   or: etcdscope diagnose --prometheus URL [--since T --until T | --last 6h] [--match '{job=\"etcd\"}'] [--max-clusters 50]", []string{
		"etcdscope diagnose metrics.txt etcd.log                     # a verdict from a saved /metrics and etcd's log",
		"etcdscope diagnose --one-member before.txt after.txt        # two pasted excerpts of one member: their difference",
		"etcdscope diagnose --window 1m http://127.0.0.1:2381/metrics # two scrapes a minute apart, then the verdict",
		"etcdscope diagnose --fail-over-budget fio.json             # exit 3 when a finding is bad, for a job to gate on",
		"etcdscope diagnose --prometheus http://prometheus:9090 --last 6h --match '{job=\"etcd\"}' # every cluster in Prometheus, worst first",
	}},
	"commit": {"etcdscope commit (--pid N | --comm etcd) [--etcd-endpoints URL,...] [--cacert/--cert/--key] [--duration 60s] [--load 0|N/s] [--output table|json]", []string{
		"sudo etcdscope commit --comm etcd --etcd-endpoints http://127.0.0.1:2379          # what each write waits on, for a minute",
		"sudo etcdscope commit --comm etcd --etcd-endpoints http://127.0.0.1:2379 --load 20/s # with etcdscope's own leased puts, timed client-side",
		"sudo etcdscope commit --pid $(pgrep -x etcd) --output json > commit.jsonl          # one record per write (schema commit/v2)",
	}},
	"cluster": {"etcdscope cluster --members URL,URL,URL [--since-index N] [--timeout 5s] [--output table|json]", []string{
		"etcdscope cluster --members http://10.0.0.1:10380,http://10.0.0.2:10380,http://10.0.0.3:10380 # each write followed across the members' serve --commit-pid agents",
	}},
	"hypervisor": {"etcdscope hypervisor (--pid N | --comm NAME) [--duration D] [--output table|json]", []string{
		"sudo etcdscope hypervisor --pid $(pgrep -n qemu) --duration 30s       # the VM's image-file flushes, host side",
		"sudo etcdscope hypervisor --comm qemu-system-x86 --output json > host.jsonl # record for etcdscope merge",
	}},
	"merge": {"etcdscope merge --guest GUEST.jsonl --host HOST.jsonl [--guest-dev DEV] [--image FILE] [--output table|json]", []string{
		"etcdscope merge --guest guest.jsonl --host host.jsonl # each guest fsync split guest | virtualization | host",
	}},
	"netem apply": {"etcdscope netem apply --dev IFACE --peer IP [--peer IP ...] --delay D [--jitter D] [--loss P] [--for D]", []string{
		"sudo etcdscope netem apply --dev eth0 --peer 10.0.0.3 --delay 25ms --for 10m # delay Raft traffic to one peer",
	}},
	"netem show":  {"etcdscope netem show [--dev IFACE]", []string{"etcdscope netem show --dev eth0 # what etcdscope applied, and its counters"}},
	"netem clear": {"etcdscope netem clear --dev IFACE", []string{"sudo etcdscope netem clear --dev eth0 # restore the interface's qdisc"}},
	"completion": {"etcdscope completion bash|zsh", []string{
		"source <(etcdscope completion bash)                                  # this shell",
		"echo 'source <(etcdscope completion zsh)' >> ~/.zshrc                # zsh, for good",
		"etcdscope completion bash | sudo tee /etc/bash_completion.d/etcdscope # bash, every user",
	}},
}

// newFlagSet returns the flag set of a subcommand (or "netem VERB"):
// errors are returned, not printed, and --help prints the subcommand's
// purpose, synopsis, examples and flags to stdout.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() { writeHelp(os.Stdout, name, fs) }
	if flagSetMade != nil {
		flagSetMade(fs)
	}
	return fs
}

// flagSetMade, when set (by tests), is given every flag set newFlagSet
// makes: the tests read the flags from the flag sets themselves.
var flagSetMade func(*pflag.FlagSet)

// emptyFlags refuses each of names given as ” (or an empty list), where
// ” would quietly mean the flag's default: fsync --cgroup ” traced every
// process, peers --etcd-endpoints ” ran without the member list.
func emptyFlags(fs *pflag.FlagSet, names ...string) error {
	for _, n := range names {
		if fl := fs.Lookup(n); fl != nil && fs.Changed(n) && (fl.Value.String() == "" || fl.Value.String() == "[]") {
			return usagef("--%s is empty: give a value, or leave the flag out", n)
		}
	}
	return nil
}

// writeHelp writes a subcommand's --help: a one-line purpose, the
// synopsis, examples and the flags.
func writeHelp(w io.Writer, name string, fs *pflag.FlagSet) {
	var b strings.Builder
	top, _, _ := strings.Cut(name, " ")
	summary, ok := verbSummaries[name]
	if !ok {
		summary = subcommands[top].summary
	}
	fmt.Fprintf(&b, "etcdscope %s: %s\n\n", name, summary)
	h, ok := helps[name]
	if ok && h.usage != "" {
		fmt.Fprintf(&b, "usage: %s\n", h.usage)
	} else {
		fmt.Fprintf(&b, "usage: etcdscope %s [flags]\n", name)
	}
	if len(h.examples) > 0 {
		b.WriteString("\nexamples:\n")
		for _, e := range h.examples {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	if fs != nil && fs.HasFlags() {
		b.WriteString("\nflags:\n")
		b.WriteString(fs.FlagUsages())
	}
	fmt.Fprint(w, b.String())
}

// errOverBudget is returned by fsync and report under --fail-over-budget
// when a group's verdict is "over budget"; the process exits 3.
var errOverBudget = errors.New("over budget")

// exitOverBudget is the exit code of an over-budget verdict under
// --fail-over-budget: 1 stays "failed", 2 "bad input".
const exitOverBudget = 3

// failOverBudgetUsage is the --fail-over-budget flag's help.
var failOverBudgetUsage = fmt.Sprintf("exit %d when a group is over budget (p99 over etcd's %v WAL budget; backend, snapshot and WAL-directory groups are n/a), for a disk-qualification job", exitOverBudget, analysis.WALFsyncBudget)

// checkBudget returns an error wrapping errOverBudget naming the groups
// over budget, when on is set and any is; else nil.
func checkBudget(on bool, rep analysis.Report) error {
	if !on {
		return nil
	}
	var over []string
	for _, g := range rep.Groups {
		if g.Verdict == analysis.VerdictOverBudget {
			dev := g.Key.DevName
			if dev == "" {
				dev = g.Key.Dev
			}
			over = append(over, fmt.Sprintf("%s pid %d %s files on %s: p99 %s ms", g.Key.Comm, g.Key.PID, g.Key.FileKind, dev, render.Ms(g.Total.P99)))
		}
	}
	if len(over) == 0 {
		return nil
	}
	return fmt.Errorf("%w (%v): %s", errOverBudget, analysis.WALFsyncBudget, strings.Join(over, "; "))
}

func init() {
	subcommands["completion"] = subcommand{
		summary: "print a shell completion script: etcdscope completion bash|zsh",
		run:     runCompletion,
	}
}

// runCompletion prints the completion script for bash or zsh. Command
// names come from this binary; each command's flags are read from its
// --help when completing, so the script never falls behind the binary.
func runCompletion(args []string) error {
	fs := newFlagSet("completion")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope completion --help')", err)
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "bash" && fs.Arg(0) != "zsh") {
		return usagef("give the shell: etcdscope completion bash, or etcdscope completion zsh")
	}
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	script := strings.ReplaceAll(bashCompletion, "@COMMANDS@", strings.Join(append(names, "help", "--version"), " "))
	if fs.Arg(0) == "zsh" {
		// Sourced (source <(etcdscope completion zsh)), through zsh's
		// bash completion layer.
		script = "# zsh completion for etcdscope: source <(etcdscope completion zsh)\n(( $+functions[compdef] )) || { autoload -U +X compinit && compinit }\nautoload -U +X bashcompinit && bashcompinit\n" + script
	}
	fmt.Print(script)
	return nil
}

// bashCompletion completes the command, netem's verbs, and any flag of
// the command at hand (parsed from its --help); file names otherwise.
const bashCompletion = `# bash completion for etcdscope (etcdscope completion bash)
_etcdscope() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	if [[ $COMP_CWORD -eq 1 ]]; then
		COMPREPLY=($(compgen -W "@COMMANDS@" -- "$cur"))
		return
	fi
	local cmd=${COMP_WORDS[1]} verb=
	if [[ $cmd == netem ]]; then
		if [[ $COMP_CWORD -eq 2 ]]; then
			COMPREPLY=($(compgen -W "apply show clear" -- "$cur"))
			return
		fi
		verb=${COMP_WORDS[2]}
	fi
	if [[ $cmd == completion ]]; then
		COMPREPLY=($(compgen -W "bash zsh" -- "$cur"))
		return
	fi
	if [[ $cur == -* ]]; then
		local flags
		# Only the flags section: examples name other commands' flags.
		flags=$("${COMP_WORDS[0]}" $cmd $verb --help 2>/dev/null | sed -n '/^flags:$/,$p' | grep -oE -- '^ +(-[a-zA-Z], )?--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o filenames -F _etcdscope etcdscope
`
