package render

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/event"
)

// hostile holds what a terminal acts on: an OSC title change ended by BEL,
// a clear-screen CSI, a CR that would let "fake" overwrite the line, a C1
// CSI (U+009B), DEL, and invalid UTF-8 (a lone 0xff and a cut rune).
const hostile = "e\x1b]0;owned\x07\x1b[2J\rfake\u009b31m\x7f\xff\xe6\x97"

// terminalSafe fails t if out holds a control other than '\n', a C1
// control or invalid UTF-8.
func terminalSafe(t *testing.T, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("invalid UTF-8 reached the output: %q", out)
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) {
			t.Errorf("control %U reached the output raw: %q", r, out)
			return
		}
	}
}

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"etcd", "etcd"},
		{"wal\n", "wal\n"},
		{"日本 é", "日本 é"},
		{"\x1b[31m", `\x1b[31m`},
		{"a\rb\tc\x00", `a\x0db\x09c\x00`},
		{"\x7f", `\x7f`},
		{"\u009b2J", `\u009b2J`},
		{"\xff", `\xff`},
		{"\xe6\x97", `\xe6\x97`}, // a cut rune: each byte
		{hostile, `e\x1b]0;owned\x07\x1b[2J\x0dfake\u009b31m\x7f\xff\xe6\x97`},
		// bidi and zero-width (issue 25): they reorder or hide the text
		{"a\u202eb\u2066c\u2069\u200bd\u200f\ufeff\u061c\u2028\U000e0041", `a\u202eb\u2066c\u2069\u200bd\u200f\ufeff\u061c\u2028\U000e0041`},
		{"soft\u00adhyphen, NBSP\u00a0kept", `soft\u00adhyphen, NBSP` + "\u00a0" + `kept`},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestTablesEscapeOutsideStrings: a comm, a path and a member name with
// ESC, CR, C1 and invalid UTF-8 reach the fsync report and the peers
// table escaped, and still visibly (the escaped form is there).
func TestTablesEscapeOutsideStrings(t *testing.T) {
	var recs []analysis.FsyncRecord
	for i := 0; i < 20; i++ {
		recs = append(recs, analysis.FsyncRecord{PID: 99, Comm: hostile, Path: "/wal/" + hostile, Syscall: "fdatasync", Dev: "254:1", DevName: hostile, FS: "ext4",
			FileKind: analysis.KindWAL, TotalNs: 1e6, Layers: analysis.Layers{OtherNs: 1e6}})
	}
	rep := analysis.BuildReport(recs, 0, 0, []analysis.Unavailable{{Probe: hostile, Text: hostile}, {Probe: hostile, Reason: event.ReasonNoModuleBTF, Module: hostile, Err: hostile}})
	var out bytes.Buffer
	if err := FsyncReport(&out, &rep); err != nil {
		t.Fatal(err)
	}
	terminalSafe(t, out.String())
	if !strings.Contains(out.String(), `e\x1b]0;owned\x07`) {
		t.Errorf("fsync report lacks the escaped comm:\n%s", out.String())
	}

	out.Reset()
	Peers(&out, &etcdmetric.PeersReport{Port: 2380, Members: []etcdmetric.Member{{Name: hostile}}, LeaderWarning: hostile})
	terminalSafe(t, out.String())
	if !strings.Contains(out.String(), `\x1b[2J`) {
		t.Errorf("peers table lacks the escaped member name:\n%s", out.String())
	}
}
