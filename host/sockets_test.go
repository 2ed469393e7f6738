package host

import (
	"net"
	"net/netip"
	"os"
	"testing"
)

// TestListenerPID finds this test's own listener, over IPv4 and IPv6.
func TestListenerPID(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s: %v", addr, err)
			continue
		}
		ap := netip.MustParseAddrPort(ln.Addr().String())
		pid, err := ListenerPID(ap)
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		if pid != os.Getpid() {
			t.Errorf("%s: pid %d, want %d", ap, pid, os.Getpid())
		}
	}
	if _, err := ListenerPID(netip.MustParseAddrPort("127.0.0.1:1")); err == nil {
		t.Error("found a listener on port 1")
	}
}
