package main

import (
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/tracer"
	"github.com/spf13/pflag"
)

// buildBinary builds etcdscope into a temp directory: help goes to the
// process's stdout, which a test reads best from a real process.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "etcdscope")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func runBin(t *testing.T, bin string, args ...string) (stdout, stderr string, rc int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		rc = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return o.String(), e.String(), rc
}

// TestSubcommandHelp: every subcommand's --help (and `etcdscope help
// CMD`) exits 0 and prints, to stdout, its one-line purpose, a synopsis,
// at least one example of that subcommand, then its flags; never Go's bare
// "Usage of NAME:".
func TestSubcommandHelp(t *testing.T) {
	bin := buildBinary(t)
	var names []string
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	names = append(names, "netem apply", "netem show", "netem clear")
	for _, n := range names {
		args := append(strings.Fields(n), "--help")
		out, errOut, rc := runBin(t, bin, args...)
		if n == "netem" {
			if rc != 0 || !strings.HasPrefix(out, "etcdscope netem: "+subcommands["netem"].summary) {
				t.Errorf("netem --help: exit %d, stdout %q", rc, out)
			}
			continue
		}
		top, _, _ := strings.Cut(n, " ")
		purpose, ok := verbSummaries[n]
		if !ok {
			if top != n {
				t.Errorf("%s --help: a verb needs a purpose of its own in verbSummaries (its subcommand's lists the verbs)", n)
			}
			purpose = subcommands[top].summary
		}
		switch {
		case rc != 0:
			t.Errorf("%s --help: exit %d; stderr %s", n, rc, errOut)
		case !strings.HasPrefix(out, "etcdscope "+n+": "+purpose+"\n"):
			t.Errorf("%s --help does not open with its purpose:\n%s", n, out)
		case !strings.Contains(out, "\nusage: etcdscope "+n):
			t.Errorf("%s --help has no synopsis:\n%s", n, out)
		case !strings.Contains(out, "\nexamples:\n") || !strings.Contains(out[strings.Index(out, "examples:"):], "etcdscope "+n):
			t.Errorf("%s --help has no example of itself:\n%s", n, out)
		case strings.Contains(out+errOut, "Usage of"):
			t.Errorf("%s --help prints Go's bare usage", n)
		}
		if n != "completion" && !strings.Contains(out, "\nflags:\n") {
			t.Errorf("%s --help lists no flags", n)
		}
		// Every line fits what a user reads first: the number and the
		// cause, the why in docs/ (a fresh user's read found 15 flag lines
		// of 201-254 characters).
		for _, l := range strings.Split(out, "\n") {
			if utf8.RuneCountInString(l) > 200 {
				t.Errorf("%s --help: a line of %d characters: %s", n, utf8.RuneCountInString(l), l)
			}
		}
	}
	out, _, rc := runBin(t, bin, "help", "fsync")
	if rc != 0 || !strings.HasPrefix(out, "etcdscope fsync: ") {
		t.Errorf("etcdscope help fsync: exit %d, %q", rc, out)
	}
	// fsync's purpose lists its layers: every one the analysis splits a
	// call into (the sixth, dm, was missing from it once).
	purpose, _, _ := strings.Cut(out, "\n")
	for _, l := range analysis.LayerNames {
		if !strings.Contains(purpose, strings.ReplaceAll(l, "_", " ")) {
			t.Errorf("etcdscope fsync's purpose does not name the %s layer: %q", l, purpose)
		}
	}
	out, _, rc = runBin(t, bin, "--version")
	if rc != 0 || !strings.HasPrefix(out, "etcdscope ") || !strings.Contains(out, "go1.") {
		t.Errorf("--version: exit %d, %q", rc, out)
	}
	// version's help, asked for either way, is help, not bad input
	// (issue 25: both exited 2, "takes no arguments").
	for _, args := range [][]string{{"version", "--help"}, {"help", "version"}, {"--version", "-h"}} {
		out, errOut, rc := runBin(t, bin, args...)
		if rc != 0 || !strings.HasPrefix(out, "usage: etcdscope version") || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, rc, out, errOut)
		}
	}
}

// writeFsyncRecording writes an fsync recording of n WAL fdatasyncs of total
// ns each, and its summary line.
func writeFsyncRecording(t *testing.T, path string, n int, total int64) {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	var recs []analysis.FsyncRecord
	for i := range n {
		r := analysis.FsyncRecord{Type: "fsync", Version: analysis.SchemaVersion, StartNs: uint64(i) * 1e8, EndNs: uint64(i)*1e8 + uint64(total), TotalNs: total,
			PID: 42, Comm: "etcd", Syscall: "fdatasync", Dev: "254:0", DevName: "vda", FS: "ext4", FileKind: analysis.KindWAL,
			Layers: analysis.Layers{DeviceFlushNs: total / 2, OtherNs: total - total/2}, Flushes: 1}
		recs = append(recs, r)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	rep := analysis.BuildReport(recs, 0, 0, nil)
	if err := enc.Encode(rep); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFailOverBudget: report exits 3 under --fail-over-budget when a WAL
// group's p99 is over etcd's 10 ms budget (after printing the report), 0
// without the flag or when within budget; bad input stays 2.
func TestFailOverBudget(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	slow, fast := filepath.Join(dir, "slow.jsonl"), filepath.Join(dir, "fast.jsonl")
	writeFsyncRecording(t, slow, 100, 20_000_000) // 20 ms each
	writeFsyncRecording(t, fast, 100, 2_000_000)  // 2 ms each
	html := filepath.Join(dir, "page.html")
	for _, c := range []struct {
		args []string
		rc   int
		want string // in stdout
	}{
		{[]string{"report", "--fail-over-budget", slow}, 3, "verdict: OVER BUDGET"},
		{[]string{"report", "--fail-over-budget", "--output", "json", slow}, 3, `"verdict":"over budget"`},
		{[]string{"report", "--fail-over-budget", "--html", html, slow}, 3, ""},
		{[]string{"report", slow}, 0, "verdict: OVER BUDGET"},
		{[]string{"report", "--fail-over-budget", fast}, 0, "verdict: OK"},
		{[]string{"report", "--fail-over-budget", "--output", "xml", slow}, 2, ""},
		{[]string{"report", "--fail-over-budget", filepath.Join(dir, "missing.jsonl")}, 2, ""},
	} {
		out, errOut, rc := runBin(t, bin, c.args...)
		if rc != c.rc || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d (want %d), stdout has %q: %v; stderr %s", c.args[1:], rc, c.rc, c.want, strings.Contains(out, c.want), errOut)
		}
		if rc == 3 && !strings.Contains(errOut, "over budget") {
			t.Errorf("%v: exit 3 without a line saying why: %q", c.args[1:], errOut)
		}
	}
	if _, err := os.Stat(html); err != nil {
		t.Errorf("--html with --fail-over-budget: page not written: %v", err)
	}
}

// TestCompletion sources `etcdscope completion bash` in a real bash and
// completes a command name, netem's verbs and a command's flags (read from
// its --help through the binary); then zsh's script is sourced by a real
// zsh and must register the completion.
func TestCompletion(t *testing.T) {
	bin := buildBinary(t)
	script, _, rc := runBin(t, bin, "completion", "bash")
	if rc != 0 {
		t.Fatalf("completion bash: exit %d", rc)
	}
	f := filepath.Join(t.TempDir(), "etcdscope.bash")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		t.Helper()
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		sh := "source " + f + "; COMP_WORDS=(" + bin + " " + strings.Join(quoted, " ") + "); COMP_CWORD=" +
			strconv.Itoa(len(words)) + "; _etcdscope; printf '%s\\n' \"${COMPREPLY[@]}\""
		out, err := exec.Command("bash", "-c", sh).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Join(strings.Fields(string(out)), " ")
	}
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"fs"}, "fsync"},
		{[]string{"se"}, "serve"},
		{[]string{"netem", "a"}, "apply"},
		{[]string{"serve", "--listen"}, "--listen --listen-public"},
		{[]string{"report", "--fail"}, "--fail-over-budget"},
		{[]string{"netem", "apply", "--del"}, "--delay"},
		{[]string{"completion", ""}, "bash zsh"},
		// Flags named in examples are not the command's: peers' example
		// pipes into report --html; check's runs setpriv --reuid.
		{[]string{"peers", "--ht"}, ""},
		{[]string{"check", "--re"}, ""},
		{[]string{"peers", "--etcd-m"}, "--etcd-metrics"},
	} {
		if got := complete(c.words...); got != c.want {
			t.Errorf("complete %v: %q, want %q", c.words, got, c.want)
		}
	}
	zsh := testenv.LookPath(t, "zsh", "zsh") // after the bash checks: a skip here keeps them
	zscript, _, rc := runBin(t, bin, "completion", "zsh")
	zf := filepath.Join(t.TempDir(), "etcdscope.zsh")
	os.WriteFile(zf, []byte(zscript), 0o644)
	out, err := exec.Command(zsh, "-f", "-c", "source "+zf+" && complete -p etcdscope 2>/dev/null || print -r -- ${_comps[etcdscope]}").CombinedOutput()
	if rc != 0 || err != nil || !strings.Contains(string(out), "_etcdscope") {
		t.Errorf("zsh: sourcing the completion script: exit %d, %v\n%s", rc, err, out)
	}
}

// TestFilterHint: --comm naming no running process says so at start
// (a run that ends with 0 calls has its reason on screen); a running
// comm and a --pid get no hint.
func TestFilterHint(t *testing.T) {
	if h := filterHint(tracer.FsyncConfig{Comm: "no-such-comm-x"}); !strings.Contains(h, `no process named "no-such-comm-x" is running now`) {
		t.Errorf("hint %q", h)
	}
	self := host.Comm(uint32(os.Getpid()))
	if h := filterHint(tracer.FsyncConfig{Comm: self}); h != "" {
		t.Errorf("running comm %q: hint %q", self, h)
	}
	if h := filterHint(tracer.FsyncConfig{PID: uint32(os.Getpid())}); h != "" {
		t.Errorf("pid: hint %q", h)
	}
}

// TestFlagUsageConcise (issue 26): every flag's help is at most
// maxUsageRunes: the number and the cause first, the reasoning in docs/
// (named in the help). Before, 13 ran to 216-402 characters.
func TestFlagUsageConcise(t *testing.T) {
	const maxUsageRunes = 200
	for name, fs := range flagSets(t) {
		fs.VisitAll(func(f *pflag.Flag) {
			if n := utf8.RuneCountInString(f.Usage); n > maxUsageRunes {
				t.Errorf("%s --%s: help of %d characters, at most %d (move the why to docs/):\n%s", name, f.Name, n, maxUsageRunes, f.Usage)
			}
		})
	}
}

// TestDocNamesEverySubcommand: the package doc (main.go) names every
// subcommand, so that a newcomer finds each verb's file from it.
func TestDocNamesEverySubcommand(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil || f.Doc == nil {
		t.Fatalf("main.go's package doc: %v", err)
	}
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(f.Doc.Text(), func(r rune) bool { return !unicode.IsLetter(r) }) {
		words[w] = true
	}
	if len(subcommands) < 10 {
		t.Fatalf("%d subcommands registered: init order?", len(subcommands))
	}
	for name := range subcommands {
		if !words[name] {
			t.Errorf("subcommand %s is not named in main.go's package doc", name)
		}
	}
}
