package netem

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestOpenNetns checks what --netns accepts: this process's own network
// namespace by path, and refuses with a *UsageError a missing name, a
// regular file, and a namespace of another type. The inode of what it
// opened is compared with stat(2) of the same path (the oracle).
func TestOpenNetns(t *testing.T) {
	fd, err := OpenNetns("/proc/self/ns/net")
	if err != nil {
		t.Fatalf("own namespace: %v", err)
	}
	var got, want unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if err := unix.Stat("/proc/self/ns/net", &want); err != nil {
		t.Fatal(err)
	}
	if got.Ino != want.Ino {
		t.Errorf("opened namespace inode %d, /proc/self/ns/net is %d", got.Ino, want.Ino)
	}

	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ arg, want string }{
		{"etcdscope-no-such-ns-" + fmt.Sprint(os.Getpid()), "no such network namespace"},
		{"", "give a name"},
		{"..", "give a name"},
		{plain, "not a namespace file"},
		{"/proc/self/ns/mnt", "not a network namespace"},
	} {
		fd, err := OpenNetns(c.arg)
		var ue *UsageError
		if err == nil {
			unix.Close(fd)
			t.Errorf("OpenNetns(%q) succeeded, want a usage error", c.arg)
			continue
		}
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("OpenNetns(%q) = %v, want a usage error with %q", c.arg, err, c.want)
		}
	}
	if got := NetnsPath("m3"); got != "/var/run/netns/m3" {
		t.Errorf("NetnsPath(m3) = %q", got)
	}
	if got := NetnsPath("/proc/1/ns/net"); got != "/proc/1/ns/net" {
		t.Errorf("NetnsPath(/proc/1/ns/net) = %q", got)
	}
}

// TestLoopbackWarningNamesTheRoundTrip pins the text apply prints on lo.
func TestLoopbackWarningNamesTheRoundTrip(t *testing.T) {
	w := LoopbackWarning(Spec{Dev: "lo", Peers: mustAddrs("127.0.0.3"), Port: 2380, Delay: 25 * time.Millisecond})
	for _, want := range []string{"lo is a loopback device", "25ms once, not twice", "127.0.0.3:2380 reads ~25ms", "--netns", "--delay 50ms"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning lacks %q: %s", want, w)
		}
	}
}

// TestCLINetnsFlag runs the real binary: `netem show --netns NAME` reads a
// veth that exists only in a namespace this test creates (tc -n NAME is
// the oracle for its root qdisc), the same device without --netns and bad
// --netns values exit 2 with one line, and `apply --netns` behaves as the
// kernel allows (this host has no sch_netem: exit 2, nothing changed; a
// kernel with it: applied, then cleared).
func TestCLINetnsFlag(t *testing.T) {
	testenv.RequireRoot(t)
	ipBin := testenv.LookPath(t, "ip", "iproute2")
	tcBin := testenv.LookPath(t, "tc", "iproute2")
	bin := buildCLI(t)
	ns := fmt.Sprintf("esnetns%d", time.Now().UnixNano()%1e6)
	if out, err := exec.Command(ipBin, "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(ipBin, "netns", "del", ns).Run() })
	for _, c := range [][]string{
		{"-n", ns, "link", "add", "esv0", "type", "veth", "peer", "name", "esv1"},
		{"-n", ns, "link", "set", "esv0", "up"}, {"-n", ns, "link", "set", "esv1", "up"},
	} {
		if out, err := exec.Command(ipBin, c...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", c, err, out)
		}
	}
	tcq, err := exec.Command(tcBin, "-n", ns, "qdisc", "show", "dev", "esv0").CombinedOutput()
	if err != nil {
		t.Fatalf("tc: %v\n%s", err, tcq)
	}
	kind := strings.Fields(string(tcq))[1] // "qdisc noqueue 0: root ..."

	for _, arg := range []string{ns, "/var/run/netns/" + ns} {
		out, errOut, code := runCLI(t, bin, "netem", "show", "--netns", arg, "--dev", "esv0")
		if code != 0 || !strings.Contains(out, "esv0") || !strings.Contains(out, kind) {
			t.Errorf("show --netns %s: exit %d, want 0 and esv0 with root %s\nstdout: %s\nstderr: %s", arg, code, kind, out, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"netem", "show", "--dev", "esv0"}, "--netns"},
		{[]string{"netem", "show", "--netns", ns + "x"}, "no such network namespace"},
		{[]string{"netem", "clear", "--dev", "esv0", "--netns", "/proc/self/ns/pid"}, "not a network namespace"},
	} {
		_, errOut, code := runCLI(t, bin, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
			t.Errorf("%v: exit %d, want 2 and one line with %q; stderr: %s", c.args, code, c.want, errOut)
		}
	}

	_, netemErr := exec.Command(tcBin, "-n", ns, "qdisc", "add", "dev", "esv1", "root", "netem", "delay", "1ms").CombinedOutput()
	hasNetem := netemErr == nil
	if hasNetem {
		exec.Command(tcBin, "-n", ns, "qdisc", "del", "dev", "esv1", "root").Run()
	}
	before, _ := exec.Command(tcBin, "-n", ns, "qdisc", "show").CombinedOutput()
	stateDir := t.TempDir()
	out, errOut, code := runCLI(t, bin, "netem", "apply", "--netns", ns, "--dev", "esv0", "--peer", "10.97.0.2", "--delay", "25ms", "--state-dir", stateDir)
	t.Logf("apply --netns: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	switch {
	case !hasNetem && (code != 2 || !strings.Contains(errOut, "CONFIG_NET_SCH_NETEM")):
		t.Errorf("no netem here: exit %d, want 2 naming CONFIG_NET_SCH_NETEM", code)
	case hasNetem && code != 0:
		t.Errorf("netem here, but apply --netns exited %d", code)
	case hasNetem:
		if _, e, c := runCLI(t, bin, "netem", "clear", "--netns", ns, "--dev", "esv0", "--state-dir", stateDir); c != 0 {
			t.Errorf("clear --netns: exit %d: %s", c, e)
		}
	}
	if after, _ := exec.Command(tcBin, "-n", ns, "qdisc", "show").CombinedOutput(); string(after) != string(before) {
		t.Errorf("namespace qdiscs changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
