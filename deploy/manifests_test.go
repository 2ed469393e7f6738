package deploy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestPodMonitor checks deploy/podmonitor.yaml against the DaemonSets: its
// selector picks both DaemonSets' pods by their label, the port name is the
// container port's, and it sets the `node` label the leader alert joins on.
func TestPodMonitor(t *testing.T) {
	b, err := os.ReadFile("podmonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pm struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Spec       struct {
			Selector struct {
				MatchExpressions []struct {
					Key      string   `yaml:"key"`
					Operator string   `yaml:"operator"`
					Values   []string `yaml:"values"`
				} `yaml:"matchExpressions"`
			} `yaml:"selector"`
			PodMetricsEndpoints []struct {
				Port        string `yaml:"port"`
				Path        string `yaml:"path"`
				Relabelings []struct {
					SourceLabels []string `yaml:"sourceLabels"`
					TargetLabel  string   `yaml:"targetLabel"`
				} `yaml:"relabelings"`
			} `yaml:"podMetricsEndpoints"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &pm); err != nil {
		t.Fatalf("podmonitor.yaml: %v", err)
	}
	if pm.APIVersion != "monitoring.coreos.com/v1" || pm.Kind != "PodMonitor" {
		t.Errorf("%s %s, want monitoring.coreos.com/v1 PodMonitor", pm.APIVersion, pm.Kind)
	}
	if len(pm.Spec.Selector.MatchExpressions) != 1 || len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("want one selector expression and one endpoint: %+v", pm.Spec)
	}
	sel := pm.Spec.Selector.MatchExpressions[0]
	ep := pm.Spec.PodMetricsEndpoints[0]
	for _, file := range []string{"daemonset.yaml", "daemonset-netem.yaml"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// The pod template's name label and the container port's name.
		label := regexp.MustCompile(`(?m)^        app.kubernetes.io/name: (\S+)$`).FindSubmatch(raw)
		port := regexp.MustCompile(`(?m)^            - name: (\S+)\n              containerPort:`).FindSubmatch(raw)
		if label == nil || port == nil {
			t.Fatalf("%s: no pod template label or port name", file)
		}
		if sel.Key != "app.kubernetes.io/name" || sel.Operator != "In" || !slices.Contains(sel.Values, string(label[1])) {
			t.Errorf("selector %+v does not pick %s's pods (label %s)", sel, file, label[1])
		}
		if ep.Port != string(port[1]) {
			t.Errorf("endpoint port %q, %s names its port %q", ep.Port, file, port[1])
		}
	}
	if ep.Path != "/metrics" || len(ep.Relabelings) != 1 || ep.Relabelings[0].TargetLabel != "node" ||
		!slices.Equal(ep.Relabelings[0].SourceLabels, []string{"__meta_kubernetes_pod_node_name"}) {
		t.Errorf("endpoint %+v: want /metrics and node from __meta_kubernetes_pod_node_name", ep)
	}
}

// TestPrometheusRule checks that deploy/prometheusrule.yaml carries exactly
// the rule groups of alerts.yaml (`make prometheusrule` regenerates it) and
// that promtool accepts them.
func TestPrometheusRule(t *testing.T) {
	var pr struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Spec       struct {
			Groups any `yaml:"groups"`
		} `yaml:"spec"`
	}
	var alerts struct {
		Groups any `yaml:"groups"`
	}
	for f, v := range map[string]any{"prometheusrule.yaml": &pr, "alerts.yaml": &alerts} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("%s %s, want monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind)
	}
	if pr.Spec.Groups == nil || !reflect.DeepEqual(pr.Spec.Groups, alerts.Groups) {
		t.Fatal("prometheusrule.yaml spec.groups differ from alerts.yaml groups; run make prometheusrule")
	}
	out, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(f, out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(promtool(t, "check", "rules", f)))
}

// unitService reads a systemd unit's [Service] keys (last value wins, as
// systemd does for these keys).
func unitService(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv := map[string]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: line %q", path, line)
			}
			kv[k] = v
		}
	}
	return kv
}

// TestSystemdUnit checks deploy/etcdscope.service: its capability bounding
// set is the DaemonSet's capabilities; `systemd-analyze verify` accepts it
// (with ExecStart pointed at a freshly built binary); and, as root, its
// ExecStart arguments run under exactly that bounding set with
// no_new_privs (setpriv), attach the BPF programs and serve metrics. What
// this cannot check here: the rest of the sandbox (ProtectSystem=…),
// which needs systemd as PID 1.
func TestSystemdUnit(t *testing.T) {
	svc := unitService(t, "etcdscope.service")
	caps := strings.Fields(svc["CapabilityBoundingSet"])
	var want []string
	for _, m := range readManifests(t, "daemonset.yaml") {
		if m.Kind == "DaemonSet" {
			for _, c := range m.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add {
				want = append(want, "CAP_"+c)
			}
		}
	}
	sort.Strings(caps)
	sort.Strings(want)
	if len(want) == 0 || !slices.Equal(caps, want) {
		t.Errorf("CapabilityBoundingSet %v, the DaemonSet adds %v", caps, want)
	}
	if svc["NoNewPrivileges"] != "yes" || svc["User"] != "root" {
		t.Errorf("NoNewPrivileges=%s User=%s, want yes, root", svc["NoNewPrivileges"], svc["User"])
	}
	exec0 := strings.Fields(svc["ExecStart"])
	if len(exec0) < 2 || exec0[0] != "/usr/local/bin/etcdscope" || exec0[1] != "serve" {
		t.Fatalf("ExecStart %q: want /usr/local/bin/etcdscope serve ...", svc["ExecStart"])
	}

	dir := t.TempDir()
	bin := buildEtcdscope(t, dir)
	if sa := systemdAnalyze(t); sa != "" {
		b, _ := os.ReadFile("etcdscope.service")
		unit := filepath.Join(dir, "etcdscope.service")
		os.WriteFile(unit, bytes.ReplaceAll(b, []byte("/usr/local/bin/etcdscope"), []byte(bin)), 0o644)
		out, err := exec.Command(sa, "verify", unit).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		} else {
			t.Log("systemd-analyze verify: no complaints")
		}
	}

	testenv.RequireRoot(t)
	// The unit's arguments, except: a free loopback port, a comm nothing
	// has (so other tests' fsyncs do not matter), and no --etcd-metrics
	// (another test may run an etcd on 2381).
	var args []string
	for _, a := range exec0[2:] {
		switch {
		case strings.HasPrefix(a, "--listen="):
			a = "--listen=127.0.0.1:0"
		case strings.HasPrefix(a, "--comm="):
			a = "--comm=etcdscope-unit"
		case strings.HasPrefix(a, "--etcd-metrics="):
			continue
		}
		args = append(args, a)
	}
	bounding := "-all"
	for _, c := range caps {
		bounding += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	addr := startServe(t, bin, bounding, args)
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, tr := range []string{"fsync", "peers"} {
		m := regexp.MustCompile(`(?m)^etcdscope_bpf_programs_attached\{tracer="` + tr + `"\} ([1-9][0-9]*)$`).FindSubmatch(body)
		if m == nil {
			t.Errorf("under bounding set %s: no %s programs attached", bounding, tr)
			continue
		}
		t.Logf("unit's ExecStart under bounding set %s, no_new_privs: %s %s programs attached", bounding, m[1], tr)
	}
}

// buildEtcdscope builds ../cmd/etcdscope into dir and returns the binary's
// path.
func buildEtcdscope(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "etcdscope")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/etcdscope").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startServe runs `bin serve args` as root under the capability bounding
// set bounding (setpriv's -all,+bpf,...) with no_new_privs, waits up to 30
// s for its ready file and returns the address it listens on; the test's
// end stops it (SIGINT) and waits for it.
func startServe(t *testing.T, bin, bounding string, args []string) string {
	t.Helper()
	setpriv := testenv.LookPath(t, "setpriv", "util-linux")
	ready := filepath.Join(t.TempDir(), "ready")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, setpriv, append([]string{"--bounding-set=" + bounding, "--inh-caps=-all", "--no-new-privs", "--", bin, "serve"},
		append(args, "--ready-file="+ready)...)...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		<-exited
		cancel()
		t.Logf("serve's log:\n%s", log.String())
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		select {
		case <-exited:
			t.Fatalf("serve %q under bounding set %s exited before it was ready", args, bounding)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve %q under bounding set %s not ready in 30 s", args, bounding)
		}
	}
}

// systemdAnalyze returns the path of systemd-analyze (scripts/deps.sh
// installs it); without it the unit's syntax is not verified: SKIPPED in
// the log, and a failure under ETCDSCOPE_REQUIRE_BPF=1.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if testenv.Required() {
			t.Fatal("ETCDSCOPE_REQUIRE_BPF=1 but systemd-analyze not found (apt-get install systemd): the unit's syntax cannot be verified")
		}
		t.Log("SKIPPED: systemd-analyze verify (apt-get install systemd)")
	}
	return sa
}
