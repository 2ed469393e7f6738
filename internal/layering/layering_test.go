package layering

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const mod = "github.com/etcdscope/etcdscope/"

// rules: a package pattern (as go list takes it) and the import path
// prefixes that none of its packages may depend on, directly or through
// others (go list -deps; tests' imports are not counted).
var rules = []struct {
	pkgs      string
	forbidden []string
	why       string
}{
	{"./event", []string{strings.TrimSuffix(mod, "/")}, "event is the vocabulary every layer shares: it depends on none of them"},
	{"./host", []string{mod + "tracer", mod + "analysis", "github.com/cilium/ebpf"}, "host reads facts from /proc, /sys and tracefs and loads no BPF"},
	{"./tracer", []string{mod + "analysis", mod + "exporter", mod + "report", mod + "netem", mod + "etcdinfo", mod + "cmd"}, "tracer loads BPF and decodes events; it knows nothing of reports"},
	{"./analysis/...", []string{mod + "tracer", mod + "host", mod + "netem", mod + "exporter", mod + "render", mod + "report", "github.com/cilium/ebpf"}, "analysis is pure Go over events and records, and returns numbers and typed results that the sinks word (prose_test.go)"},
	{"./etcdinfo", []string{mod + "tracer", "github.com/cilium/ebpf"}, "etcdinfo asks etcd and the host, not the kernel's BPF"},
	{"./netem", []string{mod + "tracer", mod + "analysis"}, "netem changes the network; tracing and analysis never depend on it, nor it on them"},
	{"./exporter", []string{mod + "tracer"}, "exporter is a sink of the pipeline: the CLI loads the tracers and hands them to it"},
	{"./exporter/otlp", []string{mod + "tracer", mod + "pipeline", mod + "render"}, "the OTLP sink turns the records serve hands it into spans: it reads no source"},
	{"./pipeline/...", []string{mod + "tracer"}, "the pipeline reads any source (a tracer, a capture) through its Read method; it loads no BPF"},
	{"./render", []string{mod + "tracer", mod + "host", mod + "pipeline", "github.com/cilium/ebpf"}, "render turns records and reports into text; it knows no source"},
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// TestImportRules fails on any dependency a rule forbids, naming the
// package that has it.
func TestImportRules(t *testing.T) {
	for _, r := range rules {
		cmd := exec.Command(goTool(), "list", "-deps", "-f", "{{.ImportPath}}", r.pkgs)
		cmd.Dir = "../.."
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", r.pkgs, err, stderr.String())
		}
		self := strings.TrimPrefix(strings.TrimSuffix(r.pkgs, "/..."), "./")
		sc := bufio.NewScanner(bytes.NewReader(out))
		n := 0
		for sc.Scan() {
			dep := sc.Text()
			n++
			if strings.HasPrefix(dep, mod+self) {
				continue // the package itself (and its subpackages)
			}
			for _, f := range r.forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s depends on %s: %s", r.pkgs, dep, r.why)
				}
			}
		}
		if n == 0 {
			t.Errorf("go list -deps %s listed nothing", r.pkgs)
		}
	}
}
