package host

import (
	"os"
	"strconv"
	"strings"
)

// EffectiveCaps returns the effective capability set of this process (a
// bit per capability number, from /proc/self/status CapEff); ok is false
// when it cannot be read.
func EffectiveCaps() (eff uint64, ok bool) { return statusCaps("/proc/self/status", "CapEff:") }

// PermittedCaps returns the permitted capability set of process pid
// (0: this one), from /proc/PID/status CapPrm; ok is false when it
// cannot be read.
func PermittedCaps(pid int) (prm uint64, ok bool) {
	path := "/proc/self/status"
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	return statusCaps(path, "CapPrm:")
}

// statusCaps reads the capability set of line key ("CapEff:") from the
// status file at path.
func statusCaps(path, key string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// HasCapability reports whether this process holds capability number c
// (unix.CAP_*) in its effective set (false when it cannot tell).
func HasCapability(c int) bool {
	eff, ok := EffectiveCaps()
	return ok && eff&(1<<c) != 0
}
