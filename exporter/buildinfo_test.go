package exporter

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/etcdscope/etcdscope/internal/buildinfo"
)

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewBuildInfo(buildinfo.Info{Version: "v1.2.3", Revision: "abc", GoVersion: "go1.26.8"}))
	want := `# HELP etcdscope_build_info Always 1; the labels name the running build: version (git describe at build time), revision (git commit), goversion (Go toolchain).
# TYPE etcdscope_build_info gauge
etcdscope_build_info{goversion="go1.26.8",revision="abc",version="v1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "etcdscope_build_info"); err != nil {
		t.Error(err)
	}
}
