package render

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// screenLines is a terminal's first screen: what a user reads before
// scrolling (issue 26: the number and the cause first).
const screenLines = 24

// firstScreen says, per golden of a command's default (table) output,
// which line is its verdict or headline: the line with the number and the
// cause a user reads first. The first rule whose path pattern matches a
// golden applies; a golden no rule matches fails the test, so a new
// golden is classified when it is added.
var firstScreen = []struct {
	path    *regexp.Regexp // golden, relative to testdata/
	verdict *regexp.Regexp // its verdict or headline line
}{
	// etcdscope report over a peers recording: the headline (no metric
	// table in the recording).
	{regexp.MustCompile(`^capture/peers\.report\.txt$`), regexp.MustCompile(`^etcdscope peers: `)},
	// etcdscope fsync / report: the first group's verdict.
	{regexp.MustCompile(`^capture/.*\.report\.txt$`), regexp.MustCompile(`^\s*verdict: `)},
	// The verdicts' own golden lists verdict blocks, each one its line.
	{regexp.MustCompile(`^render/commit/verdicts\.txt$`), regexp.MustCompile(`^[^= ]`)},
	// etcdscope commit: the first verdict, or why no write is split.
	{regexp.MustCompile(`^render/commit/`), regexp.MustCompile(`^(verdict: |no write is split: )`)},
	// etcdscope diagnose: the worst finding, or an input not read when
	// there is none.
	{regexp.MustCompile(`^render/diagnose/`), regexp.MustCompile(`^(\[(BAD|WARN|UNKNOWN|OK)\] |not read )`)},
	// etcdscope peers: the first metric verdict or the leader warning
	// (every peers golden here has one; the headline alone, always line
	// 1, would let a verdict sink below the links).
	{regexp.MustCompile(`^render/peers`), regexp.MustCompile(`^(verdict: |WARNING: )`)},
	// etcdscope peers as a README walk printed it live (three etcd
	// v3.6.16 members, --etcd-metrics): its first metric verdict.
	{regexp.MustCompile(`^loopback3/peers\.txt$`), regexp.MustCompile(`^verdict: `)},
	// etcdscope cluster: its verdict, named or "no single".
	{regexp.MustCompile(`^render/cluster/`), regexp.MustCompile(`^verdict: `)},
	// etcdscope merge: the guest level's row.
	{regexp.MustCompile(`^render/merge\.txt$`), regexp.MustCompile(`^ L1 guest +\| `)},
	// etcdscope hypervisor: the images' table head.
	{regexp.MustCompile(`^render/hypervisor\.txt$`), regexp.MustCompile(`^ image +\| `)},
}

// TestVerdictOnFirstScreen reads every text golden of the renderers and
// of the capture replays and checks that its verdict or headline line
// (firstScreen) is within its first screenLines lines.
func TestVerdictOnFirstScreen(t *testing.T) {
	for _, f := range textGoldens(t) {
		name := strings.TrimPrefix(f, "../testdata/")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := verdictOnFirstScreen(name, string(b)); err != "" {
			t.Error(err)
		}
	}
}

// verdictOnFirstScreen returns why the golden name with text out does not
// show its verdict line on its first screen ("" when it does).
func verdictOnFirstScreen(name, out string) string {
	for _, r := range firstScreen {
		if !r.path.MatchString(name) {
			continue
		}
		for i, l := range strings.Split(out, "\n") {
			if r.verdict.MatchString(l) {
				if i >= screenLines {
					return name + ": its verdict is line " + strconv.Itoa(i+1) + ", past the first " + strconv.Itoa(screenLines) + ": " + l
				}
				return ""
			}
		}
		return name + ": no line matches its verdict pattern " + r.verdict.String()
	}
	return name + ": no firstScreen rule names this golden: add one"
}
