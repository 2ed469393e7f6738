// Command etcdscope traces where etcd's commit latency goes: the WAL
// fdatasync, split into its kernel layers, and the Raft round trip to the
// peers on TCP port 2380.
//
// This file only dispatches to one file per subcommand: check, cluster,
// commit, diagnose (and diagnose_prom.go), fsync, hypervisor, merge,
// netem, peers, report, serve, each in the file of
// its name, and completion in help.go. Every subcommand
// returns a usage error (exit 2, host unchanged) for bad input and a plain
// error (exit 1) for failures after it has started; fsync, report and diagnose
// under --fail-over-budget return errOverBudget (exit 3) for an
// over-budget verdict (diagnose: a bad finding), after printing their report.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/buildinfo"
	"github.com/etcdscope/etcdscope/render"
	"github.com/etcdscope/etcdscope/tracer"
	"github.com/spf13/pflag"
)

// subcommand is one verb of the CLI: it parses its own flags from args.
type subcommand struct {
	summary string
	run     func(args []string) error
}

// subcommands is filled by init functions in the per-verb files.
var subcommands = map[string]subcommand{}

// usageError marks bad input: the process exits 2 and must not have
// changed anything on the host before returning it.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef formats a one-line usage error that names the fix.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || (args[0] == "help" && len(args) == 1) {
		if len(args) == 0 {
			// Bad input is one line (the list is what help prints).
			fmt.Fprintln(os.Stderr, render.NoCommand(commandNames()))
			return 2
		}
		printUsage(os.Stdout) // asked for: pipeable
		return 0
	}
	if args[0] == "help" && len(args) > 1 {
		return run([]string{args[1], "--help"})
	}
	if args[0] == "--version" || args[0] == "version" {
		if len(args) == 2 && (args[1] == "-h" || args[1] == "--help") { // also 'help version'
			fmt.Println("usage: etcdscope version (or etcdscope --version)\n\nprints the build: version, commit and Go version; takes no flags")
			return 0
		}
		if len(args) > 1 {
			fmt.Fprintln(os.Stderr, render.NoArguments(args[0], args[1]))
			return 2
		}
		fmt.Println(buildinfo.Get())
		return 0
	}
	sc, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintln(os.Stderr, render.UnknownCommand(args[0]))
		return 2
	}
	// A closed stdout (--output json | head -1) must end the run through
	// its error path, which removes the workload's scratch, the ready
	// file and the tracefs mount, not kill it with SIGPIPE mid-write.
	signal.Ignore(syscall.SIGPIPE)
	fitGOMAXPROCS()
	err := sc.run(args[1:])
	if err == nil {
		return 0
	}
	if errors.Is(err, syscall.EPIPE) {
		return 0 // the reader has what it wanted
	}
	var ue *usageError
	if errors.As(err, &ue) {
		msg := ue.msg
		if strings.HasPrefix(msg, `invalid argument "" for "--pid" flag`) {
			// --pid $(pgrep -x etcd) with no etcd running.
			msg = render.EmptyPID()
		}
		fmt.Fprintln(os.Stderr, render.CommandError(args[0], msg))
		return 2
	}
	if errors.Is(err, errHelp) {
		return 0
	}
	if errors.Is(err, errOverBudget) {
		fmt.Fprintln(os.Stderr, render.CommandError(args[0], err.Error()))
		return exitOverBudget
	}
	fmt.Fprintln(os.Stderr, render.CommandError(args[0], err.Error()))
	return 1
}

// setupErr turns what the node lacks (a capability, BTF, a readable
// tracefs) into a usage error: one line naming it, exit 2, nothing changed.
// Other errors come back unchanged.
func setupErr(err error) error {
	if errors.Is(err, tracer.ErrNoPrivilege) || errors.Is(err, tracer.ErrNoBTF) || errors.Is(err, host.ErrTracefsPermission) || errors.Is(err, host.ErrTracefsNotMounted) {
		return usagef("%v", err)
	}
	return err
}

// errHelp is returned by a subcommand that printed its --help text.
var errHelp = errors.New("help requested")

// commandNames lists the subcommands, sorted.
func commandNames() []string {
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func printUsage(w *os.File) {
	names := commandNames()
	var b strings.Builder
	b.WriteString("usage: etcdscope <command> [flags]\n\ncommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", n, subcommands[n].summary)
	}
	b.WriteString("\nrun 'etcdscope <command> --help' for a command's flags; 'etcdscope --version' for the build\n")
	b.WriteString("docs/... paths in the output are the source tree's, and after 'make install' under /usr/local/share/doc/etcdscope\n")
	fmt.Fprint(w, b.String())
}

// unexpectedArg is the usage error for a positional argument a command
// does not take. After --pid, a number is most often a second pid from
// --pid $(pgrep -x etcd) on a host that runs several etcds: say so.
func unexpectedArg(fs *pflag.FlagSet) error {
	a := fs.Arg(0)
	if _, err := strconv.Atoi(a); err == nil && fs.Lookup("pid") != nil && fs.Changed("pid") {
		return usagef("--pid takes one process id and %s follows it: several processes matched? pick the one to trace (pgrep -a etcd) and give its --pid", a)
	}
	return usagef("unexpected argument %q (see 'etcdscope %s --help')", a, fs.Name())
}
