package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/render"
)

// TestOutsideStringsEscaped (issue 25): a recording whose comm holds an
// OSC title change, BEL, CR and a C1 CSI and whose path holds invalid
// UTF-8, replayed by report, and an etcd log (named with an ESC in it)
// whose lines hold the same plus a clear-screen CSI, fed to diagnose:
// nothing of it reaches stdout raw, and the escaped form is there.
func TestOutsideStringsEscaped(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.jsonl")
	os.WriteFile(rec, []byte(`{"type":"fsync","v":1,"start_ns":1,"end_ns":2,"total_ns":1,"pid":1,"tid":1,"comm":"e\u001b]0;owned\u0007\r\u009b2J","syscall":"fdatasync","path":"/x/`+"\xff\xfe"+`\u001b[2J","fs":"ext4","file_kind":"wal"}`+"\n"), 0o644)
	log := filepath.Join(dir, "etcd\x1b[2J.log")
	os.WriteFile(log, []byte("2017-02-10 08:02:47.025304 W | etcdserver: apply entries took too long [250.5ms for 1 entries] \x1b]0;owned\x07\x1b[2J\rfake\xff\xfe \xc2\x9b31m\n"+
		`{"level":"warn","ts":"2022-08-30T09:19:24.521Z","caller":"etcdserver/util.go:166","msg":"apply request took too long","took":"150ms","request":"\u001b[2J\r\u009b"}`+"\n"), 0o644)
	for _, args := range [][]string{{"report", rec}, {"diagnose", log}} {
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", args[0], err, out)
		}
		s := string(out)
		if !utf8.ValidString(s) {
			t.Errorf("%s: invalid UTF-8 on stdout:\n%q", args[0], s)
		}
		if i := strings.IndexFunc(s, func(r rune) bool { return r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f }); i >= 0 {
			t.Errorf("%s: control %q raw on stdout at byte %d:\n%q", args[0], s[i], i, s)
		}
		if !strings.Contains(s, `\x1b]0;owned\x07`) {
			t.Errorf("%s: the escaped OSC is not shown:\n%s", args[0], s)
		}
	}
}

// hostileStrings are the classes of an outside string that must not reach
// a terminal raw: an OSC title change and a clear screen (ESC), a carriage
// return that overwrites what was printed (CR), bytes that are not UTF-8,
// and a C1 CSI (U+009B, a CSI to terminals that take 8-bit controls).
var hostileStrings = map[string]string{
	"esc":  "\x1b]0;owned\x07\x1b[2J",
	"cr":   "ok\rFAKE",
	"utf8": "\xff\xfe\xc3",
	"c1":   "\u009b31m",
	"nl":   "ok\n" + forgedLine,
	// bidi: a right-to-left override shows the rest of its line reversed,
	// isolates and zero-width characters hide text (issue 25)
	"bidi": "ok\u202etxt.exe\u2066\u2069\u200b\u200f\ufeff",
}

// forgedLine is what a newline in an outside string would start a line
// with: a verdict of its own (a hostile check, 2026-12-06: an fs of
// "ext4\n  verdict: OK ..." printed a forged verdict line in report's
// table, and a log message a forged [OK] finding in diagnose's).
const forgedLine = "[OK] FORGED verdict"

// rawControl returns where out has a byte a terminal would act on or
// misread: invalid UTF-8, a control other than newline (C0, DEL, C1), or
// an invisible character that reorders or hides text (bidi, zero-width:
// render.Invisible); -1 for none.
func rawControl(out string) int {
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRuneInString(out[i:])
		if r == utf8.RuneError && n == 1 || r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f || render.Invisible(r) {
			return i
		}
		i += n
	}
	return -1
}

// jsonStringOf writes s as a JSON string literal as a hostile recording
// would hold it: controls as \u00XX escapes, other bytes (invalid UTF-8
// too) raw.
func jsonStringOf(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == '"' || c == '\\':
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// promStringOf writes s as a /metrics label value literal: raw bytes, with
// only the text format's escapes (backslash, quote, newline).
func promStringOf(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// TestOutsideStringsClasses (issue 25): every string field of an fsync
// record (read from the type itself, so a new field is covered), every
// class of hostileStrings in each, replayed by report; the same classes
// in an etcd log line (capnslog and zap) and in /metrics label values fed
// to diagnose; and a recording's file name, missing (the error line names
// it); each with --output json too. Each is taken (exit 0: the string is data; a metrics text
// that is not UTF-8 is refused, exit 2), and nothing
// printed, on stdout or stderr, carries a raw control or invalid UTF-8;
// the comm is in the table, escaped (render.Escape).
func TestOutsideStringsClasses(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base := analysis.FsyncRecord{Type: "fsync", Version: analysis.SchemaVersion, StartNs: 1, EndNs: 2, TotalNs: 1, PID: 1, TID: 1,
		Comm: "etcd", Syscall: "fdatasync", Dev: "259:0", DevName: "nvme0n1", Disks: []string{"259:0"}, FS: "ext4", Path: "/var/lib/etcd/member/wal/0.wal", FileKind: analysis.KindWAL}
	type input struct {
		what, name, text string
		want             string // printed escaped on stdout ("": need not be shown)
		rc               int    // the exit code
		absent           bool   // name is not created: the error line names it
	}
	var inputs []input
	rt := reflect.TypeOf(base)
	classes := slices.Sorted(maps.Keys(hostileStrings))
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "type" || tag == "" || tag == "-" || (f.Type.Kind() != reflect.String && f.Type != reflect.TypeOf([]string(nil))) {
			continue
		}
		for _, class := range classes {
			line, err := json.Marshal(base)
			if err != nil {
				t.Fatal(err)
			}
			// The field's value in the line, then the hostile literal in its place.
			cur, err := json.Marshal(reflect.ValueOf(base).Field(i).Interface())
			if err != nil {
				t.Fatal(err)
			}
			lit := jsonStringOf(hostileStrings[class])
			if f.Type.Kind() != reflect.String {
				lit = "[" + lit + "]"
			}
			key := []byte(`"` + tag + `":` + string(cur))
			if !bytes.Contains(line, key) {
				t.Fatalf("no %s in %s", key, line)
			}
			line = bytes.Replace(line, key, []byte(`"`+tag+`":`+lit), 1)
			want := ""
			if tag == "comm" { // as decoded: JSON makes invalid UTF-8 U+FFFD
				var v string
				if err := json.Unmarshal([]byte(lit), &v); err != nil {
					t.Fatal(err)
				}
				want = render.EscapeLine(v)
			}
			inputs = append(inputs, input{"report, field " + tag + " " + class, "rec-" + tag + "-" + class + ".jsonl", string(line) + "\n", want, 0, false})
		}
	}
	// The metrics text format is UTF-8: a sample whose label is not is no
	// sample, and a text of only those is refused (exit 2).
	// So is a label value with a newline (no name of a member has one).
	promRC := map[string]int{"utf8": 2, "nl": 2}
	for _, class := range classes {
		h := hostileStrings[class]
		inputs = append(inputs,
			input{what: "report, a missing file named " + class, name: "missing-" + h + ".jsonl", rc: 2, absent: true},
			input{"diagnose, capnslog line " + class, "capnslog-" + class + ".log",
				"2017-02-10 08:02:47.025304 W | etcdserver: apply entries took too long [250.5ms for 1 entries] " + h + "\n", "", 0, false},
			input{"diagnose, zap slow fdatasync msg " + class, "zapmsg-" + class + ".log",
				`{"level":"warn","ts":"2022-08-30T09:19:24.521Z","caller":"wal/wal.go:80","msg":` + jsonStringOf("slow fdatasync"+h) + `,"took":"1.5s","expected-duration":"1s"}` + "\n", "", 0, false},
			input{"diagnose, zap line " + class, "zap-" + class + ".log",
				`{"level":"warn","ts":"2022-08-30T09:19:24.521Z","caller":"etcdserver/util.go:166","msg":"apply request took too long","took":"150ms","request":` + jsonStringOf(h) + "}\n", "", 0, false},
			input{"diagnose, metrics label " + class, "metrics-" + class + ".prom",
				"etcd_server_id{server_id=" + promStringOf(h) + "} 1\n" +
					"etcd_network_peer_round_trip_time_seconds_bucket{To=" + promStringOf(h) + `,le="0.0001"} 0` + "\n" +
					"etcd_network_peer_round_trip_time_seconds_bucket{To=" + promStringOf(h) + `,le="+Inf"} 10` + "\n" +
					"etcd_network_peer_round_trip_time_seconds_sum{To=" + promStringOf(h) + "} 0.5\n" +
					"etcd_network_peer_round_trip_time_seconds_count{To=" + promStringOf(h) + "} 10\n" +
					`etcd_disk_wal_fsync_duration_seconds_bucket{instance=` + promStringOf(h) + `,le="0.001"} 100` + "\n" +
					`etcd_disk_wal_fsync_duration_seconds_bucket{instance=` + promStringOf(h) + `,le="+Inf"} 100` + "\n" +
					`etcd_disk_wal_fsync_duration_seconds_sum{instance=` + promStringOf(h) + `} 0.05` + "\n" +
					`etcd_disk_wal_fsync_duration_seconds_count{instance=` + promStringOf(h) + `} 100` + "\n", "", promRC[class], false},
		)
	}
	// Each again with --output json (issue 25: encoding/json wrote C1
	// controls raw; render.JSONText escapes them).
	for _, in := range slices.Clone(inputs) {
		if !in.absent {
			in.what = strings.Replace(in.what, ",", " --output json,", 1)
			in.want = ""
			inputs = append(inputs, in)
		}
	}
	for _, in := range inputs {
		t.Run(in.what, func(t *testing.T) {
			p := filepath.Join(dir, in.name)
			if err := os.WriteFile(p, []byte(in.text), 0o644); err != nil && !in.absent {
				t.Fatal(err)
			} else if in.absent {
				os.Remove(p)
			}
			cmdline, _, _ := strings.Cut(in.what, ",")
			cmd := exec.Command(self, append(strings.Fields(cmdline), p)...)
			cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Run()
			rc := cmd.ProcessState.ExitCode()
			if rc != in.rc {
				t.Errorf("exit %d, want %d; stderr:\n%s", rc, in.rc, stderr.String())
			}
			if in.want != "" && !strings.Contains(stdout.String(), in.want) {
				t.Errorf("stdout lacks the escaped %q:\n%s", in.want, stdout.String())
			}
			for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
				if i := rawControl(out); i >= 0 {
					t.Errorf("exit %d: %s has %q raw at byte %d:\n%q", rc, name, out[i], i, out)
				}
				if i := strings.Index(out, "\n"+forgedLine); i >= 0 {
					t.Errorf("exit %d: %s starts a line with an outside string's %q:\n%s", rc, name, forgedLine, out)
				}
			}
			t.Logf("exit %d; stderr %q", rc, strings.TrimSpace(stderr.String()))
		})
	}
}

// TestPageEscapesOutsideStrings: the page `report --html` writes of a
// recording whose comm and path hold every class of hostileStrings carries
// none of them raw (a terminal showing the file would act on them), and
// shows them escaped as the table does (fails before: ESC and C1 raw).
func TestPageEscapesOutsideStrings(t *testing.T) {
	dir := t.TempDir()
	rec, page := filepath.Join(dir, "rec.jsonl"), filepath.Join(dir, "page.html")
	var all string
	for _, k := range slices.Sorted(maps.Keys(hostileStrings)) {
		all += hostileStrings[k]
	}
	line := `{"type":"fsync","v":1,"start_ns":1,"end_ns":2,"total_ns":1,"pid":1,"tid":1,"comm":` + jsonStringOf("e"+all) + `,"syscall":"fdatasync","path":` + jsonStringOf("/x/"+all) +
		`,"dev":` + jsonStringOf("8:0"+all) + `,"fs":` + jsonStringOf("ext4"+all) + `,"file_kind":"wal"}` + "\n"
	if err := os.WriteFile(rec, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	reportOutput(t, "--html", page, rec)
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if i := rawControl(string(b)); i >= 0 {
		t.Errorf("the page has %q raw at byte %d: %q", b[i], i, b[max(0, i-40):min(len(b), i+40)])
	}
	for _, k := range []string{"esc", "cr", "c1", "bidi"} { // invalid UTF-8 the template makes U+FFFD
		if w := render.Escape(hostileStrings[k]); !strings.Contains(string(b), w) {
			t.Errorf("the page does not show %s escaped (%q)", k, w)
		}
	}
}
