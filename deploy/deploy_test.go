// Package deploy holds the Kubernetes, Prometheus and Grafana files of
// etcdscope serve; its tests check them with the real tools (promtool) and
// against the exporter's own metric names.
package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/exporter"
	"github.com/etcdscope/etcdscope/internal/buildinfo"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// The parts of a DaemonSet these tests read.
type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		ContainerPort int `yaml:"containerPort"`
	} `yaml:"ports"`
	SecurityContext struct {
		Privileged               *bool `yaml:"privileged"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Capabilities             struct {
			Add  []string `yaml:"add"`
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type manifest struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Template struct {
			Metadata struct {
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				HostPID     bool        `yaml:"hostPID"`
				HostNetwork bool        `yaml:"hostNetwork"`
				Containers  []container `yaml:"containers"`
				Volumes     []struct {
					Name     string `yaml:"name"`
					HostPath struct {
						Path string `yaml:"path"`
						Type string `yaml:"type"`
					} `yaml:"hostPath"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func readManifests(t *testing.T, path string) []manifest {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("privileged: true")) {
		t.Errorf("%s: privileged: true", path)
	}
	var out []manifest
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(false)
	for {
		var m manifest
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}

// TestDaemonSets checks both DaemonSets: host PID and network namespaces,
// no privileged container, exactly the capabilities the tracers need
// (SYS_PTRACE for commit run in the pod; NET_ADMIN only in the netem
// variant), the BTF/bpffs/tracefs mounts,
// and a --listen port that matches the declared port, the scrape
// annotation and exporter.DefaultPort.
func TestDaemonSets(t *testing.T) {
	for _, c := range []struct {
		file, name string
		caps       []string
	}{
		{"daemonset.yaml", "etcdscope", []string{"BPF", "PERFMON", "SYS_PTRACE"}},
		{"daemonset-netem.yaml", "etcdscope-netem", []string{"BPF", "PERFMON", "SYS_PTRACE", "NET_ADMIN"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			var ds *manifest
			for _, m := range readManifests(t, c.file) {
				if m.Kind == "DaemonSet" {
					ds = &m
				}
			}
			if ds == nil || ds.Metadata.Name != c.name {
				t.Fatalf("no DaemonSet %s", c.name)
			}
			ps := ds.Spec.Template.Spec
			if !ps.HostPID || !ps.HostNetwork {
				t.Errorf("hostPID %v hostNetwork %v, want both", ps.HostPID, ps.HostNetwork)
			}
			if len(ps.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(ps.Containers))
			}
			ct := ps.Containers[0]
			sc := ct.SecurityContext
			if sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("privileged %v allowPrivilegeEscalation %v: want both explicitly false", sc.Privileged, sc.AllowPrivilegeEscalation)
			}
			if !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
				t.Errorf("drop %v, want [ALL]", sc.Capabilities.Drop)
			}
			add := slices.Clone(sc.Capabilities.Add)
			want := slices.Clone(c.caps)
			sort.Strings(add)
			sort.Strings(want)
			if !slices.Equal(add, want) {
				t.Errorf("capabilities %v, want %v", add, want)
			}
			mounts := map[string]string{}
			for _, m := range ct.VolumeMounts {
				mounts[m.MountPath] = m.Name
			}
			hostPaths := map[string]string{}
			for _, v := range ps.Volumes {
				hostPaths[v.Name] = v.HostPath.Path
			}
			for _, p := range []string{"/sys/kernel/btf", "/sys/fs/bpf", "/sys/kernel/tracing"} {
				if hostPaths[mounts[p]] != p {
					t.Errorf("%s: mounted from host path %q, want %s", p, hostPaths[mounts[p]], p)
				}
			}
			port := strconv.Itoa(exporter.DefaultPort)
			if len(ct.Args) == 0 || ct.Args[0] != "serve" {
				t.Errorf("args %v: want serve ...", ct.Args)
			}
			if !slices.Contains(ct.Args, "--listen=[$(NODE_IP)]:"+port) || !slices.Contains(ct.Args, "--listen-public") {
				t.Errorf("args %v: want --listen=[$(NODE_IP)]:%s and --listen-public", ct.Args, port)
			}
			// The image is the one docs/deploy.md tells the user to build
			// and push (`make image IMAGE=...`): no published image exists,
			// so any other reference (a public registry's) ends in
			// ImagePullBackOff.
			doc, err := os.ReadFile("../docs/deploy.md")
			if err != nil {
				t.Fatal(err)
			}
			built := ""
			if m := regexp.MustCompile("(?m)^make image IMAGE=(\\S+)$").FindSubmatch(doc); m != nil {
				built = string(m[1])
			}
			if built == "" || ct.Image != built || !strings.Contains(string(doc), "`"+ct.Image+"` in both DaemonSets") {
				t.Errorf("image %q: want the reference docs/deploy.md builds with make image (%q) and names for both DaemonSets", ct.Image, built)
			}
			if len(ct.Ports) != 1 || ct.Ports[0].ContainerPort != exporter.DefaultPort ||
				ds.Spec.Template.Metadata.Annotations["prometheus.io/port"] != port {
				t.Errorf("ports %v, annotation %q: want %s", ct.Ports, ds.Spec.Template.Metadata.Annotations["prometheus.io/port"], port)
			}
		})
	}
}

// promtoolPath prefers the promtool `make promtool` builds (Prometheus 3,
// with Kubernetes discovery) and falls back to Debian's.
func promtoolPath(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("../bin/promtool"); err == nil {
		return "../bin/promtool"
	}
	return testenv.LookPath(t, "promtool", "prometheus")
}

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin := promtoolPath(t)
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAlertRules runs promtool's own checks and the unit tests in
// alerts_test.yaml (each alert fires on its case and not on a neighbour).
func TestAlertRules(t *testing.T) {
	t.Log(strings.TrimSpace(promtool(t, "check", "rules", "alerts.yaml")))
	t.Log(strings.TrimSpace(promtool(t, "test", "rules", "alerts_test.yaml")))
	b, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "alerts.yaml", string(b))
	for _, a := range []string{"EtcdWALFsyncP99OverBudget", "EtcdLeaderHasHighestPeerRTT", "EtcdPeerRTTMetricInflated", "EtcdscopeLostEvents"} {
		if !strings.Contains(string(b), "alert: "+a) {
			t.Errorf("alerts.yaml has no alert %s", a)
		}
	}
}

// exportedNames lists the metric families serve can export, from the
// descriptors of a fresh exporter.Metrics, CommitMetrics and build info.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		exporter.NewMetrics().Describe(ch)
		exporter.NewCommitMetrics(nil, 1, nil, 1).Describe(ch)
		exporter.NewBuildInfo(buildinfo.Info{}).Describe(ch)
		close(ch)
	}()
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		m := re.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		names[m[1]] = true
	}
	return names
}

// checkNames fails for any etcdscope_* name in text that the exporter
// does not export (a typo in a query returns nothing, silently).
func checkNames(t *testing.T, what, text string) {
	t.Helper()
	names := exportedNames(t)
	for _, n := range regexp.MustCompile(`\betcdscope_[a-z_]+`).FindAllString(text, -1) {
		base := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suf); ok && names[b] {
				base = b
			}
		}
		if !names[base] {
			t.Errorf("%s uses %s, which the exporter does not export", what, n)
		}
	}
}

type dashboard struct {
	Panels []struct {
		Title       string `json:"title"`
		Type        string `json:"type"`
		Description string `json:"description"`
		Targets     []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		FieldConfig struct {
			Defaults struct {
				Custom struct {
					Stacking struct {
						Mode string `json:"mode"`
					} `json:"stacking"`
				} `json:"custom"`
			} `json:"defaults"`
		} `json:"fieldConfig"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// grafanaVars replaces Grafana's variables with values that make the query
// plain PromQL, as Grafana does before sending it.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h",
	"$instance", ".*", "$comm", ".*")

// TestDashboard parses the dashboard JSON and every PromQL query in it
// (panel targets, and the selectors inside label_values() variables) with
// promtool, which parses each recording rule's expression with Prometheus'
// own PromQL parser; it also checks the panels the dashboard must have.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	var exprs []string
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	add := func(where, expr string) {
		if strings.TrimSpace(expr) == "" {
			t.Errorf("%s: empty query", where)
			return
		}
		exprs = append(exprs, expr)
		q, _ := json.Marshal(grafanaVars.Replace(expr)) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", len(exprs), q)
	}
	var stackedLayers, budget, peerRTT bool
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			add(p.Title, tg.Expr)
			if p.FieldConfig.Defaults.Custom.Stacking.Mode == "normal" && strings.Contains(tg.Expr, "etcdscope_fsync_layer_duration_seconds_sum") && strings.Contains(tg.Expr, "by (layer)") {
				stackedLayers = true
			}
		}
		all := ""
		for _, tg := range p.Targets {
			all += tg.Expr + "\n"
		}
		if strings.Contains(all, "histogram_quantile(0.99") && strings.Contains(all, "etcdscope_fsync_duration_seconds_bucket") && strings.Contains(all, "vector(0.010)") {
			budget = true
		}
		if strings.Contains(all, "etcdscope_peer_srtt_seconds_bucket") && strings.Contains(all, "etcd_network_peer_round_trip_time_seconds_bucket") {
			peerRTT = true
		}
	}
	lv := regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_]+\)$`)
	for _, v := range d.Templating.List {
		q, ok := v.Query.(map[string]any)
		if !ok {
			continue
		}
		s, _ := q["query"].(string)
		m := lv.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, s)
			continue
		}
		add("variable "+v.Name, m[1])
	}
	if !stackedLayers || !budget || !peerRTT {
		t.Errorf("panels: stacked layer split %v, p99 against the 10 ms budget %v, peer RTT against etcd's metric %v; want all", stackedLayers, budget, peerRTT)
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(f, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := promtool(t, "check", "rules", f)
	if !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(exprs))) {
		t.Errorf("promtool did not accept all %d queries:\n%s", len(exprs), out)
	}
	t.Logf("%d PromQL queries parsed by promtool", len(exprs))
	checkNames(t, "grafana-dashboard.json", string(b))
}

// TestPrometheusConfig runs `promtool check config prometheus.yaml`, which
// also checks the rule files it names. Debian's promtool is built without
// Kubernetes service discovery; with it, the discovery blocks are replaced
// by static targets and the rest (relabelling, rule files) is still
// checked, and the log says so. `make promtool` builds a full one into
// bin/, which this test prefers.
func TestPrometheusConfig(t *testing.T) {
	bin := promtoolPath(t)
	out, err := exec.Command(bin, "check", "config", "prometheus.yaml").CombinedOutput()
	if err == nil {
		t.Logf("%s: %s", bin, strings.TrimSpace(string(out)))
		return
	}
	if !strings.Contains(string(out), "field kubernetes_sd_configs not found") {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	t.Logf("%s has no Kubernetes service discovery (Debian's build); checking with static targets instead (make promtool for the full check)", bin)
	b, err := os.ReadFile("prometheus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	jobs, _ := cfg["scrape_configs"].([]any)
	if len(jobs) != 2 {
		t.Fatalf("%d scrape jobs, want 2 (etcdscope, etcd)", len(jobs))
	}
	for _, j := range jobs {
		job := j.(map[string]any)
		if _, ok := job["kubernetes_sd_configs"]; !ok {
			t.Errorf("job %v has no kubernetes_sd_configs", job["job_name"])
		}
		delete(job, "kubernetes_sd_configs")
		job["static_configs"] = []any{map[string]any{"targets": []any{"127.0.0.1:" + strconv.Itoa(exporter.DefaultPort)}}}
	}
	dir := t.TempDir()
	nb, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yaml"), nb, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(promtool(t, "check", "config", filepath.Join(dir, "prometheus.yaml"))))
}

// TestLayerListsNameEveryLayer: every text that lists the fsync layers for
// a user (the WAL alert's description, the descriptions of the dashboard
// panels that query the layer series, the help of the exporter's layer metrics, which Prometheus
// and Grafana show) names each layer the analysis splits a call into,
// analysis.LayerNames. The sixth layer, dm, was once missing from all of
// them while the exporter already exported it.
func TestLayerListsNameEveryLayer(t *testing.T) {
	missing := func(text string) []string {
		var out []string
		for _, l := range analysis.LayerNames {
			if !regexp.MustCompile(`\b` + l + `\b`).MatchString(text) {
				out = append(out, l)
			}
		}
		return out
	}
	var rf rulesFile
	b, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if strings.Contains(r.Annotations["description"], "layer") {
				texts["alerts.yaml "+r.Alert+" description"] = r.Annotations["description"]
			}
		}
	}
	var d dashboard
	if b, err = os.ReadFile("grafana-dashboard.json"); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		if len(p.Targets) > 0 && regexp.MustCompile(`etcdscope_(fsync_layer_duration_seconds|stacked_layer_seconds_total)`).MatchString(p.Targets[0].Expr) {
			texts["dashboard panel "+p.Title] = p.Description
		}
	}
	ch := make(chan *prometheus.Desc, 64)
	go func() { exporter.NewMetrics().Describe(ch); close(ch) }()
	for desc := range ch {
		s := desc.String()
		for _, name := range []string{"etcdscope_fsync_layer_duration_seconds", "etcdscope_stacked_layer_seconds_total"} {
			if strings.Contains(s, `fqName: "`+name+`"`) {
				texts["exporter help of "+name] = s
			}
		}
	}
	if len(texts) != 5 {
		t.Fatalf("found %d layer lists, want 5 (the WAL alert, the layer and stacked-levels panels, two metrics' help): %v", len(texts), texts)
	}
	for where, text := range texts {
		if m := missing(text); len(m) > 0 {
			t.Errorf("%s does not name the layers %v: %q", where, m, text)
		}
	}
}
