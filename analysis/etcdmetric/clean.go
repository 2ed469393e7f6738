package etcdmetric

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MaxSkippedLines bounds how many lines ParseText drops (each one costs a
// re-parse) before it gives up on a text that is not an exposition.
const MaxSkippedLines = 64

// maxLineBytes bounds one line of pasted text (a scanner buffer).
const maxLineBytes = 1 << 20

// MaxSampleLines bounds the samples one text may hold. One etcd member's
// /metrics has 1,500 to 10,000 (the gRPC method series the most); each
// parsed sample costs ~450 bytes (a 16 MiB text of 842,351 short samples
// took diagnose to 381 MB), so past this bound the text is refused before
// it is parsed: ~45 MB at most per input.
const MaxSampleLines = 100_000

// ErrTooManySamples: a text with more than MaxSampleLines samples.
var ErrTooManySamples = fmt.Errorf("more than %d samples: not one etcd member's /metrics; keep the etcd_ and process_ series (grep -E '^(etcd|process)_')", MaxSampleLines)

// Cleaned is what the clean-up pass in front of expfmt did to a text.
type Cleaned struct {
	// Samples: sample lines handed to expfmt.
	Samples int `json:"samples"`
	// Dropped: lines that were neither a sample nor a comment (shell
	// prompts, curl's progress meter, Markdown fences, prose).
	Dropped int `json:"dropped"`
	// Rejected: sample-looking lines expfmt refused, with its reason (the
	// first few), dropped so that the rest of the text still parses.
	Rejected []Rejected `json:"rejected,omitempty"`
}

// Rejected is a line expfmt refused and its message.
type Rejected struct {
	Line   string `json:"line"`
	Reason string `json:"reason"`
}

// ParseText parses /metrics text as people paste it. A clean-up pass in
// front of expfmt (the parser itself is prometheus/common's):
//   - cuts anything before a "# HELP"/"# TYPE" glued to curl's progress
//     meter, strips leading blanks, Markdown quote marks ("> ") and list
//     bullets ("* "), and CRs;
//   - drops # HELP and # TYPE lines, so that every sample parses as
//     untyped and a histogram excerpt without its +Inf line, a TYPE line
//     after the samples, or two scrapes pasted one after the other do not
//     fail the whole text (FromFamilies assembles _bucket/_sum/_count by
//     name);
//   - drops lines that are not samples, and samples expfmt rejects (at
//     most MaxSkippedLines), reporting both in Cleaned.
//
// It fails when nothing parses.
func ParseText(r io.Reader) (map[string]*dto.MetricFamily, Cleaned, error) {
	var c Cleaned
	var lines []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	for sc.Scan() {
		l := cleanLine(sc.Text())
		switch {
		case l == "":
		case strings.HasPrefix(l, "#"):
		case looksLikeSample(l):
			if len(lines) == MaxSampleLines {
				return nil, c, ErrTooManySamples
			}
			lines = append(lines, l)
		default:
			c.Dropped++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, c, fmt.Errorf("reading metrics text: %w", err)
	}
	for {
		if len(lines) == 0 {
			return nil, c, fmt.Errorf("no metric samples in the text")
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(strings.NewReader(strings.Join(lines, "\n") + "\n"))
		if err == nil {
			c.Samples = len(lines)
			if dropNewlineLabels(fams, &c); len(fams) == 0 {
				return nil, c, fmt.Errorf("no metric samples in the text (every one has a newline in a label value)")
			}
			return fams, c, nil
		}
		var pe expfmt.ParseError
		if !errors.As(err, &pe) || pe.Line < 1 || pe.Line > len(lines) || len(c.Rejected) >= MaxSkippedLines {
			return nil, c, fmt.Errorf("parsing /metrics text: %w", err)
		}
		c.Rejected = append(c.Rejected, Rejected{Line: lines[pe.Line-1], Reason: pe.Msg})
		lines = append(lines[:pe.Line-1], lines[pe.Line:]...)
	}
}

func cleanLine(l string) string {
	l = strings.TrimRight(l, "\r")
	// curl's progress meter runs into the first line of the body.
	for _, m := range []string{"# HELP ", "# TYPE "} {
		if i := strings.Index(l, m); i > 0 {
			l = l[i:]
		}
	}
	for {
		t := strings.TrimLeft(l, " \t")
		switch {
		case strings.HasPrefix(t, "> "):
			t = t[2:]
		case strings.HasPrefix(t, "* "):
			t = t[2:]
		}
		if t == l {
			return l
		}
		l = t
	}
}

// looksLikeSample: a metric name start and a value after a blank.
func looksLikeSample(l string) bool {
	c := l[0]
	if !(c == '_' || c == ':' || (c|0x20) >= 'a' && (c|0x20) <= 'z') {
		return false
	}
	return strings.ContainsAny(l, " \t")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// LooksLikeMetrics reports whether data reads as /metrics text: at least
// one sample line of an etcd_ (or process_) family among its first lines.
func LooksLikeMetrics(data []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	for n := 0; sc.Scan() && n < 2000; n++ {
		l := cleanLine(sc.Text())
		if l == "" || !looksLikeSample(l) {
			continue
		}
		if strings.HasPrefix(l, "etcd_") && (strings.Contains(l, "} ") || strings.Contains(l, "}\t") || strings.Count(l, " ") >= 1) {
			name := l
			if i := strings.IndexAny(l, "{ \t"); i > 0 {
				name = l[:i]
			}
			if !strings.ContainsAny(name, "\"=|") {
				return true
			}
		}
	}
	return false
}

// ErrNewlineLabel is why a sample whose label value holds a newline is
// rejected (its Rejected.Reason, beside the parser's errors): no name of
// a member, peer or instance has one, and printed in a line it would
// start a line of its choosing.
var ErrNewlineLabel = errors.New("a label value holds a newline")

// dropNewlineLabels removes from fams every sample with a newline in a
// label value, each a Rejected line in c (up to MaxSkippedLines).
func dropNewlineLabels(fams map[string]*dto.MetricFamily, c *Cleaned) {
	for name, f := range fams {
		kept := f.Metric[:0]
		for _, m := range f.Metric {
			bad := false
			for _, l := range m.GetLabel() {
				bad = bad || strings.Contains(l.GetValue(), "\n")
			}
			if !bad {
				kept = append(kept, m)
				continue
			}
			if len(c.Rejected) < MaxSkippedLines {
				c.Rejected = append(c.Rejected, Rejected{Line: name + "{…}", Reason: ErrNewlineLabel.Error()})
			}
		}
		f.Metric = kept
		if len(kept) == 0 {
			delete(fams, name)
		}
	}
}
