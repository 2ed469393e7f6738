package etcdmetric

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestParseTextSampleBound: a text of MaxSampleLines samples parses; one
// more is refused with ErrTooManySamples before expfmt sees any.
func TestParseTextSampleBound(t *testing.T) {
	var b strings.Builder
	for i := range MaxSampleLines {
		fmt.Fprintf(&b, "etcd_a{b=\"%x\"} 1\n", i)
	}
	if fams, _, err := ParseText(strings.NewReader(b.String())); err != nil || len(fams["etcd_a"].GetMetric()) != MaxSampleLines {
		t.Fatalf("%d samples: %v", MaxSampleLines, err)
	}
	b.WriteString("etcd_a{b=\"last\"} 1\n")
	if _, _, err := ParseText(strings.NewReader(b.String())); !errors.Is(err, ErrTooManySamples) {
		t.Errorf("%d samples: %v, want ErrTooManySamples", MaxSampleLines+1, err)
	}
}
