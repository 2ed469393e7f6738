package exporter

import (
	"regexp"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdscope/etcdscope/exporter/otlp"
	"github.com/etcdscope/etcdscope/internal/buildinfo"
)

// TestHelpConcise (issue 26): every metric's Help is at most 200
// characters: what is counted and its unit first, the reasoning in
// docs/metrics.md. Before, 15 ran to 203-480. The Help is read from each
// collector's Describe (prometheus.Desc has no accessor: its String form).
func TestHelpConcise(t *testing.T) {
	const maxHelpRunes = 200
	descRe := regexp.MustCompile(`fqName: "([^"]*)", help: ("(?:[^"\\]|\\.)*")`)
	spans, err := otlp.New(otlp.Config{Endpoint: "127.0.0.1:4317", Insecure: true}, nil) // connects only when it exports
	if err != nil {
		t.Fatal(err)
	}
	collectors := map[string]prometheus.Collector{
		"NewMetrics":       NewMetrics(),
		"NewCommitMetrics": NewCommitMetrics(nil, 4, nil, 0.1),
		"NewBuildInfo":     NewBuildInfo(buildinfo.Info{}),
		"otlp.Sink":        spans.Collector(),
	}
	n := 0
	for name, c := range collectors {
		ch := make(chan *prometheus.Desc, 256)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descRe.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("%s: cannot read the Help of %s", name, d)
			}
			help, err := strconv.Unquote(m[2])
			if err != nil {
				t.Fatalf("%s: %s: %v", name, m[1], err)
			}
			n++
			if r := utf8.RuneCountInString(help); r > maxHelpRunes {
				t.Errorf("%s: Help of %d characters, at most %d (the why goes to docs/metrics.md):\n%s", m[1], r, maxHelpRunes, help)
			}
		}
	}
	if n < 40 {
		t.Errorf("only %d metric descriptions read: a collector missing?", n)
	}
}
