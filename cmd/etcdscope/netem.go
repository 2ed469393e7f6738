package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/etcdscope/etcdscope/netem"
	"github.com/etcdscope/etcdscope/render"
)

func init() {
	subcommands["netem"] = subcommand{
		summary: "delay/lose etcd peer traffic (port 2380) to chosen peers: apply, show, clear",
		run:     runNetem,
	}
}

const netemUsage = `usage:
  etcdscope netem apply --dev IFACE --peer IP [--peer IP ...] [--port 2380] --delay 25ms
        [--jitter 5ms] [--jitter-correlation 25%] [--distribution uniform|normal|pareto|paretonormal]
        [--loss 0.1%] [--loss-correlation 25%] [--classifier bpf|u32] [--for 10m] [--replace] [--dry-run]
        [--netns NAME|PATH]
  etcdscope netem show [--dev IFACE] [--netns NAME|PATH]
  etcdscope netem clear --dev IFACE [--netns NAME|PATH]

--netns works inside another network namespace: a name from ` + "`ip netns list`" + ` or a
path such as /proc/PID/ns/net (a container's process).
`

func runNetem(args []string) error {
	if len(args) == 0 {
		return usagef("give a verb: apply, show or clear (see 'etcdscope netem --help')")
	}
	if args[0] == "-h" || args[0] == "--help" {
		fmt.Printf("etcdscope netem: %s\n\n%s\nrun 'etcdscope netem VERB --help' for a verb's flags and an example\n", subcommands["netem"].summary, netemUsage)
		return errHelp
	}
	switch args[0] {
	case "apply":
		return netemApply(args[1:])
	case "show":
		return netemShow(args[1:])
	case "clear":
		return netemClear(args[1:])
	}
	return usagef("unknown verb %q: use apply, show or clear (see 'etcdscope netem --help')", args[0])
}

// netemErr turns the package's pre-change errors into usage errors (exit 2).
func netemErr(err error) error {
	var ue *netem.UsageError
	if errors.As(err, &ue) {
		return usagef("%s", ue.Msg)
	}
	return err
}

func netemParseFlags(fs *pflag.FlagSet, args []string) error {
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope %s --help')", err, fs.Name())
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (see 'etcdscope %s --help')", fs.Arg(0), fs.Name())
	}
	return nil
}

// netnsFlagUsage is the help text of every verb's --netns.
const netnsFlagUsage = "work in this network namespace: a name that ip netns list prints, or a path such as /proc/PID/ns/net (default: this process's)"

// checkStateDir refuses a --state-dir that is there but not a directory
// (a device node, a FIFO, a file, a link to one): apply --dry-run took it
// and clear failed with exit 1 on opening a file under it. One that is
// not there yet is apply's to make (clear then has nothing to restore).
func checkStateDir(dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return usagef("--state-dir %s: %v: give a directory (the default is %s)", dir, err, netem.DefaultStateDir)
	case !st.IsDir():
		return usagef("--state-dir %s is not a directory: give a directory (the default is %s)", dir, netem.DefaultStateDir)
	}
	return nil
}

// netemOpen opens a netem client in the namespace --netns names (the
// caller's own when it is ""); the returned func closes both.
func netemOpen(netnsArg string, opts netem.Options) (*netem.Client, func(), error) {
	if err := checkStateDir(opts.StateDir); err != nil {
		return nil, nil, err
	}
	closeNS := func() {}
	if netnsArg != "" {
		fd, err := netem.OpenNetns(netnsArg)
		if err != nil {
			return nil, nil, netemErr(err)
		}
		opts.NetNS = fd
		closeNS = func() { syscall.Close(fd) }
	}
	c, err := netem.Open(opts)
	if err != nil {
		closeNS()
		return nil, nil, netemErr(err)
	}
	return c, func() { c.Close(); closeNS() }, nil
}

func netemApply(args []string) error {
	fs := newFlagSet("netem apply")
	dev := fs.String("dev", "", "interface the peers are reached through")
	peers := fs.StringArray("peer", nil, "peer IP address (IPv4 or IPv6); repeat for more peers")
	port := fs.Int("port", netem.DefaultPort, "etcd peer port, matched as destination (client side) and source (server side)")
	delay := fs.String("delay", "", "added one-way delay, with a unit (25ms, 800us)")
	jitter := fs.String("jitter", "", "delay variation (sigma of the distribution), with a unit")
	jcorr := fs.String("jitter-correlation", "", "correlation of successive delays, e.g. 25%")
	dist := fs.String("distribution", netem.DistUniform, "jitter distribution: uniform, normal, pareto or paretonormal")
	loss := fs.String("loss", "", "random loss, e.g. 0.1%")
	lcorr := fs.String("loss-correlation", "", "correlation of successive losses, e.g. 25%")
	classifier := fs.String("classifier", netem.ClassifierBPF, "bpf (cls_bpf, peers in a BPF map) or u32 (plain tc filters)")
	rate := fs.String("rate", "", "peak rate of peer traffic, sizes the netem queue (default: device speed, else 10gbit)")
	limit := fs.Uint32("limit", 0, "netem queue limit in packets (default: rate x maximum delay, at least 1000)")
	hold := fs.Duration("for", 0, "stay in the foreground and clear after this long (or on SIGINT/SIGTERM)")
	replace := fs.Bool("replace", false, "replace a root qdisc etcdscope did not make (clear restores it)")
	dryRun := fs.Bool("dry-run", false, "print the equivalent tc commands and change nothing")
	stateDir := fs.String("state-dir", netem.DefaultStateDir, "where apply records what to restore")
	netnsArg := fs.String("netns", "", netnsFlagUsage)
	if err := netemParseFlags(fs, args); err != nil {
		return err
	}
	if *port < 1 || *port > 65535 {
		return usagef("--port %d is out of range; give 1-65535 (etcd's peer port is %d)", *port, netem.DefaultPort)
	}
	s := netem.Spec{Dev: *dev, Port: uint16(*port), Distribution: *dist, Classifier: *classifier, Limit: *limit}
	for _, p := range *peers {
		for _, one := range strings.Split(p, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(one))
			if err != nil {
				return usagef("--peer %q is not an IP address; give the far member's, e.g. --peer 10.0.0.3 (a list: --peer 10.0.0.3,10.0.0.4)", one)
			}
			s.Peers = append(s.Peers, a)
		}
	}
	var err error
	if *delay != "" {
		if s.Delay, err = netem.ParseDuration(*delay); err != nil {
			return usagef("--delay: %v", err)
		}
	}
	if *jitter != "" {
		if s.Jitter, err = netem.ParseDuration(*jitter); err != nil {
			return usagef("--jitter: %v", err)
		}
	}
	for _, pc := range []struct {
		flag string
		in   string
		out  *float64
	}{{"--jitter-correlation", *jcorr, &s.JitterCorrelation}, {"--loss", *loss, &s.Loss}, {"--loss-correlation", *lcorr, &s.LossCorrelation}} {
		if pc.in != "" {
			if *pc.out, err = netem.ParsePercent(pc.in); err != nil {
				return usagef("%s: %v", pc.flag, err)
			}
		}
	}
	if *rate != "" {
		if s.RateBitsPerSecond, err = netem.ParseRate(*rate); err != nil {
			return usagef("--rate: %v", err)
		}
	}
	if *hold < 0 {
		return usagef("--for must be positive, e.g. --for 10m")
	}
	if err := s.Validate(); err != nil {
		return usagef("%v", err)
	}
	// Also with --dry-run: commands for a device this host lacks are no
	// plan to show. With --netns the device lives in that namespace: the
	// client looks it up there (a usage error naming the namespace).
	if _, err := net.InterfaceByName(s.Dev); err != nil && *netnsArg == "" {
		return usagef("--dev %s: no such interface on this host (see ip link)", s.Dev)
	}
	if err := checkStateDir(*stateDir); err != nil {
		return err
	}
	if *dryRun {
		// A plan for a namespace that is not there is no plan either:
		// opened to check it, read-only, changing nothing.
		if *netnsArg != "" {
			fd, err := netem.OpenNetns(*netnsArg)
			if err != nil {
				return netemErr(err)
			}
			syscall.Close(fd)
		}
		p, err := s.Params(0, 0)
		if err != nil {
			return usagef("%v", err)
		}
		for _, line := range netem.Commands(&s, p, *replace) {
			if *netnsArg != "" && !strings.HasPrefix(line, "#") {
				line = "nsenter --net=" + netem.NetnsPath(*netnsArg) + " " + line
			}
			fmt.Println(line)
		}
		// The plan changes nothing, so it needs no module; the apply
		// does: say so now, not at the apply. Within a namespace the
		// host's kernel is the same.
		var ms []render.KernelModule
		for _, m := range netem.NeededModules(s.Classifier) {
			ms = append(ms, render.KernelModule{Module: m.Module, Config: m.Config, Present: m.Present, Known: m.Known})
		}
		if line := render.NetemModulesNote(ms); line != "" {
			fmt.Println(line)
		}
		return nil
	}
	c, done, err := netemOpen(*netnsArg, netem.Options{StateDir: *stateDir, Replace: *replace})
	if err != nil {
		return err
	}
	defer done()
	res, err := c.Apply(s)
	if err != nil {
		return netemErr(err)
	}
	for _, a := range res.Actions {
		fmt.Println(render.NetemApplied(a))
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(os.Stderr, render.NetemWarning(w))
	}
	fmt.Print(render.NetemVerified(res.Tree.String()))
	if *hold == 0 {
		return nil
	}
	ctx, stop := runContext("netem", nil)
	defer stop()
	fmt.Println(render.NetemHolding(*hold))
	cr, err := c.HoldAndClear(ctx, s.Dev, *hold)
	if err != nil {
		return err
	}
	fmt.Println(render.NetemCleared(s.Dev, cr.Restored))
	return nil
}

func netemShow(args []string) error {
	fs := newFlagSet("netem show")
	dev := fs.String("dev", "", "interface to show (default: all)")
	netnsArg := fs.String("netns", "", netnsFlagUsage)
	if err := netemParseFlags(fs, args); err != nil {
		return err
	}
	c, done, err := netemOpen(*netnsArg, netem.Options{})
	if err != nil {
		return err
	}
	defer done()
	trees, err := c.Show(*dev)
	if err != nil {
		return netemErr(err)
	}
	for _, t := range trees {
		fmt.Print(t)
	}
	return nil
}

func netemClear(args []string) error {
	fs := newFlagSet("netem clear")
	dev := fs.String("dev", "", "interface to restore")
	stateDir := fs.String("state-dir", netem.DefaultStateDir, "where apply recorded what to restore")
	netnsArg := fs.String("netns", "", netnsFlagUsage)
	if err := netemParseFlags(fs, args); err != nil {
		return err
	}
	if *dev == "" {
		return usagef("--dev is required: give the interface apply changed (see etcdscope netem show)")
	}
	c, done, err := netemOpen(*netnsArg, netem.Options{StateDir: *stateDir})
	if err != nil {
		return err
	}
	defer done()
	res, err := c.Clear(*dev)
	if err != nil {
		return netemErr(err)
	}
	if res.Nothing {
		fmt.Println(render.NetemNothingToClear(*dev))
		if res.Hint != "" {
			fmt.Println(res.Hint)
		}
		return nil
	}
	fmt.Println(render.NetemCleared(*dev, res.Restored))
	return nil
}
