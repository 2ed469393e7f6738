package host

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ListenerPID returns the pid of the process holding the TCP socket that
// listens on addr (or on the wildcard address of its family at that
// port), from /proc/PID/net/tcp{,6} and /proc/PID/fd. The peers report uses
// it to tell which traced pid is the etcd member whose /metrics it scrapes.
//
// It looks in every network namespace a process on this host is in, not
// only the caller's: an etcd in a container or under `ip netns exec`
// listens on an address the caller's namespace does not hold
// (/proc/PID/net shows PID's namespace). A listener on addr itself beats a
// wildcard one, and the caller's namespace beats the others; two equally
// good listeners in other namespaces are an error naming both.
func ListenerPID(addr netip.AddrPort) (int, error) {
	own, err := nsInode("/proc/self/ns/net")
	if err != nil {
		return 0, err
	}
	type found struct {
		ino          uint64
		exact, local bool
		netns        uint64
	}
	var best []found
	better := func(a, b found) bool { // a strictly better than b
		if a.exact != b.exact {
			return a.exact
		}
		return a.local && !b.local
	}
	consider := func(netDir string, netns uint64) {
		ino, exact, ok := listenerInode(netDir, addr)
		if !ok {
			return
		}
		f := found{ino: ino, exact: exact, local: netns == own, netns: netns}
		switch {
		case len(best) == 0 || better(f, best[0]):
			best = []found{f}
		case !better(best[0], f):
			best = append(best, f)
		}
	}
	consider("/proc/self/net", own)
	seen := map[uint64]bool{own: true}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		ns, err := nsInode(filepath.Join("/proc", p.Name(), "ns", "net"))
		if err != nil || seen[ns] {
			continue
		}
		seen[ns] = true
		consider(filepath.Join("/proc", p.Name(), "net"), ns)
	}
	switch {
	case len(best) == 0:
		return 0, fmt.Errorf("no TCP socket listens on %s in any network namespace", addr)
	case len(best) > 1:
		var nss []string
		for _, f := range best {
			nss = append(nss, "net:["+strconv.FormatUint(f.netns, 10)+"]")
		}
		return 0, fmt.Errorf("TCP sockets listen on %s in %d network namespaces (%s): cannot tell which is the member", addr, len(best), strings.Join(nss, ", "))
	}
	return pidOfSocket(best[0].ino)
}

// nsInode is the inode of a namespace file (/proc/PID/ns/net).
func nsInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("network namespace %s: %w", path, err)
	}
	return st.Ino, nil
}

// listenerInode finds a socket listening on addr (exact) or on its
// family's wildcard address at its port in netDir/tcp{,6} (a /proc/PID/net
// directory: that process's network namespace), preferring an exact one.
func listenerInode(netDir string, addr netip.AddrPort) (ino uint64, exact, ok bool) {
	want := addr.Addr().Unmap()
	for _, file := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(netDir, file))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: TCP_LISTEN
				continue
			}
			local, err := parseProcAddr(fields[1])
			if err != nil || local.Port() != addr.Port() {
				continue
			}
			la := local.Addr().Unmap()
			if la != want && !la.IsUnspecified() {
				continue
			}
			n, err := strconv.ParseUint(fields[9], 10, 64)
			if err != nil || (ok && exact) {
				continue
			}
			ino, exact, ok = n, la == want, true
		}
		f.Close()
	}
	return ino, exact, ok
}

// parseProcAddr parses "0100007F:0929": the address as the kernel's
// 32-bit words in host byte order, the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	hexAddr, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(hexAddr)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port %q", s)
	}
	var b [16]byte
	for i := 0; i < len(raw); i += 4 {
		// each word was printed as a host-order integer
		binary.BigEndian.PutUint32(b[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	if len(raw) == 4 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[:4])), uint16(port)), nil
	}
	return netip.AddrPortFrom(netip.AddrFrom16(b), uint16(port)), nil
}

// SocketOwners maps every socket inode open in any process to its tgid,
// from a scan of /proc/*/fd (sockets link as "socket:[INODE]"). It costs
// ~6 µs per open fd on the host (BenchmarkSocketOwners), and yields the
// processor every yieldEveryFDs fds.
func SocketOwners() map[uint64]uint32 {
	out := map[uint64]uint32{}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	read := 0
	for _, p := range procs {
		if pid, err := strconv.ParseUint(p.Name(), 10, 32); err == nil {
			if read += addSockets(out, uint32(pid)); read >= yieldEveryFDs {
				runtime.Gosched()
				read = 0
			}
		}
	}
	return out
}

// yieldEveryFDs: a full scan of a busy node's fds takes 68-110 ms of CPU
// (11k fds) and runs beside the peers reader, on its one P when etcdscope
// is held to under a CPU (cmd/etcdscope/maxprocs.go). Yielding every ~0.4
// ms of it lets a reader with records waiting run first, so the scan
// spends only what is left of the cgroup's quota instead of the reader's
// share (TestStarvedReaderManyFDsLosesNoPeerEvent).
const yieldEveryFDs = 64

// SocketsOf is SocketOwners over the processes pids only (gone ones are
// skipped): the cost of their fds alone.
func SocketsOf(pids []uint32) map[uint64]uint32 {
	out := map[uint64]uint32{}
	for _, pid := range pids {
		addSockets(out, pid)
	}
	return out
}

// addSockets adds the socket inodes in /proc/PID/fd to out and returns
// how many fds it read.
func addSockets(out map[uint64]uint32, pid uint32) int {
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10) + "/fd"
	fds, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	for _, fd := range fds {
		l, err := os.Readlink(dir + "/" + fd.Name())
		if err != nil || !strings.HasPrefix(l, "socket:[") {
			continue
		}
		if ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]"), 10, 64); err == nil {
			out[ino] = pid
		}
	}
	return len(fds)
}

// pidOfSocket finds the process with an fd on socket inode ino.
func pidOfSocket(ino uint64) (int, error) {
	target := "socket:[" + strconv.FormatUint(ino, 10) + "]"
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err == nil && l == target {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no process holds %s", target)
}

// NetnsInode returns the inode number of a network namespace file (e.g.
// /proc/PID/ns/net or /run/netns/NAME), the value PeersConfig.NetnsInode
// filters on.
func NetnsInode(path string) (uint32, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("network namespace %s: %w", path, err)
	}
	return uint32(st.Ino), nil
}
