package host

import (
	"os"
	"strconv"
	"strings"
)

// EffectiveCaps returns the effective capability set of this process (a
// bit per capability number, from /proc/self/status CapEff); ok is false
// when it cannot be read.
func EffectiveCaps() (eff uint64, ok bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
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
