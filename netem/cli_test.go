package netem

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestApplyWithoutNetemExitsTwoUnchanged runs the real `etcdscope netem
// apply` on a veth inside a network namespace this test creates. On a
// kernel without sch_netem (the development machine) it must exit 2 with
// one line naming CONFIG_NET_SCH_NETEM and `modprobe sch_netem`, and tc
// must show the same tree as before. Whether netem exists is decided
// independently, by tc itself; on a kernel that has it, apply must work
// and clear must restore the same tree.
func TestApplyWithoutNetemExitsTwoUnchanged(t *testing.T) {
	testenv.RequireRoot(t)
	ipBin := testenv.LookPath(t, "ip", "iproute2")
	tcBin := testenv.LookPath(t, "tc", "iproute2")
	bin := buildCLI(t)
	ns := fmt.Sprintf("etcdscope-test-%d", time.Now().UnixNano()%1e9)
	sh := func(args ...string) (string, error) {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		return string(out), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := sh(args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	must(ipBin, "netns", "add", ns)
	t.Cleanup(func() { exec.Command(ipBin, "netns", "del", ns).Run() })
	must(ipBin, "-n", ns, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1")
	must(ipBin, "-n", ns, "addr", "add", "10.98.0.1/24", "dev", "veth0")
	must(ipBin, "-n", ns, "link", "set", "veth0", "up")
	must(ipBin, "-n", ns, "link", "set", "veth1", "up")

	snapshot := func() string {
		return must(tcBin, "-n", ns, "qdisc", "show") + must(tcBin, "-n", ns, "filter", "show", "dev", "veth0")
	}
	hostBefore := must(tcBin, "qdisc", "show")
	before := snapshot()
	stateDir := t.TempDir()

	// The oracle: does tc manage to create a netem qdisc here?
	_, netemErr := sh(tcBin, "-n", ns, "qdisc", "add", "dev", "veth1", "root", "netem", "delay", "1ms")
	hasNetem := netemErr == nil
	if hasNetem {
		must(tcBin, "-n", ns, "qdisc", "del", "dev", "veth1", "root")
	}

	for _, cls := range []string{ClassifierBPF, ClassifierU32} {
		cmd := exec.Command(ipBin, "netns", "exec", ns, bin, "netem", "apply", "--dev", "veth0",
			"--peer", "10.98.0.2", "--peer", "fd98::2", "--delay", "25ms", "--classifier", cls, "--state-dir", stateDir)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		t.Logf("classifier %s: exit %d\nstdout: %s\nstderr: %s", cls, code, stdout.String(), stderr.String())
		if !hasNetem {
			msg := stderr.String()
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if strings.Count(strings.TrimRight(msg, "\n"), "\n") != 0 {
				t.Errorf("stderr has more than one line:\n%s", msg)
			}
			for _, want := range []string{"CONFIG_NET_SCH_NETEM", "modprobe sch_netem"} {
				if !strings.Contains(msg, want) {
					t.Errorf("stderr lacks %q: %s", want, msg)
				}
			}
		} else {
			if code != 0 {
				t.Fatalf("kernel has netem but apply exited %d", code)
			}
			out, err := sh(ipBin, "netns", "exec", ns, bin, "netem", "clear", "--dev", "veth0", "--state-dir", stateDir)
			if err != nil {
				t.Fatalf("clear: %v\n%s", err, out)
			}
		}
		if after := snapshot(); after != before {
			t.Errorf("tc shows a different tree in the namespace:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if host := must(tcBin, "qdisc", "show"); host != hostBefore {
			t.Errorf("host qdiscs changed:\nbefore:\n%s\nafter:\n%s", hostBefore, host)
		}
		if ents, _ := os.ReadDir(stateDir); len(ents) != 0 {
			t.Errorf("state left behind: %v", ents)
		}
	}
}

// buildCLI builds ./cmd/etcdscope into a temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "etcdscope")
	build := exec.Command("go", "build", "-o", bin, "../cmd/etcdscope")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runCLI runs bin with args and returns stdout, stderr and the exit code.
func runCLI(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), stderr.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), 0
}
