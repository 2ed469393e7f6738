package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// analysis returns numbers and typed results; render/, report/ and
// exporter/ write every word a user reads (docs/architecture). What can be
// checked mechanically of that: no non-test file under analysis/ writes
// text to a writer or stdout (fmt.Fprint, Fprintf, Fprintln, Print,
// Printf, Println) or lays out a table (text/tabwriter); and the packages
// in wordless call no fmt function but fmt.Errorf (their errors).
var proseCalls = []string{"Fprint", "Fprintf", "Fprintln", "Print", "Printf", "Println"}

// wordless: packages (directories from the repository root, their
// subpackages not included) that word nothing at all: no fmt call but
// fmt.Errorf, so no Sprintf of a sentence either (issue 26 moved
// analysis/commit's verdicts to render/commit.go, analysis/diagnose's
// findings to render/diagnose_findings.go and diagnose_words.go,
// analysis/etcdmetric's comparison verdict, estimate reasons and leader
// warning to render/peers.go and estimate.go; analysis's disk verdict
// reasons to render/diskwhy.go and its Ms to render.Ms). A package goes here once
// its last sentence has moved out; it does not come off.
var wordless = []string{"analysis", "analysis/commit", "analysis/diagnose", "analysis/etcdmetric", "analysis/jsonl", "analysis/stats"}

// isProse says whether fmt.name writes prose in a package, strictly for
// the wordless ones.
func isProse(name string, strict bool) bool {
	if strict {
		return name != "Errorf"
	}
	return slices.Contains(proseCalls, name)
}

// proseExceptions: files (from the repository root) allowed at most n
// prose calls, each with its reason. A file here that has fewer than n
// fails too, so the number only goes down. None is left (issue 26 moved
// the last, etcdmetric.Compare's verdict, to render/peers.go).
var proseExceptions = map[string]struct {
	n   int
	why string
}{}

// TestAnalysisWritesNoProse fails on a prose call or a tabwriter import in
// a non-test file under analysis/, naming the file and line.
func TestAnalysisWritesNoProse(t *testing.T) {
	counts := map[string]int{}
	var files []string
	err := filepath.WalkDir("../../analysis", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("only %d files under analysis/: wrong directory?", len(files))
	}
	for _, path := range files {
		rel := strings.TrimPrefix(filepath.ToSlash(path), "../../")
		found, err := proseIn(path, nil, slices.Contains(wordless, filepath.ToSlash(filepath.Dir(rel))))
		if err != nil {
			t.Fatal(err)
		}
		counts[rel] = len(found)
		if ex, ok := proseExceptions[rel]; ok {
			if len(found) != ex.n {
				t.Errorf("%s: %d prose calls, its exception allows %d (%s): make the exception say how many there are", rel, len(found), ex.n, ex.why)
			}
			continue
		}
		for _, f := range found {
			t.Errorf("%s: analysis writes no prose or tables (render/, report/ do; docs/architecture.md): %s", rel, f)
		}
	}
	for _, dir := range wordless {
		if _, err := os.Stat(filepath.Join("../..", dir)); err != nil {
			t.Errorf("wordless package %s: %v", dir, err)
		}
	}
	for rel := range proseExceptions {
		if _, ok := counts[rel]; !ok {
			t.Errorf("exception for %s, which is not a file under analysis/ any more: drop it", rel)
		}
	}
}

// proseIn returns, for the Go file at path (or src when not nil), every
// prose call (with strict, every fmt call but fmt.Errorf) and tabwriter
// import as "line N: what".
func proseIn(path string, src any, strict bool) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var found []string
	fmtName := "" // the name "fmt" is imported under, if it is
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		switch p {
		case "text/tabwriter":
			found = append(found, "line "+strconv.Itoa(fset.Position(imp.Pos()).Line)+": imports text/tabwriter")
		case "fmt":
			fmtName = "fmt"
			if imp.Name != nil {
				fmtName = imp.Name.Name
			}
		}
	}
	if fmtName == "" || fmtName == "_" {
		return found, nil
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == fmtName && isProse(sel.Sel.Name, strict) {
			found = append(found, "line "+strconv.Itoa(fset.Position(sel.Pos()).Line)+": fmt."+sel.Sel.Name)
		}
		return true
	})
	return found, nil
}

// TestProseInPlanted: the check finds each kind of violation planted in
// a file (an aliased fmt, a call passed as a value, a tabwriter import)
// and lets fmt.Sprintf and fmt.Errorf be; in a wordless package every fmt
// call but fmt.Errorf is found.
func TestProseInPlanted(t *testing.T) {
	for _, c := range []struct {
		src    string
		want   int
		strict bool // in a wordless package
	}{
		{"package p\nimport \"fmt\"\nfunc f(w io.Writer) { fmt.Fprintf(w, \"the disk is slow\") }\n", 1, false},
		{"package p\nimport f \"fmt\"\nvar p = f.Println\n", 1, false},
		{"package p\nimport \"text/tabwriter\"\nvar w *tabwriter.Writer\n", 1, false},
		{"package p\nimport (\"fmt\"; \"text/tabwriter\")\nfunc g() { fmt.Print(1); _ = tabwriter.Writer{} }\n", 2, false},
		{"package p\nimport \"fmt\"\nfunc g() (string, error) { return fmt.Sprintf(\"%d ms\", 3), fmt.Errorf(\"reading: %w\", nil) }\n", 0, false},
		{"package p\ntype fmtT struct{}\nfunc (fmtT) Fprintf() {}\nvar fmt fmtT\nfunc g() { fmt.Fprintf() }\n", 0, false}, // no fmt import: not fmt's
		{"package p\nimport \"fmt\"\nfunc g() (string, error) { return fmt.Sprintf(\"%d ms\", 3), fmt.Errorf(\"reading: %w\", nil) }\n", 1, true},
		{"package p\nimport \"fmt\"\nfunc g() string { return fmt.Sprint(3) + fmt.Sprintln(\"writes wait\") }\nvar a = fmt.Appendf\n", 3, true},
		{"package p\nimport \"fmt\"\nfunc g() error { return fmt.Errorf(\"commit schema v%d\", 2) }\n", 0, true},
	} {
		found, err := proseIn("planted.go", c.src, c.strict)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != c.want {
			t.Errorf("%q: found %v, want %d", c.src, found, c.want)
		}
	}
}

// Sentences as data: the calls above are not the only way a sentence
// leaves analysis; a string literal that a result carries (a reason, a
// warning, a "source" of a number) reaches the user just the same. So no
// non-test file under analysis/ holds a sentence-like string literal
// (sentenceLike: four words or more, or words around ": "), but for
//   - what it reads rather than writes: literals inside a call of
//     regexp (patterns of the inputs it parses), of strings or bytes
//     (strings.Contains(msg, "failed to send out heartbeat on time"):
//     etcd's, fio's or etcdctl's own words, matched), an operand of == or
//     != and a case of a switch on a value (the same);
//   - errors: literals inside fmt.Errorf and errors.New (a Go error's
//     text is the error's, and the style's errors are short phrases);
//   - struct tags and import paths;
//   - sentenceAllowed, each with its reason.
// A "+" chain of strings is judged as one text, and so are the literals a
// function gives one variable with "=" or ":=" and then "+=" (builtTexts):
// short pieces built into a sentence are one.

// sentenceAllowed: sentence-like literals that stay, by file (from the
// repository root) and literal, each with why it is not a sentence a user
// reads from analysis. One listed but no longer there fails, so the list
// only shrinks.
var sentenceAllowed = []struct{ file, lit, why string }{
	// A stable JSON enum value (MemberWindow.window, docs/diagnose.md),
	// compared by readers; render words each window in full.
	{"analysis/diagnose/metrics.go", "since restart, as given", "a JSON enum value"},
}

// sentenceLike: at least four words (a word: a field with two letters in
// a row once format verbs are cut), or two around ": " ("wal: no Save").
func sentenceLike(s string) bool {
	words := 0
	for _, f := range strings.Fields(fmtVerb.ReplaceAllString(s, " ")) {
		if twoLetters.MatchString(f) {
			words++
		}
	}
	return words >= 4 || (words >= 2 && strings.Contains(s, ": "))
}

var (
	fmtVerb    = regexp.MustCompile(`%[-+# 0-9.*\[\]]*[a-zA-Z]`)
	twoLetters = regexp.MustCompile(`\pL\pL`)
)

// readsText: packages whose calls take text the code reads or matches, not
// text it writes; and the error constructors.
func readsText(pkg, fn string) bool {
	switch pkg {
	case "regexp", "strings", "bytes":
		return true
	case "errors":
		return fn == "New"
	case "fmt":
		return fn == "Errorf"
	}
	return false
}

// sentencesIn returns, for the Go file at path (or src when not nil),
// every sentence-like string literal not exempt (above) as "line N: %q".
func sentencesIn(path string, src any) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	imports := map[string]string{} // local name → import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imports[name] = p
	}
	exempt := map[ast.Node]bool{}
	skipAll := func(n ast.Node) {
		ast.Inspect(n, func(m ast.Node) bool {
			if b, ok := m.(*ast.BasicLit); ok {
				exempt[b] = true
			}
			return true
		})
	}
	var found []string
	judge := func(n ast.Node, text string) {
		if sentenceLike(text) {
			found = append(found, "line "+strconv.Itoa(fset.Position(n.Pos()).Line)+": "+strconv.Quote(text))
		}
	}
	for _, imp := range f.Imports {
		exempt[imp.Path] = true
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.Field:
			if x.Tag != nil {
				exempt[x.Tag] = true
			}
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && readsText(imports[id.Name], sel.Sel.Name) {
					skipAll(x)
				}
			}
		case *ast.BinaryExpr:
			switch x.Op {
			case token.EQL, token.NEQ:
				skipAll(x.X)
				skipAll(x.Y)
			case token.ADD:
				// The outermost "+" chain holding a literal: judged whole.
				if exempt[x] {
					return true
				}
				var text strings.Builder
				var lits []*ast.BasicLit
				for _, o := range chainOperands(x, func(b *ast.BinaryExpr) { exempt[b] = true }) {
					if l := stringLit(o); l != nil {
						s, _ := strconv.Unquote(l.Value)
						text.WriteString(s)
						lits = append(lits, l)
					} else {
						text.WriteString(" ")
					}
				}
				if len(lits) > 0 && !exempt[lits[0]] {
					for _, l := range lits {
						exempt[l] = true
					}
					judge(x, text.String())
				}
			}
		case *ast.SwitchStmt:
			if x.Tag != nil {
				for _, c := range x.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						skipAll(e)
					}
				}
			}
		case *ast.FuncDecl:
			if x.Body != nil {
				for _, b := range builtTexts(x.Body, exempt) {
					judge(b.at, b.text)
				}
			}
		case *ast.BasicLit:
			if x.Kind == token.STRING && !exempt[x] {
				s, err := strconv.Unquote(x.Value)
				if err == nil {
					judge(x, s)
				}
			}
		}
		return true
	})
	return found, nil
}

// chainOperands returns the operands of the "+" chain e (e itself when it
// is no "+"), in order, calling add with each "+" of it.
func chainOperands(e ast.Expr, add func(*ast.BinaryExpr)) []ast.Expr {
	e = ast.Unparen(e)
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.ADD {
		add(b)
		return append(chainOperands(b.X, add), chainOperands(b.Y, add)...)
	}
	return []ast.Expr{e}
}

// stringLit returns e if it is a string literal, else nil.
func stringLit(e ast.Expr) *ast.BasicLit {
	if l, ok := e.(*ast.BasicLit); ok && l.Kind == token.STRING {
		return l
	}
	return nil
}

// builtText is a string a function builds in one variable from pieces,
// each too short to judge alone: s := "biased: "; s += n + " lost event";
// s += ", " + m + " missed probe run" (summary version 2's Bias text).
type builtText struct {
	at   ast.Node // the first assignment
	text string   // its pieces' literals, joined by " "
}

// builtTexts returns, for each variable of body given a string by "=" or
// ":=" and added to with "+=" (a "+" chain of literals and other values
// each time), the text of every literal assigned to it, unless one of
// them is exempt (read, not written) or is judged alone (sentence-like
// by itself, or part of a "+" chain the file's walk judges).
func builtTexts(body *ast.BlockStmt, exempt map[ast.Node]bool) []builtText {
	type acc struct {
		at     ast.Node
		pieces []string
		adds   int
		skip   bool
	}
	vars := map[string]*acc{}
	var order []string
	ast.Inspect(body, func(n ast.Node) bool {
		a, ok := n.(*ast.AssignStmt)
		if !ok || len(a.Lhs) != 1 || len(a.Rhs) != 1 {
			return true
		}
		id, ok := a.Lhs[0].(*ast.Ident)
		if !ok || id.Name == "_" {
			return true
		}
		var lits []*ast.BasicLit
		for _, o := range chainOperands(a.Rhs[0], func(*ast.BinaryExpr) {}) {
			if l := stringLit(o); l != nil {
				lits = append(lits, l)
			}
		}
		if len(lits) == 0 {
			return true
		}
		v := vars[id.Name]
		switch a.Tok {
		case token.ADD_ASSIGN:
			if v == nil {
				return true
			}
			v.adds++
		case token.ASSIGN, token.DEFINE:
			if v == nil {
				v = &acc{at: a}
				vars[id.Name] = v
				order = append(order, id.Name)
			}
		default:
			return true
		}
		for _, l := range lits {
			text, err := strconv.Unquote(l.Value)
			if err != nil || exempt[l] || sentenceLike(text) {
				v.skip = true
			}
			v.pieces = append(v.pieces, text)
		}
		if len(lits) > 1 { // a "+" chain of literals: the file's walk judges it whole
			v.skip = true
		}
		return true
	})
	var out []builtText
	for _, name := range order {
		if v := vars[name]; v.adds > 0 && !v.skip {
			out = append(out, builtText{v.at, strings.Join(v.pieces, " ")})
		}
	}
	return out
}

// TestAnalysisHoldsNoSentences fails on a sentence-like string literal in
// a non-test file under analysis/ that is neither exempt nor allowed,
// naming the file, line and literal.
func TestAnalysisHoldsNoSentences(t *testing.T) {
	seen := map[int]bool{}
	err := filepath.WalkDir("../../analysis", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel := strings.TrimPrefix(filepath.ToSlash(path), "../../")
		found, err := sentencesIn(path, nil)
		if err != nil {
			return err
		}
	next:
		for _, f := range found {
			for i, a := range sentenceAllowed {
				if a.file == rel && strings.HasSuffix(f, ": "+strconv.Quote(a.lit)) {
					seen[i] = true
					continue next
				}
			}
			t.Errorf("%s: %s: a sentence in analysis (return a typed value and word it in render/, report/ or exporter/; docs/architecture.md), or add it to sentenceAllowed with why", rel, f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range sentenceAllowed {
		if !seen[i] {
			t.Errorf("sentenceAllowed: %q is no longer in %s: drop it", a.lit, a.file)
		}
	}
}

// TestSentencesInPlanted: the check finds each kind of sentence planted
// in a file (a const, a reason appended to a result, a Sprintf format, a
// "+" chain, words around ": ") and lets be what analysis reads or
// returns as an error, its codes and its tags.
func TestSentencesInPlanted(t *testing.T) {
	for _, c := range []struct {
		src  string
		want int
	}{
		{"package p\nconst Why = \"unknown: recording has no summary\"\n", 1},
		{"package p\nfunc f(w *W) { w.Missing = append(w.Missing, \"quorum: fewer acks seen than needed\") }\n", 1},
		{"package p\nimport \"fmt\"\nvar s = fmt.Sprintf(\"%s: written %d times and never flushed\", p, n)\n", 1},
		{"package p\nvar s = \"RTT (\" + a + \") + fsync (\" + b + \") of the deciding follower\"\n", 1},
		{"package p\nvar s = \"the disk \" + \"is \" + \"slow\" + x + \" today\"\n", 1}, // one chain, judged whole
		{"package p\nvar a, b = \"wal: no save\", \"wal_append\"\n", 1},
		{"package p\nvar ok, none, label = \"ok\", \"host (L0)\", \"%s → %s (%s)\"\n", 0},
		{"package p\nimport \"errors\"\nvar e = errors.New(\"no finished WAL Save holds the index\")\n", 0},
		{"package p\nimport \"fmt\"\nfunc f() error { return fmt.Errorf(\"reading %s: the file is cut short\", p) }\n", 0},
		{"package p\nimport \"regexp\"\nvar re = regexp.MustCompile(`sync duration of ([0-9.]+), expected less than`)\n", 0},
		{"package p\nimport \"strings\"\nvar b = strings.Contains(msg, \"failed to send out heartbeat on time\")\n", 0},
		{"package p\nimport s \"strings\"\nvar b = s.HasPrefix(msg, \"failed to send out heartbeat\")\n", 0},
		{"package p\nvar b = msg == \"prober detected unhealthy status\" || \"lost the TCP stream to peer\" != msg\n", 0},
		{"package p\nfunc f() { switch msg { case \"apply request took too long\": } }\n", 0},
		{"package p\nfunc f() { switch { case msg == \"apply request took too long\": } }\n", 0},
		{"package p\ntype T struct { A int `json:\"a,omitempty\" help:\"a: the count of it\"` }\n", 0},
		{"package p\nimport \"strconv\"\nfunc f(a, b uint64) string {\n\ts := \"biased: \"\n\tif a > 0 {\n\t\ts += strconv.FormatUint(a, 10) + \" lost event\"\n\t}\n\ts += \", \"\n\ts += strconv.FormatUint(b, 10) + \" missed probe run\"\n\treturn s\n}\n", 1}, // short pieces built into one text
		{"package p\nfunc f(a string) string { s := \"x\"; s += a + \"/\" + \"y\"; return s }\n", 0},                                                                                // a path, not words
		{"package p\nfunc f() { s := \"lost event\"; g(s) }\nfunc g(t string) { t += \"missed run\"; _ = t }\n", 0},                                                                 // two functions' variables
		{"package p\ntype strs struct{}\nfunc (strs) Contains(string, string) bool { return false }\nvar strings strs\nvar b = strings.Contains(m, \"the disk is too slow\")\n", 1}, // not the strings package
	} {
		found, err := sentencesIn("planted.go", c.src)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != c.want {
			t.Errorf("%q: found %v, want %d", c.src, found, c.want)
		}
	}
}
