package netem

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	tc "github.com/florianl/go-tc"
	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/host"
)

// UsageError marks an error found before anything on the host changed:
// bad arguments, a missing device, a kernel without the needed qdiscs, or
// a foreign root qdisc without --replace. The CLI exits 2 on it.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// kernelFeature is one piece of the tree and the config option behind it.
type kernelFeature struct{ what, config, module string }

var (
	featNetem = kernelFeature{"netem qdisc", "CONFIG_NET_SCH_NETEM", "sch_netem"}
	featPrio  = kernelFeature{"prio qdisc", "CONFIG_NET_SCH_PRIO", "sch_prio"}
	featU32   = kernelFeature{"u32 classifier", "CONFIG_NET_CLS_U32", "cls_u32"}
	featBPF   = kernelFeature{"bpf classifier", "CONFIG_NET_CLS_BPF", "cls_bpf"}
)

// Probe checks that this kernel can build the tree for classifier, by
// building it on the loopback device of a throwaway network namespace
// that is destroyed afterwards: nothing the host uses is touched. A
// missing qdisc or classifier returns a *UsageError naming the config
// option and the modprobe that fixes it.
//
// A successful probe is remembered for the life of the process (kernel
// features do not go away), so repeated applies probe once.
func Probe(classifier string) error {
	probedMu.Lock()
	defer probedMu.Unlock()
	if probed[classifier] {
		return nil
	}
	if err := probe(classifier); err != nil {
		return err
	}
	probed[classifier] = true
	return nil
}

var (
	probedMu sync.Mutex
	probed   = map[string]bool{}
)

func probe(classifier string) error {
	if err := probeCaps(classifier); err != nil {
		return err
	}
	fd, err := throwawayNetns()
	if errors.Is(err, errNoThrowawayNetns) {
		// Without CAP_SYS_ADMIN there is no namespace to try the tree in:
		// ask which modules the kernel has instead. Whatever it still
		// refuses, Apply rolls back.
		return probeModules(classifier)
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	conn, err := tc.Open(&tc.Config{NetNS: fd})
	if err != nil {
		return fmt.Errorf("opening rtnetlink: %w", err)
	}
	defer conn.Close()
	const lo = 1 // loopback is ifindex 1 in every new namespace

	var missing []kernelFeature
	check := func(f kernelFeature, err error) bool {
		switch {
		case err == nil:
			return true
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP):
			missing = append(missing, f)
			return false
		}
		return false
	}
	var other error
	note := func(step string, err error) {
		if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EOPNOTSUPP) && other == nil {
			other = fmt.Errorf("%s: %w", step, err)
		}
	}
	// netem alone at the root first: its absence is what users hit most.
	// Its handle differs from the tree's so that nothing can collide.
	err = conn.Qdisc().Add(netemObject(lo, tcHRoot, Params{LatencyNs: 1e6, Limit: minLimit}, 0x0041_0000))
	netemOK := check(featNetem, err)
	note("netem at root", err)
	// Replace swaps whatever is at the root (the probe netem) for prio.
	err = conn.Qdisc().Replace(prioObject(lo))
	prioOK := check(featPrio, err)
	note("prio at root", err)
	if prioOK && netemOK {
		err = conn.Qdisc().Add(netemObject(lo, NetemParent, Params{LatencyNs: 1e6, Limit: minLimit}, NetemHandle))
		check(featNetem, err)
		note("netem on 1:4", err)
	}
	if prioOK {
		switch classifier {
		case ClassifierU32:
			r := u32Rules(&Spec{Peers: mustAddrs("127.0.0.2"), Port: DefaultPort})[0]
			err = conn.Filter().Add(r.object(lo))
			check(featU32, err)
			note("u32 filter", err)
		default:
			objs, lerr := loadClassifierProg(DefaultPort, nil)
			if lerr != nil {
				return lerr
			}
			err = conn.Filter().Add(bpfFilterObject(lo, objs.EtcdscopePeer.FD()))
			objs.Close()
			check(featBPF, err)
			note("bpf filter", err)
		}
	}
	if len(missing) > 0 {
		return missingErr(missing)
	}
	if other != nil {
		if errors.Is(other, unix.EPERM) {
			return usagef("changing qdiscs needs root or CAP_NET_ADMIN (run with sudo); nothing was changed")
		}
		return fmt.Errorf("probing tc support: %w", other)
	}
	return nil
}

// missingErr names the missing features, their config options and the
// modprobe that fixes it.
func missingErr(missing []kernelFeature) error {
	var what, cfg, mods []string
	for _, f := range missing {
		if !containsStr(what, f.what) {
			what = append(what, f.what)
			cfg = append(cfg, f.config)
			mods = append(mods, f.module)
		}
	}
	return usagef("this kernel has no %s (%s): run `modprobe %s` or boot a kernel built with them; nothing was changed",
		strings.Join(what, ", no "), strings.Join(cfg, ", "), strings.Join(mods, " && modprobe "))
}

// probeCaps names the capability a change needs when this process lacks
// it: CAP_NET_ADMIN for any qdisc, CAP_BPF (or CAP_SYS_ADMIN) besides for
// the bpf classifier. Unreadable capabilities are left to the kernel.
func probeCaps(classifier string) error {
	eff, ok := host.EffectiveCaps()
	if !ok {
		return nil
	}
	if eff&(1<<unix.CAP_NET_ADMIN) == 0 {
		return usagef("changing qdiscs needs root or CAP_NET_ADMIN (run with sudo); nothing was changed")
	}
	if classifier == ClassifierBPF && eff&(1<<unix.CAP_BPF|1<<unix.CAP_SYS_ADMIN) == 0 {
		return usagef("--classifier bpf needs CAP_BPF besides CAP_NET_ADMIN (or use --classifier u32); nothing was changed")
	}
	return nil
}

// modulesDir holds the kernel's module lists (modules.builtin,
// modules.dep) under its release; a variable for tests.
var modulesDir = "/lib/modules"

// probeModules is the probe without CAP_SYS_ADMIN: a feature is missing
// when its module is neither loaded nor listed for this kernel
// (ModuleState). With no module lists on the node nothing is called
// missing: the kernel decides at Apply, which rolls back.
func probeModules(classifier string) error {
	if missing := missingModules(classifier); len(missing) > 0 {
		return missingErr(missing)
	}
	return nil
}

// treeFeatures: what the tree with classifier is made of, in order.
func treeFeatures(classifier string) []kernelFeature {
	if classifier == ClassifierU32 {
		return []kernelFeature{featNetem, featPrio, featU32}
	}
	return []kernelFeature{featNetem, featPrio, featBPF}
}

// missingModules returns the features the tree with classifier needs
// whose module is neither loaded nor listed for this kernel
// (ModuleState); none when the node has no module lists.
func missingModules(classifier string) []kernelFeature {
	var missing []kernelFeature
	for _, f := range treeFeatures(classifier) {
		if present, known := ModuleState(f.module); known && !present {
			missing = append(missing, f)
		}
	}
	return missing
}

// NeededModule is a kernel module the tree needs, with the config option
// behind it and whether this kernel has it (ModuleState).
type NeededModule struct {
	Module, Config string
	Present, Known bool
}

// NeededModules returns the modules the tree with classifier needs (the
// netem and prio qdiscs, the classifier), each with its state. It only
// reads /sys/module and /lib/modules: apply --dry-run says with it what
// the apply will need.
func NeededModules(classifier string) []NeededModule {
	var out []NeededModule
	for _, f := range treeFeatures(classifier) {
		present, known := ModuleState(f.module)
		out = append(out, NeededModule{Module: f.module, Config: f.config, Present: present, Known: known})
	}
	return out
}

// ModuleState says whether kernel module (sch_netem, cls_bpf, ...) is
// loaded (/sys/module/NAME), built in (modules.builtin) or loadable
// (modules.dep) for the running kernel. known is false when it is not
// loaded and the node has no module lists for this kernel (a container
// without /lib/modules): then only trying tells.
func ModuleState(module string) (present, known bool) {
	if _, err := os.Stat("/sys/module/" + module); err == nil {
		return true, true
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return false, false
	}
	dir := modulesDir + "/" + unix.ByteSliceToString(uts.Release[:])
	var lists []string
	for _, f := range []string{"modules.builtin", "modules.dep"} {
		if b, err := os.ReadFile(dir + "/" + f); err == nil {
			lists = append(lists, string(b))
		}
	}
	if len(lists) == 0 {
		return false, false
	}
	return listsModule(lists, module), true
}

// listsModule reports whether a modules.builtin or modules.dep text has a
// line for module (".../sch_netem.ko", compressed or not).
func listsModule(lists []string, module string) bool {
	for _, l := range lists {
		for _, line := range strings.Split(l, "\n") {
			path, _, _ := strings.Cut(line, ":")
			base := path[strings.LastIndexByte(path, '/')+1:]
			if name, _, ok := strings.Cut(base, ".ko"); ok && strings.ReplaceAll(name, "-", "_") == module {
				return true
			}
		}
	}
	return false
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// errNoThrowawayNetns is returned by throwawayNetns when unshare(2) is
// refused: creating a network namespace needs CAP_SYS_ADMIN, which
// netem does not otherwise need.
var errNoThrowawayNetns = errors.New("creating a network namespace needs CAP_SYS_ADMIN")

// throwawayNetns creates a new, empty network namespace and returns an fd
// for it; closing the fd destroys it. The creating thread goes back to
// its own namespace (or is retired if that fails).
func throwawayNetns() (int, error) {
	type res struct {
		fd  int
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- res{-1, fmt.Errorf("opening own network namespace: %w", err)}
			return
		}
		defer unix.Close(orig)
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			if errors.Is(err, unix.EPERM) {
				ch <- res{-1, errNoThrowawayNetns}
				return
			}
			ch <- res{-1, fmt.Errorf("creating a probe network namespace: %w", err)}
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if serr := unix.Setns(orig, unix.CLONE_NEWNET); serr == nil {
			runtime.UnlockOSThread()
		} // else: the locked thread exits with this goroutine
		if err != nil {
			ch <- res{-1, fmt.Errorf("opening probe network namespace: %w", err)}
			return
		}
		ch <- res{fd, nil}
	}()
	r := <-ch
	return r.fd, r.err
}
