package deploy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// daemonSetArgs returns the serve container's arguments of file's
// DaemonSet and the host path and read-only flag behind each mount path.
func daemonSetArgs(t *testing.T, file string) (args []string, caps []string, mounts map[string]hostMount) {
	t.Helper()
	for _, m := range readManifests(t, file) {
		if m.Kind != "DaemonSet" {
			continue
		}
		ps := m.Spec.Template.Spec
		ct := ps.Containers[0]
		vols := map[string]hostMount{}
		for _, v := range ps.Volumes {
			vols[v.Name] = hostMount{path: v.HostPath.Path, typ: v.HostPath.Type}
		}
		mounts = map[string]hostMount{}
		for _, vm := range ct.VolumeMounts {
			h := vols[vm.Name]
			h.readOnly = vm.ReadOnly
			mounts[vm.MountPath] = h
		}
		return ct.Args, ct.SecurityContext.Capabilities.Add, mounts
	}
	t.Fatalf("%s: no DaemonSet", file)
	return nil, nil, nil
}

// hostMount is a container path's hostPath volume.
type hostMount struct {
	path, typ string
	readOnly  bool
}

// helpFlag is a flag as `serve --help` lists it: "--name type" (a value:
// string, stringArray, duration...) or "--name[=true|false]" (a bool).
var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)(\[=true\|false\]| [a-zA-Z0-9]+)\s`)

// TestDaemonSetServeArgs checks daemonset.yaml's serve arguments against
// the real binary, built from this tree:
//   - it passes the commit tracer (--commit-comm=etcd, what `etcdscope
//     cluster` joins), duty-cycled (--commit-duty), with the member list
//     (--etcd-endpoints) that names the member in its /commit/entries;
//   - every flag is one `etcdscope serve --help` lists, a value given to
//     each flag that takes one and none to a bool;
//   - each file argument (--cacert, --cert, --key) is a read-only mount of
//     the same host file (hostPath type File);
//   - as root: the binary started with exactly these arguments, under the
//     DaemonSet's capabilities alone (setpriv, as TestSystemdUnit), beside
//     a real one-member etcd with client TLS, becomes ready, exports the
//     duty cycle's fraction (5/30) and serves /commit/entries naming its
//     member. What names this host's own is pointed at the test's: the
//     node address (127.0.0.1, port 0), etcd's URLs (127.0.9.28) and
//     certificates, and the comm (a copy of etcd named etcd-ds28, so that
//     other jobs' etcds on this machine are not taken for it).
func TestDaemonSetServeArgs(t *testing.T) {
	args, caps, mounts := daemonSetArgs(t, "daemonset.yaml")
	flags := map[string]string{}
	for _, a := range args[1:] {
		name, val, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[name] = val
	}
	if flags["commit-comm"] != "etcd" || flags["commit-duty"] == "" || !strings.HasPrefix(flags["etcd-endpoints"], "https://") {
		t.Errorf("args %q: want --commit-comm=etcd, a --commit-duty and https --etcd-endpoints", args)
	}
	for _, f := range []string{"cacert", "cert", "key"} {
		if m, ok := mounts[flags[f]]; !ok || m.path != flags[f] || m.typ != "File" || !m.readOnly {
			t.Errorf("--%s=%s: mounted from %+v, want the same host file, type File, read-only", f, flags[f], m)
		}
	}

	dir := t.TempDir()
	bin := buildEtcdscope(t, dir)
	out, _ := exec.Command(bin, "serve", "--help").CombinedOutput() // exit status: errHelp's
	help := string(out)
	listed := map[string]bool{} // flag -> takes a value
	for _, m := range helpFlag.FindAllStringSubmatch(help, -1) {
		listed[m[1]] = m[2] != "[=true|false]"
	}
	if len(listed) < 20 {
		t.Fatalf("serve --help lists %d flags: the pattern no longer reads it:\n%s", len(listed), help)
	}
	for _, a := range args[1:] {
		name, _, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		takes, ok := listed[name]
		switch {
		case !strings.HasPrefix(a, "--") || !ok:
			t.Errorf("%q: serve has no such flag", a)
		case takes && !hasVal:
			t.Errorf("%q: serve's --%s takes a value: give --%s=VALUE", a, name, name)
		case !takes && hasVal:
			t.Errorf("%q: serve's --%s is a bool: give it bare", a, name)
		}
	}

	testenv.RequireRoot(t)
	etcd := filepath.Join(dir, "etcd-ds28")
	b, err := os.ReadFile(testenv.EtcdBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(etcd, b, 0o755); err != nil {
		t.Fatal(err)
	}
	c := etcdtest.Start(t, etcdtest.Options{IPs: []string{"127.0.9.28"}, ClientTLS: true, Binary: etcd})
	m := c.Members[0]
	local := map[string]string{
		"listen": "127.0.0.1:0", "comm": "etcd-ds28", "commit-comm": "etcd-ds28", "etcd-metrics": m.MetricsURL,
		"etcd-endpoints": m.ClientURL, "cacert": c.CAFile, "cert": c.ClientCertFile, "key": c.ClientKeyFile,
	}
	var run []string
	for _, a := range args[1:] {
		if name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok && local[name] != "" {
			a = "--" + name + "=" + local[name]
		}
		run = append(run, a)
	}
	bounding := "-all"
	for _, c := range caps {
		bounding += ",+" + strings.ToLower(c)
	}
	addr := startServe(t, bin, bounding, run)
	hc := http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, []byte) {
		resp, err := hc.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	_, metrics := get("/metrics")
	frac := regexp.MustCompile(`(?m)^etcdscope_commit_duty_fraction (\S+)$`).FindSubmatch(metrics)
	if frac == nil {
		t.Errorf("/metrics has no etcdscope_commit_duty_fraction: the commit tracer did not start")
	} else if v, _ := strconv.ParseFloat(string(frac[1]), 64); v < 0.16 || v > 0.17 {
		t.Errorf("etcdscope_commit_duty_fraction %s: want 5s/30s's 0.1667", frac[1])
	}
	// The window names its member once serve has read the member list
	// (at the commit run's start; measured 2026-12-07: at once).
	want := strconv.FormatUint(m.ID, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		code, body := get("/commit/entries?since_index=0&limit=1")
		var w struct {
			V      int    `json:"v"`
			Member string `json:"member"`
		}
		if code == http.StatusOK && json.Unmarshal(body, &w) == nil && w.Member == want {
			t.Logf("/commit/entries: v %d, member %s", w.V, w.Member)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("/commit/entries: %d %s: want 200 and member %s within 20 s", code, body, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
