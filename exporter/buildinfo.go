package exporter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdscope/etcdscope/internal/buildinfo"
)

// NewBuildInfo returns the collector of etcdscope_build_info: a gauge,
// always 1, whose labels version, revision and goversion say which build
// is running (internal/buildinfo: the Makefile's `git describe`, else the
// Go toolchain's build data). One series per process; each label is at
// most 64 printable bytes.
func NewBuildInfo(in buildinfo.Info) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "build_info",
		Help:      "Always 1; the labels name the running build: version (git describe at build time), revision (git commit), goversion (Go toolchain).",
		ConstLabels: prometheus.Labels{
			"version":   in.Version,
			"revision":  in.Revision,
			"goversion": in.GoVersion,
		},
	}, func() float64 { return 1 })
}
